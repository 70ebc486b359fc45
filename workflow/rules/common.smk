# Shared by every rule: the resolved device and the sweep's points, planned by the package's
# study layer (no torch, no triton) with the allowed values of kernels.spec.
from pathlib import Path
import ast
import json
import logging
import os
import time

from snakemake.exceptions import WorkflowError
from snakemake.logging import LogEvent, logger

import kernels.catalog as catalog
from kernels.planning import device as attnio_device
from kernels.planning import point as attnio_point
from kernels.planning import sweep as attnio_sweep
from kernels.planning.point import Point
import kernels.warm.session as attnio_warm

RESULTS = "results"
# One report per notebook template in reports/; its title is the notebook's first heading.
REPORTS = sorted(path.stem for path in Path(workflow.basedir, "reports").glob("*.ipynb"))


# auto: cuda when torch sees a GPU, else cpu. An explicit cuda is kept as asked: its points
# are recorded as skipped (unsupported) on a machine without one.
DEVICE = attnio_device.resolve(config["device"])
ON_GPU = DEVICE == "cuda"
# A grid with tokens_across_cache follows the cache size (config cache_bytes, else the
# machine's largest cache as the timed jobs' threads meet it: the local cores, or on a
# cluster every CPU of the affinity); its T values are listed here once, so every rule reads
# one sweep.
CACHE_BYTES = config.get("cache_bytes") or (
    attnio_device.largest_cache_bytes(DEVICE, threads=workflow.resource_settings.cores)
    if attnio_sweep.asks_for_cache(config["sweep"])
    else None
)
# Implementations of one's own: the configured plugin modules (and any installed package's
# entry point) are imported now, and named in ATTNIO_PLUGINS for every job. A plugin that
# cannot load is reported, naming it and why; the implementations it would have registered
# are left out and the rest of the study runs.
try:
    PLUGIN_PROBLEMS = catalog.use_plugins(config["plugins"])
except ValueError as err:
    raise WorkflowError(str(err)) from None
for problem in PLUGIN_PROBLEMS:
    logger.warning(f"attnio: {problem}; its implementations are left out")
try:
    config["sweep"] = attnio_sweep.resolved(config["sweep"], CACHE_BYTES)
    config["sweep"], LEFT_OUT = attnio_sweep.registered_only(config["sweep"])
except ValueError as err:
    raise WorkflowError(f"sweep: {err}") from None
for warning in LEFT_OUT:
    logger.warning(f"attnio: {warning}")
if not config["sweep"]:
    raise WorkflowError("sweep: no grid has an implementation left to measure")
POINTS = attnio_sweep.points(config["sweep"])
# the matrix products the ceilings time in the stages' shapes: the sweep's dtypes, head
# dimensions and lengths, for the points timed on this device
PRODUCT_SHAPES = attnio_sweep.product_shapes(POINTS, "cuda" if ON_GPU else "cpu")
# Build: every Triton variant for the configured targets, plus the local GPU's on a GPU
# machine (which also fills Triton's cache before anything is timed). One job per
# implementation, dtype, blocks, T and d, so that adding a T or a d builds only its own
# variants and leaves every existing point up to date. A point is skipped when a kernel it
# launches cannot build for the target it runs on: the local GPU; on a CPU the interpreter
# stands in for every configured target, so a failure on any of them skips it.
LOCAL_TARGET = attnio_device.local_target() if ON_GPU else None
BUILD_TARGETS = list(
    dict.fromkeys(config["build"]["targets"] + ([LOCAL_TARGET] if LOCAL_TARGET else []))
)
REQUIRED_TARGETS = [LOCAL_TARGET] if LOCAL_TARGET else BUILD_TARGETS
BUILD_JOBS = attnio_sweep.build_jobs(POINTS) if BUILD_TARGETS else {}
GROUPS = attnio_sweep.groups(POINTS)
# the validations that also check gradients: those of the implementations a backward point uses
BACKWARD_VALIDATIONS = {point.validation_name for point in POINTS if point.backward}
# A measure job's own limit turns a hang into a failed record; SLURM's, a little longer, is
# the backstop where that cannot run.
JOB_MINUTES = config["limits"]["job_seconds"] // 60 + 5
# Every other rule that runs kernel, plugin or notebook code has a limit of its own kind
# (limits.rule_seconds), with SLURM's runtime a little longer in the same way.
RULE_SECONDS = config["limits"]["rule_seconds"]


