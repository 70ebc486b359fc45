"""Two records of one point, from two runs: what must agree and what may not.

A rerun, or the same point measured by a warm worker and by a process of its own, gives the
same record but for its timings (which agree within their spread, not exactly), its
timestamps and the process that measured it.
"""

from __future__ import annotations

# record fields that differ between two runs of one point by nature
TIMINGS = ("time_ms", "time_p10_ms", "time_p90_ms", "repeats", "ncu_time_ms")
# a backward point's forward-and-backward step, timed as its backward is
STEP_TIMINGS = ("step_time_ms", "step_time_p10_ms", "step_time_p90_ms", "step_repeats")
# what differs between two measurements of one point: the timings, the clocks, the process,
# and the machine's load and speed while it was timed (contention, reference pass)
VARYING = (
    *TIMINGS,
    *STEP_TIMINGS,
    *("started_at", "finished_at", "wall_seconds", "process", "contention", "launch_candidates"),
    "reference_pass",  # the machine's speed beside the point (kernels.measure.reference_pass)
)
STAGE_TIMINGS = (
    *("time_ms", "time_p10_ms", "time_p90_ms", "repeats"),
    *("cold_time_ms", "cold_time_p10_ms", "cold_time_p90_ms"),
)


def differences(a: dict, b: dict) -> list[str]:
    """The fields (stage fields as ``stage_times.<stage>.<field>``) in which two records of one
    point disagree beyond what varies between runs."""
    found = [
        key
        for key in sorted(set(a) | set(b))
        if key not in (*VARYING, "stage_times") and a.get(key) != b.get(key)
    ]
    stages_a, stages_b = a.get("stage_times") or [], b.get("stage_times") or []
    if len(stages_a) != len(stages_b):
        return [*found, "stage_times"]
    for sa, sb in zip(stages_a, stages_b, strict=True):
        found += [
            f"stage_times.{sa['stage']}.{key}"
            for key in sorted(set(sa) | set(sb))
            if key not in STAGE_TIMINGS and sa.get(key) != sb.get(key)
        ]
    return found


def spreads_overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Whether two timings' (p10, p90) spreads overlap: the same within their noise."""
    return a[0] <= b[1] and b[0] <= a[1]
