"""Every non-public Snakemake name the workflow uses sits in workflow/rules/snakemake_internals.py,
and each is still there in the installed Snakemake: a Snakemake upgrade that removes or renames
one fails here, by name, instead of deep in a run. Its functions are checked against stand-ins
for Snakemake's objects (no Snakemake run)."""

import inspect
import logging
import re
from types import SimpleNamespace

import pytest
import snakemake.api  # noqa: F401 (first, as Snakemake starts: its modules import each other)
import snakemake_internals as internals
from snakemake.dag import DAG
from snakemake.exceptions import IncompleteCheckpointException
from snakemake.jobs import Job
from snakemake.script import PythonScript
from snakemake.settings.types import ConfigSettings
from snakemake.workflow import Workflow
from snakemake_interface_logger_plugins.common import LogEvent
from workflow_run import ROOT

# --- Snakemake still has each name ------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["is_main_process", "dryrun", "touch", "executor_plugin", "local_exec", "overwrite_configfiles", "dag"],
)
def test_the_workflow_still_has_each_property_used(name):
    assert isinstance(inspect.getattr_static(Workflow, name), property), name


def test_the_command_lines_config_is_still_where_it_is_read():
    fields = Workflow.__dataclass_fields__
    assert "config_settings" in fields
    assert "config" in ConfigSettings.__dataclass_fields__
    assert "configfiles" in ConfigSettings.__dataclass_fields__  # overwrite_configfiles reads it


def test_the_dag_still_has_forcefiles_and_its_jobs():
    assert "self.forcefiles = set()" in inspect.getsource(DAG.__init__)
    assert "exclude_finished" in inspect.signature(DAG.needrun_jobs).parameters
    assert isinstance(inspect.getattr_static(DAG, "jobs"), property)
    assert "rule" in Job.__slots__


def test_the_script_directive_still_runs_its_interpreter_unquoted():
    """Once upstream quotes it (snakemake#2645), this fails: drop quote_script_interpreter."""
    assert internals.UNQUOTED_INTERPRETER in inspect.getsource(PythonScript.execute_script)
    assert list(inspect.signature(PythonScript._execute_cmd).parameters) == ["self", "cmd", "kwargs"]


def test_a_jobs_info_line_still_carries_what_the_filter_rewrites():
    source = inspect.getsource(Job.log_info)
    for said in ("event=LogEvent.JOB_INFO", "rule_name=", "input=", "reason="):
        assert said in source, said
    from snakemake.logging import logger

    assert isinstance(logger, logging.Logger)


def test_snakemake_still_puts_an_included_files_folder_on_the_path():
    """How the .smk files import snakemake_internals."""
    assert "sys.path.insert(0, snakefile_path_or_uri)" in inspect.getsource(Workflow.include)


# --- the functions, on stand-ins --------------------------------------------------------------


def invocation(kind: str) -> SimpleNamespace:
    """A stand-in workflow for a run, a dry run, --touch, --report (nothing executes)."""
    plugin = None if kind == "report" else object()
    return SimpleNamespace(
        executor_plugin=plugin,
        dryrun=kind == "dry",
        touch=kind == "touch",
        is_main_process=True,
        local_exec=True,
    )


@pytest.mark.parametrize(
    ("kind", "plans", "real"),
    [("run", True, True), ("dry", True, False), ("touch", False, False), ("report", False, False)],
)
def test_the_kind_of_invocation(kind, plans, real):
    workflow = invocation(kind)
    assert internals.plans_jobs(workflow) is plans
    assert internals.is_real_run(workflow) is real
    assert internals.is_dry_run(workflow) is (kind == "dry")


def test_workers_serve_only_the_users_snakemake_running_jobs_here():
    workflow = invocation("run")
    assert internals.runs_jobs_here(workflow)
    workflow.local_exec = False
    assert not internals.runs_jobs_here(workflow)
    workflow.local_exec, workflow.is_main_process = True, False
    assert not internals.runs_jobs_here(workflow) and not internals.is_main_process(workflow)


def test_the_dag_is_forced_and_read_by_rule():
    def job(rule):
        return SimpleNamespace(rule=SimpleNamespace(name=rule))

    class Dag:
        forcefiles = set()
        jobs = [job("index"), job("report_notebook")]

        def needrun_jobs(self, exclude_finished=True):
            assert exclude_finished is False
            return iter([job("index")])

    workflow = SimpleNamespace(dag=Dag())
    internals.force_remake(workflow, ["a"])
    internals.force_remake(workflow, {"b": "why"})
    assert workflow.dag.forcefiles == {"a", "b"}
    assert internals.rules_to_run(workflow) == {"index"}
    assert internals.rules_in_dag(workflow) == {"index", "report_notebook"}


