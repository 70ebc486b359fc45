"""A report page that raises never takes the others down (reports.pages.outcome): its notebook
job ends well with an outcome naming the notebook's first error line and its log, the index
links the pages that rendered and names the failed one, and the pack holds what exists. The
whole workflow's side (exit status, closing line, the next run) is tested on the shared study
in tests/test_workflow.py."""

from __future__ import annotations

import html
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pandas as pd
import pytest

from reports.pack import local_links, pack
from reports.pages import outcome

ROOT = Path(__file__).resolve().parents[1]
ERROR = "IndexError: single positional indexer is out-of-bounds"


def notebook_with(*sources: str) -> nbformat.NotebookNode:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_markdown_cell("# Predicted on GPUs: a test page")]
    parameters = nbformat.v4.new_code_cell("table = 'results/none.csv'")
    parameters.metadata["tags"] = ["parameters"]
    notebook.cells.append(parameters)
    notebook.cells += [nbformat.v4.new_code_cell(source) for source in sources]
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return notebook


def test_the_first_error_is_the_exception_and_its_first_line():
    notebook = {
        "cells": [
            {"cell_type": "code", "outputs": [{"output_type": "stream", "text": "fine"}]},
            {"cell_type": "code", "outputs": [{"output_type": "error", "ename": "IndexError",
                                               "evalue": "single positional indexer is out-of-bounds\nmore",
                                               "traceback": []}]},
            {"cell_type": "code", "outputs": [{"output_type": "error", "ename": "KeyError", "evalue": "x"}]},
        ]
    }  # fmt: skip
    assert outcome.first_error(notebook) == ERROR
    assert outcome.first_error({"cells": [{"cell_type": "markdown"}]}) is None


def test_an_outcome_is_read_back_and_an_unusable_one_is_named(tmp_path):
    good, bad = tmp_path / "good.outcome.json", tmp_path / "bad.outcome.json"
    failed = outcome.outcome("predicted", False, ERROR, "results/logs/reports/predicted.log", "nb.ipynb")
    outcome.write(good, failed)
    bad.write_text('{"page": "x"')
    assert outcome.read(good) == failed and not outcome.is_ok(good)
    with pytest.raises(outcome.OutcomeError, match="bad.outcome.json: not a page outcome"):
        outcome.read(bad)
    assert not outcome.is_ok(bad) and not outcome.is_ok(tmp_path / "missing.json")
    # only real failures are failures: an unreadable or missing outcome is no page's failure
    assert outcome.failed([good, bad, tmp_path / "missing.json"]) == [failed]
    assert outcome.failure_line(failed).startswith(
        f"predicted: {ERROR} (log: results/logs/reports/predicted.log"
    )


