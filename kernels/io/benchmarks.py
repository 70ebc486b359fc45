"""Where a run's time went: Snakemake's ``benchmark:`` record of each job of the study read
into two tables, a row per job and a row per rule, and a third naming the records left out.

One reader (``read_records``) serves the index's tables and the budget (kernels.models.budget):
only the records of the study's jobs count (``study_records``: each rule's pattern filled in
with the study's points); any other under the folder is stale (a point no longer in the
sweep), and one of the study's that is empty, cut to its header or unreadable is damaged.
Neither is counted; both are named.

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
import math
import os
import re
import statistics
import string
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
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
# A record the tables leave out: of a job that is not this study's, or there but not whole
LEFT_OUT_COLUMNS = ("rule", "job", "left_out", "why", "benchmark")
STALE = "stale: not in this sweep"
DAMAGED = "damaged: cut or unreadable"
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


# No job of a study runs a day: the config's longest job limit (limits.job_seconds) is a day,
# and a wall time past it (1e308 s, say) is a damaged record, not 77 % of the run.
LONGEST_JOB_S = 86_400


class DamagedBenchmarkError(ValueError):
    """A benchmark file that is there but holds no usable record; its message says why."""


def parse_record(path: str | os.PathLike) -> dict:
    """One benchmark TSV as {wall_s, cpu_s, max_rss_mb, io_in_mb, io_out_mb}: the mean over its
    repeats (the peak for the memory). DamagedBenchmarkError for a file that is not a whole record:
    empty, cut to its header, unreadable, not Snakemake's columns, or no finite wall time
    within a day."""
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            text = handle.read()
        rows = list(csv.DictReader(io.StringIO(text), delimiter="\t"))
    except FileNotFoundError:
        raise
    except UnicodeDecodeError:
        raise DamagedBenchmarkError("unreadable: not text") from None
    except (OSError, csv.Error) as err:
        raise DamagedBenchmarkError(f"unreadable: {err}") from None
    if not text.strip():
        raise DamagedBenchmarkError("empty")
    if "\t".join(RECORD_COLUMNS[:2]) not in text.splitlines()[0]:
        raise DamagedBenchmarkError("not a benchmark record: its header is not Snakemake's")
    if not rows:
        raise DamagedBenchmarkError("cut to its header: no row")

    def values(column: str) -> list[float]:
        return [v for row in rows if (v := _number(row.get(column))) is not None and math.isfinite(v)]

    wall = values("s")
    if not wall:
        raise DamagedBenchmarkError("no wall time (s) in any row")
    if min(wall) < 0:
        raise DamagedBenchmarkError(f"a negative wall time: {min(wall)} s")
    if max(wall) > LONGEST_JOB_S:
        raise DamagedBenchmarkError(f"a wall time of {max(wall):.3g} s, longer than any job runs (a day)")
    mean = lambda column: statistics.fmean(found) if (found := values(column)) else None  # noqa: E731
    rss = values("max_rss")
    return {
        "wall_s": statistics.fmean(wall),
        "cpu_s": mean("cpu_time"),
        "max_rss_mb": max(rss) if rss else None,
        "io_in_mb": mean("io_in"),
        "io_out_mb": mean("io_out"),
    }


def read_record(path: str | os.PathLike) -> dict | None:
    """One benchmark TSV as parse_record reads it; None where there is none or it is damaged."""
    try:
        return parse_record(path)
    except DamagedBenchmarkError:
        return None


def study_records(patterns: Iterable[str], fills: Iterable[Mapping[str, object]]) -> list[str]:
    """Where the jobs of a study write their records: each rule's ``benchmark:`` pattern (its
    wildcards in braces) filled in with every one of ``fills`` (a point's wildcards, a
    report's) that has all its wildcards; a pattern without wildcards is its rule's one record.
    A record under the folder that is none of these is stale (read_records)."""
    fills = list(fills)
    found = set()
    for pattern in patterns:
        names = {name for _, name, _, _ in string.Formatter().parse(pattern) if name is not None}
        found |= {pattern.format(**fill) for fill in fills if names <= fill.keys()} if names else {pattern}
    return sorted(found)


def _rule_of(path: str, folder: Path | None) -> str | None:
    """The rule of a record under ``folder`` (job_of), or None for one elsewhere."""
    try:
        return job_of(path, folder)[0] if folder is not None else None
    except ValueError:
        return None


@dataclass
class Records:
    """A study's benchmark records as one reader judges them, for the index's tables and the
    budget alike: ``found`` {path: record} those of the study's jobs that can be read; ``damaged``
    {path: why} those of its jobs that are there but cut short or unreadable; ``stale`` every
    other record under the folder, left by a job that is not one of this study's (a point no
    longer in the sweep). Paths as given (or as found under the folder)."""

    found: dict[str, dict] = field(default_factory=dict)
    damaged: dict[str, str] = field(default_factory=dict)
    stale: list[str] = field(default_factory=list)


def read_records(
    planned: Iterable[str | os.PathLike] | None,
    folder: str | os.PathLike | None = None,
    leave_out: Iterable[str] = (),
) -> Records:
    """The records of the study's jobs (``planned``: each job's benchmark path; one not there
    yet is no record) and, with ``folder`` (results/benchmarks), every other record under it
    as stale. ``planned`` None: every record under ``folder`` is the study's. Records of the
    rules in ``leave_out`` (the index and the pack, written after they end) are not looked at."""
    where = Path(folder) if folder is not None else None
    leave_out = set(leave_out)
    on_disk = sorted(str(p) for p in where.rglob("*.tsv")) if where is not None and where.is_dir() else []
    mine = on_disk if planned is None else [str(p) for p in planned]
    known = {os.path.abspath(p) for p in mine}
    records = Records()
    for path in mine:
        if _rule_of(path, where) in leave_out:
            continue
        try:
            records.found[path] = parse_record(path)
        except FileNotFoundError:
            continue
        except DamagedBenchmarkError as err:
            records.damaged[path] = str(err)
    for path in on_disk:
        if os.path.abspath(path) not in known and _rule_of(path, where) not in leave_out:
            records.stale.append(path)
    return records


def job_of(path: str | os.PathLike, folder: str | os.PathLike) -> tuple[str, str]:
    """A record's rule and job from its path under ``folder``: <rule>.tsv is the rule's one job
    (named as the rule), <rule>/<job>.tsv one of its jobs."""
    parts = _under(path, folder).with_suffix("").parts
    return parts[0], "/".join(parts[1:]) or parts[0]


def _under(path: str | os.PathLike, folder: str | os.PathLike) -> Path:
    """``path`` relative to ``folder`` (ValueError where it is not under it), however spelled."""
    return Path(os.path.abspath(path)).relative_to(os.path.abspath(folder))


def log_of(rule: str, job: str, logs: Path) -> Path:
    """Where the job's log is when it follows the benchmark's convention (logs/<rule>.log,
    logs/<rule>/<job>.log): the warm jobs' do."""
    return logs / f"{rule}.log" if job == rule else logs / rule / f"{job}.log"