def rule_minutes(rule):
    return RULE_SECONDS[rule] // 60 + 5


wildcard_constraints:
    **attnio_point.WILDCARD_CONSTRAINTS,


def point_of(wildcards):
    return Point.from_wildcards(wildcards)


def output_of(pattern, point):
    """A rule's output pattern filled in for one point."""
    return pattern.format(**point.wildcards())


# A job that times kernels owns the machine: it asks for every core Snakemake may use, so no
# other job (each takes at least one core) runs beside it. Timed are every measure job on a
# GPU, the torch paths on a CPU (the interpreter is never timed, so its jobs run side by
# side) and the ceilings. On a cluster (no --cores) it asks SLURM for a node of its own.
LOCAL_CORES = workflow.resource_settings.cores


def times_kernels(impl):
    return ON_GPU or not catalog.get(impl).triton


def machine_threads(wildcards=None):
    return LOCAL_CORES or 1


def timed_threads(wildcards):
    return machine_threads() if times_kernels(wildcards.impl) else 1


def threads_option(wildcards, threads):
    """--threads for a local run (the cores Snakemake gave the job); on a cluster, the
    command takes the node's CPU affinity."""
    return ["--threads", threads] if LOCAL_CORES else []


def timed_slurm_extra(wildcards):
    return "--exclusive" if times_kernels(wildcards.impl) else ""


# --- inputs and resources of the rules (evaluated per job) ---


def validation_of(wildcards):
    return output_of(rules.validate.output[0], point_of(wildcards))


def builds_of(wildcards):
    """The build result a point depends on (none for the torch paths or without targets)."""
    point = point_of(wildcards)
    if point.build_name not in BUILD_JOBS:
        return []
    return [output_of(rules.build.output.json, point)]


def preflight_points(wildcards=None):
    """--point with every Triton point of the plan (none: the torch paths launch nothing)."""
    names = [point.name for point in POINTS if point.triton]
    return ["--point", *names] if names else []


# The page the budget's calibration renders on tiny data of its own to time a report job: it
# reads only the records' table, provenance and the model's sizes, which the calibration makes.
CALIBRATION_PAGE = "storage"


def calibration_page(wildcards=None):
    return {
        "template": str(Path(workflow.basedir, "reports", f"{CALIBRATION_PAGE}.ipynb")),
        "parameters": REPORT_INPUTS[CALIBRATION_PAGE],
    }


def budget_report_rules(wildcards=None):
    """Per report, the rules whose outputs its notebook reads (it waits for them)."""
    made_by = {str(out): rule.name for rule in workflow.rules for out in rule.output}
    return {
        name: sorted({made_by[path] for path in inputs.values() if path in made_by})
        for name, inputs in REPORT_INPUTS.items()
    }


def measure_mem_mb(wildcards):
    from kernels.models.cost import predicted_bytes

    need = predicted_bytes(point_of(wildcards))
    return max(1024, int(need / 2**20 * 1.25) + 512)


def notebook_parameters(template):
    """The parameters cell of a report template as {name: default}: the results files the
    report reads, so that the notebook alone says what it needs."""
    cells = json.loads(Path(template).read_text())["cells"]
    cell = next(c for c in cells if "parameters" in c["metadata"].get("tags", []))
    body = ast.parse("".join(cell["source"])).body
    return {a.targets[0].id: ast.literal_eval(a.value) for a in body if isinstance(a, ast.Assign)}


