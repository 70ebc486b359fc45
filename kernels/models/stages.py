"""Which stages does a point run, in what order, and what does each cost?

The stages of any point in the order they run, and what each costs: a forward point's
(kernels.models.stage_cost) or a backward point's (kernels.models.backward_stage_cost). Above
both directions' models, which import neither this module nor each other. Pure Python."""

from __future__ import annotations

from kernels.models.backward_stage_cost import backward_stage_costs, backward_stage_names
from kernels.models.stage_cost import forward_stage_costs, forward_stage_names
from kernels.models.stage_type import StageCost
from kernels.planning.point import Point


def stage_names(point: Point) -> tuple[str, ...]:
    """The point's stages in the order they run; () for a path that is not staged."""
    return backward_stage_names(point) if point.backward else forward_stage_names(point)


def stage_costs(point: Point) -> list[StageCost]:
    """Each stage of the point in the order it runs, with its cost (empty: not staged)."""
    return backward_stage_costs(point) if point.backward else forward_stage_costs(point)
