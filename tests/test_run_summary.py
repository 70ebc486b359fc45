"""The last lines a run prints (kernels.io.run_summary, and the failed pages' closing line of
reports.pages.outcome), worded from stand-in records and folders: no Snakemake run (the
workflow's closing lines are tested on the shared study: tests/test_workflow.py and
tests/test_workflow_copies.py)."""

import os
import re
import time
from collections import namedtuple
from pathlib import Path

import pytest

from kernels.io import run_summary
from kernels.io.records import DamagedRecordError
from reports.pages.outcome import failed_pages_line


@pytest.fixture
def records(tmp_path, monkeypatch):
    """Record files whose content the stand-in read_record gives (a dict, or None: damaged)."""
    held = {}

    def read(path, expect=None):
        if held.get(path) is None:
            raise DamagedRecordError(f"{path}: damaged")
        return held[path]

    def add(name, record, exists=True):
        path = str(tmp_path / name)
        if exists:
            Path(path).write_text("{}")
        held[path] = record
        return path

    monkeypatch.setattr(run_summary, "read_record", read)
    return add


def test_points_are_counted_by_their_records(records, tmp_path):
    paths = [
        records("a.json", {"status": "ok"}),
        records("b.json", {"status": "ok", "contention": {"verdict": "busy"}}),
        records("c.json", {"status": "skipped", "contention": None}),
        records("d.json", None),  # there, but damaged
        records("e.json", None, exists=False),
    ]
    os.utime(paths[1], (1000.0, 2000.0))
    os.utime(paths[0], (1000.0, 1000.0))
    found = run_summary.tally((path, {}) for path in paths)
    assert found.counts == {"ok": 2, "skipped": 1, "damaged": 1, "missing": 1}
    assert found.unusable == paths[3:] and found.busy == 1
    assert found.newest == os.path.getmtime(paths[2])  # the newest usable one

    tables = [tmp_path / "metrics.csv", tmp_path / "backward.csv"]
    lines = run_summary.point_lines(found, tables, "results")
    assert lines[0] == (
        "info",
        "attnio: 5 points: 2 ok, 1 skipped, 1 missing, 1 damaged (why: each record under results/points/)",
    )
    assert lines[1][0] == "warning" and lines[1][1].startswith(
        f"attnio: 1 of them timed while other processes held CPUs their threads needed: the pages "
        f"mark them (why: {tables[0]}, column contention_reason)"
    )
    assert lines[2] == ("warning", f"attnio: no usable record: {paths[3]} and 1 more; a plain run makes them")
    for table in tables:
        table.write_text("")
    why = f"{tables[0]} and {tables[1]}, column reason"
    assert run_summary.point_lines(found, tables, "results")[0][1].endswith(f"(why: {why})")


def test_a_run_with_every_record_usable_says_only_the_count(records, tmp_path):
    found = run_summary.tally([(records("a.json", {"status": "failed"}), {})])
    lines = run_summary.point_lines(found, [tmp_path / "metrics.csv"], "results")
    assert lines == [("info", "attnio: 1 points: 1 failed (why: each record under results/points/)")]
    none = run_summary.point_lines(run_summary.tally([]), [], "results")
    assert none[0][1].startswith("attnio: 0 points: none")


def test_the_index_is_named_or_said_to_be_an_earlier_runs(tmp_path):
    index = tmp_path / "index.html"
    assert run_summary.index_line(index, 0.0, planned=True, run_started=time.time()) is None
    index.write_text("<html></html>")
    made = index.stat().st_mtime
    here = f"attnio: reports: {index}"
    assert run_summary.index_line(index, made - 1, planned=False, run_started=made + 1) == here
    assert run_summary.index_line(index, made - 1, planned=True, run_started=made - 1) == here
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(made))
    stale = f"attnio: reports: {index} is stale: an earlier run made it ({when}), before this run's records"
    # this run was to make it again and stopped first
    assert run_summary.index_line(index, 0.0, planned=True, run_started=made + 1).startswith(stale)
    # a record newer than it
    assert run_summary.index_line(index, made + 1, planned=False, run_started=0.0).startswith(stale)


Usage = namedtuple("Usage", "total used free")


@pytest.mark.parametrize(
    ("usage", "full"),
    [
        (Usage(10 << 30, 0, 64 << 20), False),  # 64 MiB free of a large disk: enough
        (Usage(10 << 30, 0, (64 << 20) - 1), True),
        (Usage(100 << 20, 0, 2 << 20), False),  # 2 % of a small one
        (Usage(100 << 20, 0, 1 << 20), True),
    ],
)
def test_a_failed_run_on_a_full_disk_says_so(monkeypatch, usage, full):
    monkeypatch.setattr(run_summary.shutil, "disk_usage", lambda folder: usage)
    said = run_summary.disk_full_line("results")
    if not full:
        assert said is None
        return
    assert re.match(
        rf"attnio: no space left on device: the file system of results/ has {usage.free:,} bytes free "
        rf"of {usage.total:,}; jobs that write there fail",
        said,
    )


def test_a_folder_that_cannot_be_looked_at_is_no_full_disk(tmp_path):
    assert run_summary.disk_full_line(tmp_path / "missing") is None


def test_the_failed_pages_closing_line_names_each_with_its_error():
    pages = [{"page": "traffic", "error": "KeyError: 'x'"}, {"page": "build", "error": "ValueError: y"}]
    assert failed_pages_line(pages) == (
        "attnio: 2 report page(s) did not render: traffic (KeyError: 'x'); build (ValueError: y); "
        "the index names them with their logs, and the next run renders them again"
    )
