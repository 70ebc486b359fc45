# A checkout whose path has a space ("OneDrive - Company", "Application Support") must run:
# every rule's shell quotes its paths with :q, but Snakemake's script: directive runs its
# interpreter (the environment's python) unquoted, upstream snakemake issue 2645, so each
# script-based job would fail with ".../my: No such file or directory". Until that is fixed
# upstream, the interpreter of that one command is quoted (snakemake_internals.py, which holds
# every use of Snakemake's internals); a Snakemake whose command is already quoted (or
# different) is left as it is. This file is read in every Snakemake process, so jobs on a
# cluster's nodes get it too.
import snakemake_internals

snakemake_internals.quote_script_interpreter()
