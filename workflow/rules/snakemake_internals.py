"""Every use of Snakemake's non-public attributes and classes, in one place.

The workflow's .smk files import this module (Snakemake puts each included file's folder on
sys.path) and call its small named functions with the ``workflow`` object; nothing else in
the workflow touches these names. Each says what it works around. tests/test_snakemake_internals.py
fails when a Snakemake upgrade removes or renames any of them: check there first, then here.

Written for Snakemake 9 (pyproject.toml pins the release).
"""

from __future__ import annotations

import inspect
import logging

import snakemake.script
from snakemake.exceptions import IncompleteCheckpointException
from snakemake.logging import logger
from snakemake_interface_logger_plugins.common import LogEvent

# --- the script: directive's interpreter (upstream snakemake issue 2645) ---------------------

# Snakemake's script: directive runs "{py_exec} {fname:q}" with the interpreter (the
# environment's python) unquoted, upstream snakemake issue 2645, so in a checkout whose path
# has a space every script-based job fails with ".../my: No such file or directory".
UNQUOTED_INTERPRETER = "{py_exec} {fname:q}"


def interpreter_quoted(execute_cmd):
    """PythonScript._execute_cmd, with the command's {py_exec} formatted quoted."""

    def quoted(self, cmd, **kwargs):
        return execute_cmd(self, cmd.replace("{py_exec}", "{py_exec:q}"), **kwargs)

    quoted.attnio_quoted = True
    return quoted


def quote_script_interpreter(script_class=snakemake.script.PythonScript):
    """Quote the interpreter of the script: directive's one command (snakemake#2645), by
    wrapping the private PythonScript._execute_cmd; a Snakemake whose command is already quoted
    (or different) is left as it is, and so is one already wrapped."""
    runs_unquoted = UNQUOTED_INTERPRETER in inspect.getsource(script_class.execute_script)
    if runs_unquoted and not getattr(script_class._execute_cmd, "attnio_quoted", False):
        script_class._execute_cmd = interpreter_quoted(script_class._execute_cmd)


# --- what the command line gave (snakemake#2439) ----------------------------------------------


def command_line_configfiles(workflow) -> list[str]:
    """The files given with --configfile. Snakemake reads them before the Snakefile runs and
    says nothing of which one is broken (snakemake#2439); no public name lists them, so the
    Workflow's overwrite_configfiles property is read."""
    return [str(path) for path in workflow.overwrite_configfiles]


def command_line_config(workflow) -> dict:
    """The values of --config (its ConfigSettings.config), which Snakemake has merged into
    ``config`` before the Snakefile runs: no public name keeps them apart."""
    return dict(workflow.config_settings.config)


# --- which kind of invocation this is ----------------------------------------------------------
# The Snakefile runs for a run, a dry run, --touch, --report, --summary and in every cluster
# job's own Snakemake; Snakemake offers no public way to tell which, and the study's checks at
# planning time (damaged files set aside, failed pages rendered again) and its warm workers
# must behave differently in each.


def is_main_process(workflow) -> bool:
    """Whether this is the Snakemake the user started, not a cluster job's own (Workflow's
    is_main_process)."""
    return workflow.is_main_process


def is_dry_run(workflow) -> bool:
    """--dry-run (Workflow's dryrun: the executor plugin's dryrun_exec)."""
    return workflow.dryrun


def plans_jobs(workflow) -> bool:
    """Whether this invocation runs jobs or plans them (a run, a dry run), not --report,
    --summary, --touch and the like, which only read what the last run left (Workflow's
    dryrun, executor_plugin: None where nothing executes, touch)."""
    return workflow.dryrun or (workflow.executor_plugin is not None and not workflow.touch)


def is_real_run(workflow) -> bool:
    """Whether this invocation runs jobs: not a dry run, --touch, --report or --summary."""
    return workflow.executor_plugin is not None and not workflow.dryrun and not workflow.touch


def runs_jobs_here(workflow) -> bool:
    """Whether this Snakemake, the user's, runs the jobs on this host (no cluster executor:
    Workflow's local_exec) — where warm workers can serve them."""
    return workflow.is_main_process and workflow.local_exec


# --- the DAG ----------------------------------------------------------------------------------


def force_remake(workflow, paths) -> None:
    """Plan the jobs that make ``paths`` as --forcerun would (DAG.forcefiles), while Snakemake
    builds the DAG: a failed page's outcome (its inputs unchanged) and, in a dry run, a damaged
    file a real run sets aside. Snakemake has no public way to force a file from the Snakefile."""
    workflow.dag.forcefiles.update(paths)


def rules_to_run(workflow) -> set[str]:
    """The rules of the jobs this run planned to run, finished ones included (DAG.needrun_jobs),
    for the closing lines (onsuccess/onerror get no plan of the run)."""
    return {job.rule.name for job in workflow.dag.needrun_jobs(exclude_finished=False)}


def rules_in_dag(workflow) -> set[str]:
    """The rules of every job in the run's DAG, to run or not (DAG.jobs)."""
    return {job.rule.name for job in workflow.dag.jobs}


def after_checkpoint(workflow, read, otherwise):
    """``read()`` (which asks a checkpoint's outputs); where a checkpoint has not run and this
    invocation plans nothing (--report never counts a checkpoint as done), ``otherwise()``.
    Snakemake signals a checkpoint yet to run with its internal IncompleteCheckpointException,
    which must go on up while it plans."""
    try:
        return read()
    except IncompleteCheckpointException:
        if plans_jobs(workflow):
            raise
        return otherwise()


# --- Snakemake's console lines -----------------------------------------------------------------


class ShortJobInfo(logging.Filter):
    """A rule's job info line with its input said as a count and no reason: Snakemake's
    records of a job's info (LogEvent.JOB_INFO, the logger plugins' interface) carry the
    rule's name, its input and the reason, which its default handler prints; a filter on its
    logger rewrites them before that handler formats them."""

    attnio_job_info = True

    def __init__(self, rule: str, said: str):
        super().__init__()
        self.rule, self.said = rule, said

    def filter(self, record):
        event, name = getattr(record, "event", None), getattr(record, "rule_name", None)
        if event == LogEvent.JOB_INFO and name == self.rule:
            count = len(record.input or [])
            record.input = [f"{count} files, {self.said}"]
            record.reason = None
        return True


def shorten_job_info(rule: str, said: str) -> None:
    """Snakemake's line for the job of ``rule`` says its input as "<count> files, <said>", and
    no reason; installed once per process."""
    if not any(getattr(f, "attnio_job_info", False) for f in logger.filters):
        logger.addFilter(ShortJobInfo(rule, said))