REPORT_INPUTS = {
    name: notebook_parameters(Path(workflow.basedir, "reports", f"{name}.ipynb"))
    for name in REPORTS
}


# Every table the reports read, and the CSV twins of the parquet and build tables: the index
# links each and report.zip packs them.
TABLES = sorted(
    {path for inputs in REPORT_INPUTS.values() for path in inputs.values()}
    | {f"{RESULTS}/metrics.csv", f"{RESULTS}/build.csv"}
)


def report_inputs(wildcards):
    return REPORT_INPUTS[wildcards.report]


def report_outcome(report):
    return f"{RESULTS}/logs/reports/{report}.outcome.json"


RETRIED = []  # retry_failed_pages looks once per run


def retry_failed_pages():
    """A failed page is no finished output: the next run renders it again, changed inputs
    or not (its outcome is forced, as --forcerun would; an unreadable one too). Called while
    Snakemake builds the DAG (from the index's input), before it decides what to run; a dry
    run plans it the same way; --report, --summary and the like change nothing."""
    from reports.pages.outcome import OutcomeError, read

    if not workflow.is_main_process or RETRIED:
        return
    RETRIED.append(True)
    if not plans_jobs():
        return
    for report in REPORTS:
        path = report_outcome(report)
        if not os.path.exists(path):
            continue
        try:
            result = read(path)
        except OutcomeError as err:
            logger.warning(f"attnio: {err}; the page is rendered again")
            workflow.dag.forcefiles.add(path)
            continue
        if not result["ok"]:
            logger.warning(f"attnio: the page {report} failed last time; it is rendered again")
            workflow.dag.forcefiles.add(path)


def plans_jobs():
    """Whether this invocation runs jobs or plans them (a run, a dry run), not --report,
    --summary, --touch and the like, which only read what the last run left."""
    return workflow.dryrun or (workflow.executor_plugin is not None and not workflow.touch)


def page_outcomes():
    """Each report's outcome file, once the checkpoint report_notebook made it. Snakemake's
    --report never counts a checkpoint as done (it plans nothing), so there the outcomes the
    last run left are read as they are."""
    from snakemake.exceptions import IncompleteCheckpointException

    try:
        return {r: checkpoints.report_notebook.get(report=r).output.outcome for r in REPORTS}
    except IncompleteCheckpointException:
        if plans_jobs():
            raise
        return {report: report_outcome(report) for report in REPORTS}


def rendered_pages(wildcards):
    """The pages whose notebook ran through (their outcome says so, once the checkpoint
    report_notebook has run): their HTML and executed notebook. A failed page is not asked
    for; the index names it from its outcome."""
    from reports.pages.outcome import is_ok

    retry_failed_pages()
    outcomes = page_outcomes()
    ok = [report for report, path in outcomes.items() if is_ok(path)]
    return {
        "reports": expand(rules.report_html.output.html, report=ok),
        "notebooks": expand(rules.report_html.output.notebook, report=ok),
    }


def papermill_parameters(wildcards, input):
    return [arg for name in report_inputs(wildcards) for arg in ("-p", name, input[name])]


def report_heading(name):
    """A report's first heading, up to its colon: the page's name in `snakemake --report`."""
    cells = json.loads(Path(workflow.basedir, "reports", f"{name}.ipynb").read_text())["cells"]
    text = "".join(next(c for c in cells if c["cell_type"] == "markdown")["source"])
    return text.splitlines()[0].lstrip("# ").split(":")[0].strip()


# The implementations each page is about, as `snakemake --report` labels them: the build page
# the sweep's Triton kernels, the tile-softmax page the two kernels the tile_errors rule
# compares, the predicted page both Triton paths on each GPU; every other page the sweep's all.
SWEPT = list(dict.fromkeys(point.impl for point in POINTS))
PAGE_IMPLEMENTATIONS = {
    "build": [impl for impl in SWEPT if catalog.get(impl).triton],
    "tile_softmax": ["triton_tile_softmax", "triton_flash"],
    "predicted": ["triton_naive", "triton_flash"],
}


