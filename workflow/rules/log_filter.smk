# `all` asks for every leaf (damage.smk), and Snakemake's line for its job would list each
# (100+ paths, as input and again as reason) just above the run summary: it says how many.
import snakemake_internals

snakemake_internals.shorten_job_info("all", "every leaf of the study (see leaves())")