def run_page(
    tmp_path: Path, notebook: nbformat.NotebookNode, published: list[Path], more: tuple[str, ...] = (), **run
):
    template = tmp_path / "predicted.ipynb"
    nbformat.write(notebook, template)
    logs = tmp_path / "results" / "logs" / "reports"
    args = [str(template), str(logs / "predicted.ipynb"), str(logs / "predicted.outcome.json")]
    args += [
        str(logs / "predicted.log"),
        *(f"--replaces={p}" for p in published),
        *more,
        "--",
        "-p",
        "table",
        "t.csv",
    ]
    done = subprocess.run(
        [sys.executable, "-m", "reports.pages.outcome", "run", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        **run,
    )
    return done, logs


def processes_with(marker: str) -> list[int]:
    """Live processes whose environment holds ``marker`` (a page's kernel inherits it)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            ours = proc.name.isdigit() and marker.encode() in (proc / "environ").read_bytes()
            if ours and (proc / "stat").read_text().rpartition(")")[2].split()[0] != "Z":
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def test_a_page_past_its_time_limit_fails_naming_it_and_leaves_no_kernel(tmp_path):
    """A notebook that hangs is stopped at --time-limit (limits.rule_seconds.report), its
    kernel with it: the page fails naming the limit, the job ends well, the notebook as far
    as it ran is kept."""
    marker = f"ATTNIO_TEST_PAGE={tmp_path.name}"
    environment = os.environ | dict([marker.split("=")])
    notebook = notebook_with("import time\ntime.sleep(600)")
    done, logs = run_page(tmp_path, notebook, [], ("--time-limit", "8"), env=environment)
    assert done.returncode == 0, done.stderr
    result = outcome.read(logs / "predicted.outcome.json")
    said = "stopped after the time limit of 8 s per report job (limits.rule_seconds.report)"
    assert result["ok"] is False and result["error"] == said
    assert (logs / "predicted.ipynb").is_file()
    assert not processes_with(marker)


def test_a_page_that_raises_ends_well_with_its_outcome_and_keeps_its_notebook(tmp_path):
    """The notebook job of a page whose cell raises exits 0: its outcome names the first
    error line and its log, the executed notebook (the error in place) stays under logs/,
    and what an earlier run published for the page is removed (it would show old data)."""
    published = [tmp_path / "results" / "reports" / name for name in ("predicted.html", "predicted.ipynb")]
    for path in published:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("an earlier run's page")
    done, logs = run_page(tmp_path, notebook_with("import pandas as pd", "pd.DataFrame().iloc[0]"), published)
    assert done.returncode == 0, done.stderr
    result = outcome.read(logs / "predicted.outcome.json")
    assert result == outcome.outcome(
        "predicted", False, ERROR, str(logs / "predicted.log"), str(logs / "predicted.ipynb")
    )
    assert f"the page predicted failed: {ERROR}" in done.stderr
    executed = json.loads((logs / "predicted.ipynb").read_text())
    assert outcome.first_error(executed) == ERROR
    assert [c["id"] for c in executed["cells"]][:2] == ["cell-0", "cell-1"]  # made stable
    assert ERROR in (logs / "predicted.log").read_text()
    assert not any(path.exists() for path in published)
    # no partial file is left beside the outcome
    assert sorted(p.name for p in logs.iterdir()) == [
        "predicted.ipynb",
        "predicted.log",
        "predicted.outcome.json",
    ]


def test_a_page_that_runs_through_is_rendered_and_published_and_a_missing_template_fails_the_job(tmp_path):
    done, logs = run_page(tmp_path, notebook_with("print(table)"), [])
    assert done.returncode == 0, done.stderr
    assert outcome.read(logs / "predicted.outcome.json")["ok"] is True
    published = [tmp_path / "reports" / name for name in ("predicted.ipynb", "predicted.html")]
    done = subprocess.run(
        [sys.executable, "-m", "reports.pages.publish", str(logs / "predicted.outcome.json")]
        + [str(logs / "predicted.ipynb"), *map(str, published), "--no-input"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert published[0].read_bytes() == (logs / "predicted.ipynb").read_bytes()
    html = published[1].read_text()
    assert html.rstrip().endswith("</html>") and "t.csv" in html and "print(table)" not in html  # code hidden
    # papermill cannot run what is not there: no outcome, the job fails (not the page)
    missing = tmp_path / "elsewhere"
    done = subprocess.run(
        [sys.executable, "-m", "reports.pages.outcome", "run", str(missing / "none.ipynb")]
        + [str(missing / "nb.ipynb"), str(missing / "o.json"), str(missing / "l.log")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode != 0 and "papermill did not run" in done.stderr
    assert not (missing / "o.json").exists()


def test_publishing_a_failed_page_is_refused(tmp_path):
    path = tmp_path / "predicted.outcome.json"
    outcome.write(path, outcome.outcome("predicted", False, ERROR, "l.log", "nb.ipynb"))
    published = [tmp_path / "predicted.ipynb", tmp_path / "predicted.html"]
    done = subprocess.run(
        [sys.executable, "-m", "reports.pages.publish", str(path), "nb.ipynb", *map(str, published)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 1 and f"predicted: {ERROR}" in done.stderr
    assert not any(p.exists() for p in published)


def test_the_index_links_what_rendered_names_what_failed_and_the_pack_holds_what_exists(tmp_path):
    from reports.pages.index import failed_pages, render, validation_summary
    from reports.pages.inputs import METRICS

    point = {"impl": "sdpa", "batch": 1, "heads": 1, "tokens": 16, "head_dim": 16, "dtype": "float32"}
    point |= {"causal": False, "inputs": "normal", "status": "ok", "reason": None}
    metrics = pd.DataFrame([dict.fromkeys(METRICS) | point])
    results = tmp_path / "results"
    logs = results / "logs" / "reports"
    logs.mkdir(parents=True)
    (results / "reports").mkdir()
    (results / "reports" / "storage.html").write_text("<html>storage</html>")
    nbformat.write(notebook_with("1 / 0"), logs / "predicted.ipynb")
    (logs / "predicted.log").write_text(ERROR + "\n")
    failed = outcome.outcome(
        "predicted", False, ERROR, str(logs / "predicted.log"), str(logs / "predicted.ipynb")
    )
    outcome.write(logs / "predicted.outcome.json", failed)
    pages = failed_pages([str(logs / "predicted.outcome.json")], results / "index.html")
    assert pages == [
        {
            "page": "predicted",
            "title": "Predicted on GPUs: a test page",
            "error": ERROR,
            "log": "logs/reports/predicted.log",
            "notebook": "logs/reports/predicted.ipynb",
        }
    ]
    page = render(
        {"device": "cpu"},
        metrics,
        validation_summary([]),
        {"storage": "Storage"},
        pd.DataFrame(),
        failed_pages=pages,
    )
    (results / "index.html").write_text(page)
    shown = html.unescape(page)
    assert "<a href='reports/storage.html'>Storage</a>" in page
    assert "reports/predicted.html" not in page  # a failed page is named, not linked
    assert f"Predicted on GPUs: a test page</strong>: did not render. <code>{ERROR}</code>" in shown
    assert f"The page Predicted on GPUs: a test page did not render: {ERROR}" in shown  # the warning box
    assert {"logs/reports/predicted.log", "logs/reports/predicted.ipynb"} <= set(local_links(page))
    out = tmp_path / "packed"
    assert pack(results / "index.html", out) == []
    assert (out / "reports" / "storage.html").exists() and (
        out / "logs" / "reports" / "predicted.log"
    ).exists()
    assert not (out / "reports" / "predicted.html").exists()