def report_labels(wildcards):
    impls = PAGE_IMPLEMENTATIONS.get(wildcards.report, SWEPT)
    return {"page": report_heading(wildcards.report), "implementations": ", ".join(impls) or "none"}


# --- the study's leaves: every file the study keeps ---


def record_fields(point):
    """What a point's file name says its record holds."""
    return {"impl": point.impl, **point.shape(), "inputs": point.inputs}


def verdict_fields(point):
    """What a validation result's file name says each of its rows is about."""
    return {name: getattr(point, name) for name in ("impl", "dtype", "block_m", "block_n")}


def build_points_of(job):
    """A build result names only points its own build job (its file name) compiles."""

    def elsewhere(name):
        try:
            return Point.from_name(name).build_name != job
        except ValueError:
            return True

    def strays(result):
        found = [name for name in result["points"] if elsewhere(name)]
        return f"names the point {found[0]}, which is not built by {job}" if found else None

    return strays


def table_kind(path):
    """The leaf kind (kernels.io.records.read_leaf) of a file the reports read: a table of
    tables.schema.json is held to its schema and its seal; one collected from the other
    leaves (metrics, stages, stage_times, build.csv) to its seal (kernels.io.seal), so one
    cut short at a row's end is made again too."""
    from kernels.io.records import table_schemas

    name = Path(path).name
    json_kinds = {"env": "env", "ceilings": "ceilings", "softmax_example": "softmax_example"}
    if name.endswith(".json"):
        return json_kinds.get(name.removesuffix(".json"))
    if name in table_schemas()["tables"]:
        return "table"
    return "sealed" if name.endswith((".csv", ".parquet")) else None


def leaves():
    """Every file the study keeps, as {path: (kind, what its file name says it holds)}: the
    records, verdicts and build results; the ceilings, provenance and model tables; the
    collected tables; the reports' outcomes, the index and its packed copy (the reports and
    their executed notebooks are checked with them: published_pages).
    `all` asks for each, so a deleted one is made again although what was built from it is
    newer than it, and so is a damaged one (set_aside_damaged)."""
    found = {}
    for p in POINTS:
        found[output_of(rules.measure.output[0], p)] = ("record", record_fields(p))
        found[output_of(rules.validate.output[0], p)] = ("validation", verdict_fields(p))
    for job, names in BUILD_JOBS.items():
        build = output_of(rules.build.output.json, Point.from_name(names[0]))
        found[build] = ("build", build_points_of(job))
    found |= {table: (table_kind(table), None) for table in TABLES}
    # every page's outcome (rendered or failed: report_outcome); the pages themselves are the
    # index's inputs once their outcome says they rendered (published_pages)
    found |= {report_outcome(report): (None, None) for report in REPORTS}
    found[rules.index.output[0]] = ("page", None)
    found[rules.pack.output[0]] = (None, None)
    return found


def published_pages():
    """Every report's HTML and executed notebook as {path: (kind, None)}: looked at for
    damage where they are, made (or not, for a page that failed) through the index."""
    return {path: ("page", None) for path in expand(rules.report_html.output, report=REPORTS)}


def point_files(wildcards=None):
    """Each point by its fields, with its record and its job's log relative to results/:
    the index links them."""
    return [
        {"impl": p.impl, **p.shape(), "inputs": p.inputs, "pass": p.direction}
        | {
            "record": os.path.relpath(output_of(rules.measure.output[0], p), RESULTS),
            "log": os.path.relpath(output_of(rules.measure.log[0], p), RESULTS),
        }
        for p in POINTS
    ]


def damaged_leaves(files):
    """{path: why} for each leaf that is there but cannot be used as it is: unreadable,
    empty, cut short, not JSON, off the schema of its kind, or saying something else than
    its file name (kernels.io.records.read_leaf)."""
    from kernels.io.records import DamagedRecordError, read_leaf

    found = {}
    for path, (kind, expect) in files.items():
        if kind is None or not os.path.isfile(path):
            continue
        try:
            read_leaf(path, kind, expect)
        except DamagedRecordError as err:
            found[path] = str(err)
    return found


