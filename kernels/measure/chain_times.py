"""A point's chain of stages timed warm and cold, each stage beside its model: what the
forward and the backward pass both time (kernels.measure.run, kernels.measure.backward_run),
below both."""

from __future__ import annotations

import torch

from kernels.measure import stages
from kernels.measure.caches import last_level_bytes
from kernels.measure.reference_pass import reference_pass
from kernels.models.stages import stage_costs
from kernels.planning.point import Point

# a stage chain is written for full and causal: under any other mask only the whole call is timed
STAGES_UNMASKED = "stages not timed: the stage chains run full or causal only (the whole call is timed)"


def timed_chain(point: Point, chain: list, device: str) -> dict:
    """A chain of stages timed warm and cold (kernels.measure.stages), each beside its
    modelled bytes, FLOPs and exponentials (kernels.models.stage_cost: a backward point's are
    its backward's)."""
    last = last_level_bytes(device, threads=torch.get_num_threads())  # what this job's threads meet
    timed = stages.time_stages(chain, device, last)
    costs = stage_costs(point)
    if [c.stage for c in costs] != [t["stage"] for t in timed]:
        raise RuntimeError(
            f"stages run {[t['stage'] for t in timed]} but the model has {[c.stage for c in costs]}"
        )
    return {
        "last_cache_bytes": last,
        # the machine's speed beside this point, against the ceilings' (the drift)
        "reference_pass": reference_pass(device),
        "stage_times": [
            t
            | {
                "does": c.does,
                "bytes": c.bytes,
                "handoff_bytes": c.handoff_bytes,
                "footprint_bytes": c.footprint_bytes,
                "flops": c.flops,
                "exps": c.exps,
            }
            for t, c in zip(timed, costs, strict=True)
        ],
    }
