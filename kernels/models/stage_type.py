"""What does one stage of a chain cost, in the one form every stage model fills?

What one stage of a chain costs: the record both directions' stage models fill
(kernels.models.stage_cost, kernels.models.backward_stage_cost), below both. Pure Python."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StageCost:
    stage: str
    does: str
    handoff_bytes: int  # S, P (and softmax's float32 matrix) read and written
    other_bytes: int  # Q, K, V, O and the mask
    footprint_bytes: int  # the distinct T×T tensors the stage touches
    flops: int  # matrix-product FLOPs as executed
    exps: int  # exponentials
    in_place: bool = False  # reads and writes S in place (no separate destination)

    @property
    def bytes(self) -> int:
        return self.handoff_bytes + self.other_bytes