LOOKED_FOR_DAMAGE = []  # set_aside_damaged looks once per run


def set_aside_damaged(files):
    """A damaged leaf (damaged_leaves) is named with the reason on the console and in
    Snakemake's log. A real run renames it to <name>.damaged, so that, missing, it is made
    again like a deleted one; a dry run (or --touch, --report, --summary) changes nothing,
    and a dry run plans the remaking as the real run will. Called while Snakemake builds the
    DAG (from `all`'s input), when it knows which kind of run this is, before it has looked
    at any file; only the main process looks, a cluster job's own Snakemake does not."""
    if not workflow.is_main_process or LOOKED_FOR_DAMAGE:
        return
    LOOKED_FOR_DAMAGE.append(True)
    damaged = damaged_leaves(files)
    real = workflow.executor_plugin is not None and not workflow.dryrun and not workflow.touch
    for path, why in damaged.items():
        if real:
            os.replace(path, f"{path}.damaged")
            logger.warning(f"Damaged, set aside as {path}.damaged to be made again: {why}")
        else:
            logger.warning(
                f"Damaged: {why} (a real run sets it aside as {path}.damaged and remakes it)"
            )
    if damaged and workflow.dryrun:
        # the plan the real run will follow: the jobs that make them again, and what follows
        workflow.dag.forcefiles.update(damaged)


def study_targets(wildcards):
    """`all`'s input: every leaf of the study, each checked for damage first."""
    files = leaves()
    set_aside_damaged(files | published_pages())
    return sorted(files)


# One warm worker per lane for the jobs' commands (kernels.warm): started by the first job
# that needs it, ended with the run; a cluster's jobs run on other hosts and start their own
# processes.
WARM_RUN = {}


def start_workers():
    """The run's worker folder (results/logs/worker/run-<pid>-<start>), named to every job;
    where it cannot be made, every job runs in its own process."""
    if workflow.is_main_process and workflow.local_exec:
        try:
            WARM_RUN["run"] = attnio_warm.begin(RESULTS, config["limits"]["worker_leak_mb"])
        except OSError as err:
            logger.warning(f"attnio: no warm workers ({err}); every job starts its own process")


def end_workers():
    attnio_warm.end(WARM_RUN.pop("run", None))


def print_run_summary(failed=False):
    """The last lines a run prints: the configured points counted by the records on disk
    (ok, skipped, failed; missing: no record; damaged: one that cannot be used), and where
    to look; ``failed``: a run that ended in an error, also whether results/ is out of room."""
    from collections import Counter
    from kernels.io.records import DamagedRecordError, read_record

    counts, unusable, busy, newest = Counter(), [], 0, 0.0
    for point in POINTS:
        path = output_of(rules.measure.output[0], point)
        try:
            record = read_record(path, record_fields(point))
            counts[record["status"]] += 1
            busy += (record.get("contention") or {}).get("verdict") == "busy"
            newest = max(newest, os.path.getmtime(path))
        except DamagedRecordError:
            counts["damaged" if os.path.exists(path) else "missing"] += 1
            unusable.append(path)
    kinds = ("ok", "skipped", "failed", "missing", "damaged")
    said = ", ".join(f"{counts[s]} {s}" for s in kinds if counts[s]) or "none"
    table = Path(RESULTS, "metrics.csv")
    tables = [table] + [Path(RESULTS, "backward.csv")] * any(p.backward for p in POINTS)
    why = (
        f"{' and '.join(map(str, tables))}, column reason"
        if all(t.exists() for t in tables)
        else f"each record under {RESULTS}/points/"
    )
    logger.info(f"attnio: {len(POINTS)} points: {said} (why: {why})")
    if busy:
        logger.warning(
            f"attnio: {busy} of them timed while other processes held CPUs their threads "
            f"needed: the pages mark them (why: {table}, column contention_reason); to time "
            "them again, delete their records and run again on a quiet machine"
        )
    if unusable:
        more = f" and {len(unusable) - 1} more" if len(unusable) > 1 else ""
        logger.warning(f"attnio: no usable record: {unusable[0]}{more}; a plain run makes them")
    said = index_line(Path(RESULTS, "index.html"), newest)
    if said:
        logger.info(said)
    said = disk_full_line(RESULTS) if failed else None
    if said:
        logger.error(said)
    failed_pages_end_the_run()


