# A checkout whose path has a space ("OneDrive - Company", "Application Support") must run:
# every rule's shell quotes its paths with :q, but Snakemake's script: directive runs
# "{py_exec} {fname:q}" with the interpreter (the environment's python) unquoted, upstream
# snakemake issue 2645, so each script-based job would fail with ".../my: No such file or
# directory". Until that is fixed upstream, the interpreter of that one command is quoted
# here; a Snakemake whose command is already quoted (or different) is left as it is. This
# file is read in every Snakemake process, so jobs on a cluster's nodes get it too.
import inspect

import snakemake.script as snakemake_script

UNQUOTED_INTERPRETER = "{py_exec} {fname:q}"


def interpreter_quoted(execute_cmd):
    """_execute_cmd, with the command's {py_exec} formatted quoted."""

    def quoted(self, cmd, **kwargs):
        return execute_cmd(self, cmd.replace("{py_exec}", "{py_exec:q}"), **kwargs)

    quoted.attnio_quoted = True
    return quoted


def quote_script_interpreter(script_class=snakemake_script.PythonScript):
    runs_unquoted = UNQUOTED_INTERPRETER in inspect.getsource(script_class.execute_script)
    if runs_unquoted and not getattr(script_class._execute_cmd, "attnio_quoted", False):
        script_class._execute_cmd = interpreter_quoted(script_class._execute_cmd)


quote_script_interpreter()
