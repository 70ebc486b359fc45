"""Records of two runs of one study, point by point: every field but the timings, the
timestamps and the measuring process must agree; the timings are shown side by side.

    python scripts/compare_records.py RESULTS_A RESULTS_B

Exit status 1 when a point is missing from one run or a field other than those differs.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from kernels.io.compare import differences, spreads_overlap


def records(results: Path) -> dict[str, dict]:
    return {
        str(path.relative_to(results / "points")): json.loads(path.read_text())
        for path in (results / "points").rglob("*.json")
    }


def overlap(a: dict, b: dict) -> bool:
    """Whether two records' p10–p90 timing spreads overlap."""
    return spreads_overlap((a["time_p10_ms"], a["time_p90_ms"]), (b["time_p10_ms"], b["time_p90_ms"]))


def main(argv: list[str]) -> int:
    first, second = records(Path(argv[0])), records(Path(argv[1]))
    bad = 0
    ratios, overlapping = [], 0
    for name in sorted(set(first) | set(second)):
        if name not in first or name not in second:
            print(f"{name}: only in {'the second' if name not in first else 'the first'}")
            bad += 1
            continue
        a, b = first[name], second[name]
        differ = differences(a, b)
        bad += bool(differ)
        timing = ""
        if a.get("time_ms") and b.get("time_ms"):
            spread = [
                f"{r['time_ms']:.4g} ms [{r['time_p10_ms']:.4g}, {r['time_p90_ms']:.4g}]" for r in (a, b)
            ]
            timing = f"{spread[0]} vs {spread[1]} ratio {b['time_ms'] / a['time_ms']:.3f}"
            ratios.append(b["time_ms"] / a["time_ms"])
            overlapping += overlap(a, b)
        verdict = "DIFFER " + ", ".join(differ) if differ else "same"
        print(f"{name}: {a['status']}/{b['status']} {verdict} {timing}")
    print(f"{len(first)} and {len(second)} records; {bad} differ beyond their timings")
    if ratios:
        ratios.sort()
        print(
            f"{len(ratios)} timed in both: second over first, median {statistics.median(ratios):.3f} "
            f"(from {ratios[0]:.3f} to {ratios[-1]:.3f}); p10–p90 spreads overlap for {overlapping}"
        )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
