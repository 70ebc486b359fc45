"""Where a finished run's time went, from Snakemake's own job metadata and the records.

    python scripts/run_breakdown.py [WORKDIR]      (default: the current folder)

Per rule: jobs, their summed and median wall time (Snakemake's start and end of each job); for
the measure jobs also the records' own ``wall_seconds`` (the measurement) and the rest of each
job (start-up, imports, writing out); and the span from the first job's start to the last
job's end. Only the jobs of the last run that made each output are seen (Snakemake keeps one
metadata file per output).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def jobs(workdir: Path) -> list[dict]:
    """One entry per job: rule, start, end, outputs (Snakemake's metadata holds one file per
    output; a job with several outputs appears once)."""
    seen: dict[tuple[str, float], dict] = {}
    for path in (workdir / ".snakemake" / "metadata").iterdir():
        meta = json.loads(path.read_text())
        if not meta.get("rule") or meta.get("starttime") is None or meta.get("endtime") is None:
            continue
        key = (meta["rule"], meta.get("job_hash"), meta.get("shellcmd") or meta["starttime"])
        seen.setdefault(key, {"rule": meta["rule"], "start": meta["starttime"], "end": meta["endtime"]})
    return sorted(seen.values(), key=lambda job: job["start"])


def measured_seconds(workdir: Path) -> list[float]:
    """The records' own wall_seconds (the measurement inside each measure job)."""
    found = []
    for path in (workdir / "results" / "points").rglob("*.json"):
        record = json.loads(path.read_text())
        if record.get("wall_seconds") is not None:
            found.append(record["wall_seconds"])
    return found


def breakdown(workdir: Path) -> dict:
    found = jobs(workdir)
    by_rule: dict[str, list[float]] = {}
    for job in found:
        by_rule.setdefault(job["rule"], []).append(job["end"] - job["start"])
    rules = {
        rule: {"jobs": len(times), "seconds": sum(times), "median_s": statistics.median(times)}
        for rule, times in sorted(by_rule.items(), key=lambda item: -sum(item[1]))
    }
    span = max(job["end"] for job in found) - min(job["start"] for job in found) if found else 0.0
    out = {"span_s": span, "jobs": len(found), "rules": rules}
    if "measure" in rules:
        measured = measured_seconds(workdir)
        out["measure"] = {
            "records_wall_s": sum(measured),
            "rest_s": rules["measure"]["seconds"] - sum(measured),
            "rest_per_job_s": (rules["measure"]["seconds"] - sum(measured)) / rules["measure"]["jobs"],
        }
    return out


def main(argv: list[str]) -> int:
    workdir = Path(argv[0] if argv else ".")
    found = breakdown(workdir)
    print(f"{found['jobs']} jobs, {found['span_s']:.0f} s from the first job's start to the last one's end")
    for rule, row in found["rules"].items():
        print(f"  {rule:18s} {row['jobs']:4d} jobs {row['seconds']:8.1f} s  (median {row['median_s']:.2f} s)")
    if "measure" in found:
        m = found["measure"]
        print(
            f"measure: records' own wall_seconds {m['records_wall_s']:.1f} s; the rest {m['rest_s']:.1f} s "
            f"({m['rest_per_job_s']:.2f} s per job: start-up, imports, writing out)"
        )
    print(json.dumps(found))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