def test_a_checkpoint_yet_to_run_goes_on_up_while_planning_and_falls_back_otherwise():
    def pending():
        raise IncompleteCheckpointException(SimpleNamespace(name="report_notebook"), "out")

    with pytest.raises(IncompleteCheckpointException):
        internals.after_checkpoint(invocation("dry"), pending, lambda: "last run's")
    assert internals.after_checkpoint(invocation("report"), pending, lambda: "last run's") == "last run's"
    assert internals.after_checkpoint(invocation("run"), lambda: "made", lambda: "no") == "made"


def test_the_command_lines_config_files_and_values():
    workflow = SimpleNamespace(
        overwrite_configfiles=[ROOT / "a.yaml"], config_settings=SimpleNamespace(config={"seed": 3})
    )
    assert internals.command_line_configfiles(workflow) == [str(ROOT / "a.yaml")]
    assert internals.command_line_config(workflow) == {"seed": 3}


def test_the_interpreter_is_quoted_once_and_only_where_it_runs_unquoted():
    class Script:
        def execute_script(self, fname):
            self._execute_cmd("{py_exec} {fname:q}", py_exec="/a b/python", fname=fname)

        def _execute_cmd(self, cmd, **kwargs):
            self.ran = cmd

    internals.quote_script_interpreter(Script)
    internals.quote_script_interpreter(Script)
    script = Script()
    script.execute_script("x.py")
    assert script.ran == "{py_exec:q} {fname:q}"

    class Quoted:
        def execute_script(self, fname):
            self._execute_cmd("{py_exec:q} {fname:q}")

        def _execute_cmd(self, cmd, **kwargs):
            pass

    unchanged = Quoted._execute_cmd
    internals.quote_script_interpreter(Quoted)
    assert Quoted._execute_cmd is unchanged


def test_the_target_jobs_info_says_how_many_files():
    short = internals.ShortJobInfo("all", "every leaf")
    record = logging.LogRecord("snakemake", logging.INFO, __file__, 1, "", None, None)
    record.event, record.rule_name, record.input, record.reason = LogEvent.JOB_INFO, "all", ["a", "b"], "why"
    assert short.filter(record) and record.input == ["2 files, every leaf"] and record.reason is None
    other = logging.LogRecord("snakemake", logging.INFO, __file__, 1, "", None, None)
    other.event, other.rule_name, other.input = LogEvent.JOB_INFO, "measure", ["a"]
    assert short.filter(other) and other.input == ["a"]


# --- nowhere else ------------------------------------------------------------------------------

# what the workflow may use anywhere: Snakemake's documented names
PUBLIC_WORKFLOW = {"basedir", "rules", "cores"}
PUBLIC_IMPORTS = {
    "from snakemake.exceptions import WorkflowError",
    "from snakemake.logging import logger",
    "from snakemake.utils import min_version, validate",
}
PRIVATE = re.compile(r"LogEvent|_execute_cmd|\.dag\b|executor_plugin|resource_settings|IncompleteCheckpoint")


def test_no_other_file_of_the_workflow_uses_snakemakes_internals():
    files = [ROOT / "Snakefile", *sorted((ROOT / "workflow" / "rules").glob("*.smk"))]
    for path in files:
        text = path.read_text(encoding="utf-8")
        used = set(re.findall(r"\bworkflow\.(\w+)", text)) - PUBLIC_WORKFLOW
        assert not used, f"{path.name}: workflow.{sorted(used)}: through snakemake_internals.py"
        imports = set(re.findall(r"^[ \t]*(?:from snakemake\b.*|import snakemake\b.*)$", text, re.M))
        assert imports <= PUBLIC_IMPORTS, f"{path.name}: {sorted(imports - PUBLIC_IMPORTS)}"
        assert not PRIVATE.search(text), f"{path.name}: {PRIVATE.search(text)[0]}"
        for name in re.findall(r"\bsnakemake_internals\.(\w+)\(", text):
            assert hasattr(internals, name), f"{path.name}: snakemake_internals.{name}"
    # the package and the scripts import no Snakemake at all (kernels works without it)
    for folder in ("kernels", "reports", "scripts", "workflow/scripts"):
        for path in (ROOT / folder).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            assert not re.search(r"^[ \t]*(from|import) snakemake\b", text, re.M), path
