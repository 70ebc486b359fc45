"""Where a run's time went (kernels.io.benchmarks): every rule that runs code has a
``benchmark:`` record spelled as its log is, the records of a small made-up run read into a
table per job and one per rule, a warm worker's own use taken from the job's log, and the
index's section that shows them."""

import mmap
import re
import time
from pathlib import Path

import pandas as pd
import pytest
from workflow_run import ROOT

from kernels.io import benchmarks
from reports.pages import index

HEAD = "\t".join(benchmarks.RECORD_COLUMNS) + "\n"


def record(path, *rows):
    """A benchmark record as Snakemake writes it: a header, a row per repeat
    (s, cpu_time, max_rss, io_in, io_out; None: NA, a job too short to be sampled)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for s, cpu, rss, io_in, io_out in rows:
        na = lambda v: "NA" if v is None else str(v)  # noqa: E731
        lines.append(
            "\t".join(
                [str(s), "0:00:01", na(rss), na(rss), na(rss), na(rss), na(io_in), na(io_out), "50", na(cpu)]
            )
        )
    path.write_text(HEAD + "".join(line + "\n" for line in lines))


POINT = "triton_flash/float16/B1-H1-T16-d16-causal-bm16-bn32-normal"
OTHER = "sdpa/float32/B1-H1-T100-d16-causal-na-normal"


@pytest.fixture
def results(tmp_path):
    """A made-up run's results/: records of rules with and without wildcards, one repeated,
    one not sampled, the index's own (left out), a file that is no record, and the warm
    worker's line in one measure job's log."""
    folder = tmp_path / "results"
    marks = folder / "benchmarks"
    record(marks / "env.tsv", (1.5, 1.2, 80.0, 0.1, 0.2))
    record(marks / "measure" / f"{POINT}.tsv", (4.0, 0.3, 40.0, 0.0, 0.0))
    record(marks / "measure" / f"{OTHER}.tsv", (2.0, 1.9, 300.0, 1.0, 0.5))
    record(marks / "gather" / "sdpa_float32.tsv", (0.01, None, None, None, None))
    record(marks / "report_notebook" / "storage.tsv", (6.0, 5.0, 200.0, 1, 1), (8.0, 7.0, 250.0, 1, 1))
    record(marks / "index.tsv", (100.0, 1.0, 10.0, 0, 0))
    (marks / "notes.tsv").write_text("not a record\n")
    log = folder / "logs" / "measure" / f"{POINT}.log"
    log.parent.mkdir(parents=True)
    log.write_text("measure: ok\n" + benchmarks.usage_line(4242, 3.25, 512.34) + "\n")
    return folder


def test_every_rule_that_runs_code_has_a_benchmark_spelled_as_its_log():
    """<rule>.tsv without wildcards, else <rule>/<the log's wildcards>.tsv; where the log is
    logs/<rule>/<job>.log (the warm jobs'), the benchmark mirrors it exactly, so that the
    table finds the worker's line in the job's log."""
    checked = []
    for smk in sorted((ROOT / "workflow" / "rules").glob("*.smk")):
        text = smk.read_text()
        for block in re.split(r"^(?=(?:rule|checkpoint) )", text, flags=re.M)[1:]:
            rule = re.match(r"(?:rule|checkpoint) (\w+):", block)[1]
            runs = re.search(r"^    (shell|script|run|notebook):", block, re.M)
            mark = re.search(r'^    benchmark:\n        f"\{RESULTS\}/benchmarks/(.*)"$', block, re.M)
            if not runs or (rule == "budget" and not mark):  # budget's is its own change's
                continue
            assert mark, f"{smk.name}: rule {rule} runs code and has no benchmark"
            log = re.search(r'^    log:\n        f"\{RESULTS\}/logs/(.*)\.log",$', block, re.M)[1]
            wildcards = sorted(re.findall(r"\{[^}]*\}", log))
            if not wildcards:
                assert mark[1] == f"{rule}.tsv", rule
            else:
                assert mark[1].startswith(f"{rule}/") and mark[1].endswith(".tsv"), rule
                assert sorted(re.findall(r"\{[^}]*\}", mark[1])) == wildcards, rule
            if log.startswith(f"{rule}/"):
                assert mark[1] == f"{log}.tsv", rule
            checked.append(rule)
    assert set(checked) - {"budget"} == {
        *("env", "build", "build_table", "preflight", "validate", "tile_errors", "ceilings", "measure"),
        *("gather", "collect", "model", "predict", "predict_stages", "backward_model"),
        *("report_notebook", "report_html", "index", "pack", "profile_ncu", "profile_summary", "gpu_tests"),
    }


def test_each_job_is_a_row_and_a_warm_workers_line_replaces_its_clients_use(results):
    marks = results / "benchmarks"
    rows = benchmarks.job_rows(benchmarks.read_records(None, marks, ["index"]), marks, results / "logs")
    by_job = {(r["rule"], r["job"]): r for r in rows}
    assert set(by_job) == {
        ("env", "env"),
        ("measure", POINT),
        ("measure", OTHER),
        ("gather", "sdpa_float32"),
        ("report_notebook", "storage"),
    }
    assert all(list(r) == list(benchmarks.JOB_COLUMNS) for r in rows)
    warm = by_job["measure", POINT]
    assert (warm["wall_s"], warm["cpu_s"], warm["max_rss_mb"]) == (4.0, 3.25, 512.3)
    assert warm["measured_in"] == "warm worker"
    assert (warm["client_cpu_s"], warm["client_max_rss_mb"], warm["io_in_mb"]) == (0.3, 40.0, None)
    assert warm["benchmark"] == f"benchmarks/measure/{POINT}.tsv"
    cold = by_job["measure", OTHER]
    assert (cold["cpu_s"], cold["max_rss_mb"], cold["client_cpu_s"]) == (1.9, 300.0, None)
    assert cold["measured_in"] == "job"
    repeated = by_job["report_notebook", "storage"]  # the mean of the repeats, the peak's largest
    assert (repeated["wall_s"], repeated["cpu_s"], repeated["max_rss_mb"]) == (7.0, 6.0, 250.0)
    unsampled = by_job["gather", "sdpa_float32"]
    assert (unsampled["wall_s"], unsampled["cpu_s"], unsampled["max_rss_mb"]) == (0.01, None, None)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", repeated["finished"])


def test_rules_are_added_up_the_most_time_first(results):
    marks = results / "benchmarks"
    records = benchmarks.read_records(None, marks, ["index"])
    rules = benchmarks.rule_rows(benchmarks.job_rows(records, marks, results / "logs"))
    assert [r["rule"] for r in rules] == ["report_notebook", "measure", "env", "gather"]
    measure = rules[1]
    assert (measure["jobs"], measure["total_wall_s"], measure["median_wall_s"], measure["max_wall_s"]) == (
        2,
        6.0,
        3.0,
        4.0,
    )
    assert (measure["total_cpu_s"], measure["peak_rss_mb"]) == (5.15, 512.3)
    assert measure["measured_in"] == "job, warm worker"
    assert measure["share_of_wall"] == round(6.0 / (7.0 + 6.0 + 1.5 + 0.01), 3)
    gather = rules[-1]
    assert (gather["total_cpu_s"], gather["peak_rss_mb"]) == (None, None)


def test_the_tables_are_written_and_read_back_by_the_index(results, tmp_path):
    jobs_csv, rules_csv = results / "benchmarks.csv", results / "benchmarks_by_rule.csv"
    tables = (jobs_csv, rules_csv, results / "benchmarks_left_out.csv")
    benchmarks.write_tables(results / "benchmarks", results / "logs", tables, ["index"])
    jobs, rules = pd.read_csv(jobs_csv), pd.read_csv(rules_csv)
    assert list(jobs.columns) == list(benchmarks.JOB_COLUMNS) and len(jobs) == 5
    assert list(rules.columns) == list(benchmarks.RULE_COLUMNS) and len(rules) == 4
    assert "index" not in set(jobs["rule"])

    section = index.time_spent(rules, "benchmarks.csv", "benchmarks_by_rule.csv")
    assert "<h2 id='time'>Where the run's time went</h2>" in section
    assert "<a href='benchmarks.csv'>" in section and "<a href='benchmarks_by_rule.csv'>" in section
    assert "warm worker" in section and "The index and the pack are not counted" in section
    cells = re.findall(r"<tr><td>(\w+)</td><td>(\d+)</td><td>([\d.,]+)</td><td>([\d.]+) %</td>", section)
    assert cells[:2] == [("report_notebook", "1", "7", "48.2"), ("measure", "2", "6", "41.4")]

    empty = tmp_path / "none"
    benchmarks.write_tables(
        empty, None, tuple(empty.with_suffix(f".{n}.csv") for n in ("jobs", "rules", "left"))
    )
    assert empty.with_suffix(".rules.csv").read_text() == ",".join(benchmarks.RULE_COLUMNS) + "\n"
    from reports.pages import inputs

    none = index.time_spent(inputs.read("benchmarks_by_rule", empty.with_suffix(".rules.csv")), "a", "b")
    assert "No job of this study left a benchmark record" in none


def test_stale_and_damaged_records_are_left_out_and_named_by_the_index_and_the_budget(results):
    """One reader for the index's tables and the budget: a record of a point no longer in the
    sweep (500 s of it would be most of the run) is stale, one cut to its header or full of
    garbage is damaged; neither is counted, and the page names each kind with its files."""
    marks = results / "benchmarks"
    stale = marks / "measure" / "sdpa/float32/B1-H1-T999-d16-causal-na-normal.tsv"
    record(stale, (500.0, 1.0, 10.0, 0, 0))
    cut, garbage = marks / "measure" / f"{OTHER}.tsv", marks / "collect.tsv"
    cut.write_text(HEAD)
    garbage.write_bytes(b"\xff\x00\x9c garbage \x01" * 40)
    planned = [f"{marks}/{name}.tsv" for name in ("env", f"measure/{POINT}", f"measure/{OTHER}")]
    planned += [f"{marks}/{name}.tsv" for name in ("gather/sdpa_float32", "report_notebook/storage")]
    planned += [f"{marks}/{name}.tsv" for name in ("collect", "index", "model")]  # model: not yet run
    found = benchmarks.read_records(planned, marks, ["index"])
    assert found.stale == [
        str(marks / "measure" / "sdpa/float32/B1-H1-T999-d16-causal-na-normal.tsv"),
        str(marks / "notes.tsv"),
    ]
    assert found.damaged == {
        str(cut): "cut to its header: no row",
        str(garbage): "unreadable: not text",
    }
    tables = tuple(
        results / f"{name}.csv" for name in ("benchmarks", "benchmarks_by_rule", "benchmarks_left_out")
    )
    jobs, rules, left = benchmarks.write_tables(marks, results / "logs", tables, ["index"], planned)
    assert {(j["rule"], j["job"]) for j in jobs} == {
        ("env", "env"),
        ("measure", POINT),
        ("gather", "sdpa_float32"),
        ("report_notebook", "storage"),
    }
    assert sum(r["share_of_wall"] for r in rules) == pytest.approx(1.0, abs=0.002)
    assert max(r["total_wall_s"] for r in rules) < 500
    assert [(r["left_out"], r["benchmark"]) for r in left] == [
        (benchmarks.STALE, "benchmarks/measure/sdpa/float32/B1-H1-T999-d16-causal-na-normal.tsv"),
        (benchmarks.STALE, "benchmarks/notes.tsv"),
        (benchmarks.DAMAGED, f"benchmarks/measure/{OTHER}.tsv"),
        (benchmarks.DAMAGED, "benchmarks/collect.tsv"),
    ]
    from reports.pages import inputs

    section = index.time_spent(
        inputs.read("benchmarks_by_rule", tables[1]),
        "j",
        "r",
        inputs.read("benchmarks_left_out", tables[2]),
        "l",
    )
    said = re.search(r"Left out of these tables: ([^<]*)", section)[1]
    assert f"{benchmarks.STALE} (2 records): " in said and f"{benchmarks.DAMAGED} (2 records): " in said
    assert "benchmarks/measure/sdpa/float32/B1-H1-T999-d16-causal-na-normal.tsv" in said
    assert f"benchmarks/measure/{OTHER}.tsv (cut to its header: no row)" in said
    assert "benchmarks/collect.tsv (unreadable: not text)" in said and "<a href='l'>" in section
    # the budget: the same records stand for their jobs, the damaged ones said
    from kernels.models import budget

    jobs = [budget.Job(Path(p).parent.name, str(i), benchmark=p) for i, p in enumerate(planned)]
    said = []
    costed = budget.recorded(jobs, said)
    assert {j.benchmark for j in costed} == set(found.found) | {f"{marks}/index.tsv"}
    assert len(said) == 1 and said[0].startswith(f"2 benchmark record(s) {benchmarks.DAMAGED}")
    assert str(cut) in said[0] and str(garbage) in said[0]


def test_a_benchmark_record_is_damaged_unless_whole(tmp_path):
    """Empty, cut to its header, another header, no number of seconds, negative seconds, more
    seconds than any job runs: each
    named; a row whose memory was not sampled (NA) is whole."""
    path = tmp_path / "x.tsv"
    for text, why in (
        ("", "empty"),
        (HEAD, "cut to its header: no row"),
        ("a\tb\n1\t2\n", "not a benchmark record: its header is not Snakemake's"),
        (HEAD + "x\t" * 9 + "x\n", "no wall time (s) in any row"),
        (HEAD + "-3\t" * 9 + "1\n", "a negative wall time: -3.0 s"),
        (HEAD + "1e308\t" * 9 + "1\n", "a wall time of 1e+308 s, longer than any job runs (a day)"),
    ):
        path.write_text(text)
        with pytest.raises(benchmarks.DamagedBenchmarkError, match=re.escape(why)):
            benchmarks.parse_record(path)
        assert benchmarks.read_record(path) is None
    record(path, (0.5, None, None, None, None))
    assert benchmarks.parse_record(path)["wall_s"] == 0.5


def test_the_studys_records_are_its_rules_patterns_filled_with_its_points():
    """The index's list of the study's records: a rule without wildcards has its one; a rule
    with wildcards one per point (or report) that has them all."""
    patterns = ["b/env.tsv", "b/gather/{impl}_{dtype}.tsv", "b/report/{report}.tsv"]
    fills = [
        {"impl": "sdpa", "dtype": "float32", "tokens": 1},
        {"impl": "sdpa", "dtype": "float32", "tokens": 2},
    ]
    fills += [{"report": "storage"}]
    assert benchmarks.study_records(patterns, fills) == [
        "b/env.tsv",
        "b/gather/sdpa_float32.tsv",
        "b/report/storage.tsv",
    ]


def test_the_usage_line_reads_back_and_a_log_without_one_has_none(tmp_path):
    log = tmp_path / "job.log"
    log.write_text(
        benchmarks.usage_line(7, 0.5, None) + "\ntraceback...\n" + benchmarks.usage_line(7, 1.5, 2.0)
    )
    assert benchmarks.read_usage(log) == {"pid": 7, "cpu_s": 1.5, "max_rss_mb": 2.0}
    log.write_text(benchmarks.usage_line(7, 0.5, None))
    assert benchmarks.read_usage(log) == {"pid": 7, "cpu_s": 0.5, "max_rss_mb": None}
    log.write_text("measure: ok\n")
    assert benchmarks.read_usage(log) is None
    assert benchmarks.read_usage(tmp_path / "missing.log") is None


def resident_mb(key: str) -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) / 1024 for line in status if line.startswith(f"{key}:"))


def test_a_warm_worker_counts_its_command_alone():
    """The worker's use for one command: its CPU since the command started, and its peak
    resident memory since then (Linux's high-water mark set back first)."""
    from kernels.warm.worker import JobUsage

    held = b"\x01" * (96 << 20)  # before the command: a peak it must not report
    del held
    usage = JobUsage()
    spent = time.process_time()
    while time.process_time() - spent < 0.2:
        pass
    if not usage.peak_reset:
        assert benchmarks.usage_in(usage.line())["max_rss_mb"] is None
        return
    before = resident_mb("VmRSS")
    # pages of a mapping of its own, touched: never pages the worker's heap already holds
    # (after the suite's earlier tests a heap allocation could reuse resident free memory)
    block = mmap.mmap(-1, 32 << 20)
    for page in range(0, len(block), mmap.PAGESIZE):
        block[page] = 1
    found = benchmarks.usage_in(usage.line())
    block.close()
    assert 0.2 <= found["cpu_s"] < 5
    assert before + 30 <= found["max_rss_mb"] < before + 80
