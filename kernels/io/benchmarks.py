"""Where a run's time went: Snakemake's ``benchmark:`` record of each job of the study read
into two tables, a row per job and a row per rule.

A job's record is results/benchmarks/<rule>.tsv for a rule without wildcards, else
results/benchmarks/<rule>/<job>.tsv, <job> spelled as its log's path under results/logs/
(kernels.estimate reads the same files). Snakemake writes a header and a row per repeat:
``s``, ``h:m:s``, ``max_rss``, ``max_vms``, ``max_uss``, ``max_pss``, ``io_in``, ``io_out``
(MiB), ``mean_load``, ``cpu_time`` (s of the job's processes), ``NA`` where a job ended
before it was sampled.

A job whose command a warm worker ran (kernels.warm: measure, validate, build, ceilings,
tile-errors) is a thin client to Snakemake, whose record has the right wall time but the
client's CPU time and memory. The worker writes the command's own CPU time and peak resident
memory as the last line of the job's log (``usage_line``): the table takes those, and keeps the
client's beside them. Standard library only: the worker imports this module.
"""

from __future__ import annotations

import csv
import datetime
import io
import os
import re
import statistics
from collections.abc import Iterable
from pathlib import Path

RECORD_COLUMNS = (
    "s",
    "h:m:s",
    "max_rss",
    "max_vms",
    "max_uss",
    "max_pss",
    "io_in",
    "io_out",
    "mean_load",
    "cpu_time",
)
JOB_COLUMNS = (
    "rule",
    "job",
    "wall_s",
    "cpu_s",
    "max_rss_mb",
    "io_in_mb",
    "io_out_mb",
    "measured_in",
    "client_cpu_s",
    "client_max_rss_mb",
    "finished",
    "benchmark",
)
RULE_COLUMNS = (
    "rule",
    "jobs",
    "total_wall_s",
    "share_of_wall",
    "median_wall_s",
    "max_wall_s",
    "total_cpu_s",
    "peak_rss_mb",
    "measured_in",
)
JOB = "job"  # Snakemake's own figures: the job's processes
WORKER = "warm worker"  # the command's CPU and memory in the worker that ran it (its log's line)

USAGE = re.compile(
    r"^attnio worker: the command's own use in the warm worker \(pid (?P<pid>\d+)\): "
    r"cpu_time (?P<cpu>[0-9.]+) s, max_rss (?P<rss>[0-9.]+|NA) MB$"
)


def usage_line(pid: int, cpu_s: float, max_rss_mb: float | None) -> str:
    """The line a warm worker ends a job's log with: the command's own CPU time (its threads'
    and the processes it waited for) and the worker's peak resident memory while it ran."""
    rss = "NA" if max_rss_mb is None else f"{max_rss_mb:.1f}"
    return (
        f"attnio worker: the command's own use in the warm worker (pid {pid}): "
        f"cpu_time {cpu_s:.3f} s, max_rss {rss} MB"
    )


def read_usage(log: str | os.PathLike) -> dict | None:
    """The warm worker's use for the job whose log this is (its last usage line), or None."""
    try:
        return usage_in(Path(log).read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return None


def usage_in(text: str) -> dict | None:
    """The last usage line of a log's ``text`` as {pid, cpu_s, max_rss_mb}, or None."""
    found = None
    for line in text.splitlines():
        if match := USAGE.match(line.strip()):
            found = match
    if found is None:
        return None
    rss = None if found["rss"] == "NA" else float(found["rss"])
    return {"pid": int(found["pid"]), "cpu_s": float(found["cpu"]), "max_rss_mb": rss}


def _number(value: str | None) -> float | None:
    try:
        return float(value) if value not in (None, "", "NA") else None
    except ValueError:
        return None


def read_record(path: str | os.PathLike) -> dict | None:
    """One benchmark TSV as {wall_s, cpu_s, max_rss_mb, io_in_mb, io_out_mb}: the mean over its
    repeats (the peak for the memory); None for a file that is not a benchmark record."""
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle, delimiter="\t"))
    except (OSError, UnicodeDecodeError, csv.Error):
        return None
    if not rows or "s" not in rows[0]:
        return None

    def mean(column: str) -> float | None:
        values = [v for row in rows if (v := _number(row.get(column))) is not None]
        return statistics.fmean(values) if values else None

    rss = [v for row in rows if (v := _number(row.get("max_rss"))) is not None]
    wall = mean("s")
    if wall is None:
        return None
    return {
        "wall_s": wall,
        "cpu_s": mean("cpu_time"),
        "max_rss_mb": max(rss) if rss else None,
        "io_in_mb": mean("io_in"),
        "io_out_mb": mean("io_out"),
    }