def _rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def job_rows(
    records: Records, folder: str | os.PathLike, logs: str | os.PathLike | None = None
) -> list[dict]:
    """A row per record ``records`` found (JOB_COLUMNS), by rule and job; ``folder``: where the
    records are (results/benchmarks), ``logs``: the folder of the jobs' logs (results/logs),
    where a warm worker's line is looked for."""
    folder = Path(folder)
    rows = []
    for name, record in sorted(records.found.items(), key=lambda item: job_of(item[0], folder)):
        path = Path(name)
        rule, job = job_of(path, folder)
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
            "benchmark": _relative(name, folder),
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


def left_out_rows(records: Records, folder: str | os.PathLike) -> list[dict]:
    """A row per record the tables leave out (LEFT_OUT_COLUMNS): each stale one (not a job of
    this study), then each damaged one with why."""
    folder = Path(folder)
    rows = [(path, STALE, "") for path in records.stale]
    rows += [(path, DAMAGED, why) for path, why in records.damaged.items()]
    return [
        dict(zip(LEFT_OUT_COLUMNS, (*job_of(path, folder), kind, why, _relative(path, folder)), strict=True))
        for path, kind, why in rows
    ]


def _relative(path: str, folder: Path) -> str:
    """A record's path as the index links it: relative to results/ (``folder``'s parent)."""
    return _under(path, folder.parent).as_posix()


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
    outputs: tuple[str | os.PathLike, ...],
    leave_out: Iterable[str] = (),
    planned: Iterable[str | os.PathLike] | None = None,
) -> tuple[list[dict], list[dict], list[dict]]:
    """The per-job and per-rule tables of the study's records under ``folder`` (``planned``:
    its jobs' record paths; None: every record there) but those of the rules in ``leave_out``,
    and the table of the records they leave out (stale and damaged), each written atomically
    (a header alone where there are none) to ``outputs`` (jobs, rules, left out); returned as
    rows."""
    from kernels.io.atomic import write_text_atomic

    records = read_records(planned, folder, leave_out)
    jobs = job_rows(records, folder, logs)
    rules = rule_rows(jobs)
    left = left_out_rows(records, folder)
    for rows, columns, out in zip(
        (jobs, rules, left), (JOB_COLUMNS, RULE_COLUMNS, LEFT_OUT_COLUMNS), outputs, strict=True
    ):
        write_text_atomic(out, csv_text(rows, columns))
    return jobs, rules, left
