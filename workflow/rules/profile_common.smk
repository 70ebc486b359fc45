# Shared by the rules of profile.smk: the headline points Nsight Compute runs, and the launch
# each was timed with.
from kernels.spec import HEADLINE, NCU_METRICS, PROFILE_DIR, PROFILED

# Blocks the GPU study times the headline points with; another shape of the sweep when it has none.
PROFILED_BLOCKS = (128, 64)
PROFILE = f"{RESULTS}/{PROFILE_DIR}"


def profiled_points():
    """Per profiled implementation, the sweep point at the headline shape (full mask, normal
    inputs) that Nsight Compute runs: none when the sweep has no such point."""
    found = {}
    for point in sorted(POINTS, key=lambda p: p.name):
        if point.impl not in PROFILED or point.causal or point.inputs != "normal":
            continue
        if (point.tokens, point.head_dim, point.dtype) != tuple(HEADLINE.values()):
            continue
        if point.impl not in found or (point.block_m, point.block_n) == PROFILED_BLOCKS:
            found[point.impl] = point
    return found


PROFILED_POINTS = profiled_points()


def profiled_record(wildcards):
    return output_of(rules.measure.output[0], PROFILED_POINTS[wildcards.impl])


def timed_launch(wildcards, input):
    """--launch num_warps,num_stages from the point's record, as measure timed it; none when
    the record has none. Read again when the job runs (Snakemake re-evaluates params once
    the input exists), so a plan made before the record exists has no --launch."""
    try:
        record = json.loads(Path(input.record).read_text())
    except (OSError, ValueError):
        return []
    if record.get("num_warps") and record.get("num_stages"):
        return ["--launch", f"{record['num_warps']},{record['num_stages']}"]
    return []