def job_of(path: Path, folder: Path) -> tuple[str, str]:
    """A record's rule and job from its path under ``folder``: <rule>.tsv is the rule's one job
    (named as the rule), <rule>/<job>.tsv one of its jobs."""
    parts = path.relative_to(folder).with_suffix("").parts
    return parts[0], "/".join(parts[1:]) or parts[0]


def log_of(rule: str, job: str, logs: Path) -> Path:
    """Where the job's log is when it follows the benchmark's convention (logs/<rule>.log,
    logs/<rule>/<job>.log): the warm jobs' do."""
    return logs / f"{rule}.log" if job == rule else logs / rule / f"{job}.log"


def _rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def job_rows(
    folder: str | os.PathLike, logs: str | os.PathLike | None = None, leave_out: Iterable[str] = ()
) -> list[dict]:
    """A row per benchmark record under ``folder`` (JOB_COLUMNS), by rule and job, but those of
    the rules in ``leave_out``; ``logs``: the folder of the jobs' logs (results/logs), where a
    warm worker's line is looked for."""
    folder, leave_out = Path(folder), set(leave_out)
    rows = []
    for path in sorted(folder.rglob("*.tsv")):
        rule, job = job_of(path, folder)
        record = None if rule in leave_out else read_record(path)
        if record is None:
            continue
        usage = read_usage(log_of(rule, job, Path(logs))) if logs is not None else None
        finished = datetime.datetime.fromtimestamp(path.stat().st_mtime, datetime.timezone.utc)
        row = {
            "rule": rule,
            "job": job,
            "wall_s": _rounded(record["wall_s"], 3),
            "cpu_s": _rounded(record["cpu_s"], 2),
            "max_rss_mb": _rounded(record["max_rss_mb"], 1),
            "io_in_mb": _rounded(record["io_in_mb"], 2),
            "io_out_mb": _rounded(record["io_out_mb"], 2),
            "measured_in": JOB,
            "client_cpu_s": None,
            "client_max_rss_mb": None,
            "finished": finished.isoformat(timespec="seconds"),
            "benchmark": path.relative_to(folder.parent).as_posix(),
        }
        if usage is not None:  # the client's figures kept beside the worker's
            row |= {
                "cpu_s": _rounded(usage["cpu_s"], 2),
                "max_rss_mb": _rounded(usage["max_rss_mb"], 1),
                "io_in_mb": None,
                "io_out_mb": None,
                "measured_in": WORKER,
                "client_cpu_s": row["cpu_s"],
                "client_max_rss_mb": row["max_rss_mb"],
            }
        rows.append(row)
    return rows


def rule_rows(jobs: list[dict]) -> list[dict]:
    """A row per rule (RULE_COLUMNS), the most wall time first: its jobs' wall seconds added up
    (jobs that ran side by side count each), their share of all the jobs' wall seconds, median
    and longest; CPU seconds added up (the jobs that have them) and the largest peak memory."""
    total = sum(job["wall_s"] for job in jobs) or 1.0
    rows = []
    for rule in sorted({job["rule"] for job in jobs}):
        mine = [job for job in jobs if job["rule"] == rule]
        wall = [job["wall_s"] for job in mine]
        cpu = [job["cpu_s"] for job in mine if job["cpu_s"] is not None]
        rss = [job["max_rss_mb"] for job in mine if job["max_rss_mb"] is not None]
        rows.append(
            {
                "rule": rule,
                "jobs": len(mine),
                "total_wall_s": round(sum(wall), 2),
                "share_of_wall": round(sum(wall) / total, 3),
                "median_wall_s": round(statistics.median(wall), 3),
                "max_wall_s": round(max(wall), 3),
                "total_cpu_s": round(sum(cpu), 2) if cpu else None,
                "peak_rss_mb": round(max(rss), 1) if rss else None,
                "measured_in": ", ".join(sorted({job["measured_in"] for job in mine})),
            }
        )
    return sorted(rows, key=lambda row: (-row["total_wall_s"], row["rule"]))


def csv_text(rows: list[dict], columns: tuple[str, ...]) -> str:
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: ("" if v is None else v) for k, v in row.items()} for row in rows)
    return text.getvalue()


def write_tables(
    folder: str | os.PathLike,
    logs: str | os.PathLike | None,
    jobs_out: str | os.PathLike,
    rules_out: str | os.PathLike,
    leave_out: Iterable[str] = (),
) -> tuple[list[dict], list[dict]]:
    """The per-job and per-rule tables of the records under ``folder`` but those of the rules
    in ``leave_out`` (a header alone where there are none), written atomically; returned as
    rows."""
    from kernels.io.atomic import write_text_atomic

    jobs = job_rows(folder, logs, leave_out) if Path(folder).is_dir() else []
    rules = rule_rows(jobs)
    write_text_atomic(jobs_out, csv_text(jobs, JOB_COLUMNS))
    write_text_atomic(rules_out, csv_text(rules, RULE_COLUMNS))
    return jobs, rules