# Less room than this where results/ is (64 MiB, or 2 % of a smaller file system): a job
# that failed there most likely found none (its log may be empty, having had no room either).
LOW_ROOM_BYTES = 64 << 20
LOW_ROOM_SHARE = 0.02


def disk_full_line(folder):
    """A failed run's closing line when the results' file system is (nearly) full, or None."""
    import shutil

    try:
        usage = shutil.disk_usage(folder)
    except OSError:
        return None
    if usage.free >= min(LOW_ROOM_BYTES, LOW_ROOM_SHARE * usage.total):
        return None
    return (
        f"attnio: no space left on device: the file system of {folder}/ has {usage.free:,} "
        f"bytes free of {usage.total:,}; jobs that write there fail (their logs may be empty, "
        "having no room either) and nothing partial is kept under a final name: free some "
        "space and run again, which makes what is missing"
    )


# When this run began reading the workflow: an index older than this, which the run's plan
# was to make again, is the last run's.
RUN_STARTED = time.time()


def index_line(index, newest_record):
    """Where the reports are; or that the index there is an earlier run's, and from when:
    this run was to make it again and stopped first (a failed job, Ctrl-C), or a record is
    newer than it (a run that left the index out, --until, --omit-from)."""
    if not index.exists():
        return None
    planned = any(
        job.rule.name == "index" for job in workflow.dag.needrun_jobs(exclude_finished=False)
    )
    made = index.stat().st_mtime
    if (planned and made < RUN_STARTED) or made < newest_record:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(made))
        return (
            f"attnio: reports: {index} is stale: an earlier run made it ({when}), before "
            "this run's records, so it does not show them; a plain run makes it again"
        )
    return f"attnio: reports: {index}"


def failed_pages_end_the_run():
    """A page that did not render (its outcome, reports.pages.outcome) is named with its first
    error line and its log, and, when this run's plan held the pages, ends the run non-zero
    (the others rendered and the index names it): its closing line names each such page.
    The next run renders it again (retry_failed_pages)."""
    from reports.pages.outcome import failed, failure_line

    pages = failed(report_outcome(report) for report in REPORTS)
    if not pages:
        return
    for page in pages:
        logger.error(f"attnio: page failed: {failure_line(page)}")
    planned = any(job.rule.name == "report_notebook" for job in workflow.dag.jobs)
    if planned:
        # the closing line, and the run's exit status (a raised error would add its traceback)
        said = "; ".join(f"{page['page']} ({page['error']})" for page in pages)
        logger.error(
            f"attnio: {len(pages)} report page(s) did not render: {said}; the index names "
            "them with their logs, and the next run renders them again"
        )
        raise SystemExit(1)


class TargetJobInfo(logging.Filter):
    """`all` asks for every leaf, and Snakemake's line for its job would list each (100+
    paths, as input and again as reason) just above the run summary: it says how many."""

    attnio_target_info = True

    def filter(self, record):
        event, name = getattr(record, "event", None), getattr(record, "rule_name", None)
        if event == LogEvent.JOB_INFO and name == "all":
            count = len(record.input or [])
            record.input = [f"{count} files, every leaf of the study (see leaves())"]
            record.reason = None
        return True


if not any(getattr(f, "attnio_target_info", False) for f in logger.filters):
    logger.addFilter(TargetJobInfo())
