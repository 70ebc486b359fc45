# The report pages: what each notebook reads (its parameters cell), the tables the reports
# read, each page's outcome and what the index links (the pages that rendered, every point's
# record and log), and how `snakemake --report` labels each page. A page that failed is
# rendered again by the next run (failed_pages.smk).
import ast
import json
import os
from pathlib import Path

import kernels.catalog as catalog
import snakemake_internals
from kernels.io.benchmarks import study_records


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


def page_outcomes():
    """Each report's outcome file, once the checkpoint report_notebook made it. Snakemake's
    --report never counts a checkpoint as done (it plans nothing), so there the outcomes the
    last run left are read as they are."""
    return snakemake_internals.after_checkpoint(
        workflow,
        lambda: {r: checkpoints.report_notebook.get(report=r).output.outcome for r in REPORTS},
        lambda: {report: report_outcome(report) for report in REPORTS},
    )


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


def study_benchmarks(wildcards=None):
    """Where every job of this study writes its benchmark record: each rule's `benchmark:`
    filled in with every point's wildcards and every report's. The index tables these and
    names any other record under benchmarks/ as stale (kernels.io.benchmarks)."""
    patterns = [str(getattr(rules, r.name).benchmark) for r in workflow.rules if r.benchmark]
    fills = [p.wildcards() for p in POINTS] + [{"report": report} for report in REPORTS]
    return study_records(patterns, fills)


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
