"""Validation cases that did not run, forward and backward, each written with its verdict
and reason as if it had: what ``validate`` writes for a device this machine does not have, or
when its time limit passes. Above both directions (kernels.measure.validate and
kernels.measure.validate_backward), which import neither this module nor each other's."""

from __future__ import annotations

from kernels import catalog
from kernels.impl.checks import DTYPES
from kernels.measure.validate import forward_not_run
from kernels.measure.validate_backward import backward_not_run
from kernels.measure.verdict import Result
from kernels.planning.cases import CPU_SHAPES, INFERENCE_CPU_SHAPES
from kernels.spec import DEFAULT_BLOCK


def unavailable(reason: str, **cases) -> list[Result]:
    """Every case ``validate`` would run, with verdict ``unavailable`` and ``reason``, for a
    device this machine does not have (cuda without a GPU): nothing is run, nothing is
    allocated, and each case still says what it would have been expected to give.
    ``cases``: validate's impls, dtypes, causals, shapes, block_m, block_n and seed."""
    return not_run(reason, "unavailable", **cases)


def timed_out(reason: str, finished: list[Result], **cases) -> list[Result]:
    """A validation stopped at its time limit: the cases that finished as they came out, each
    other with verdict ``timeout`` and ``reason`` (not as expected, so the implementation's
    points are recorded as skipped, naming the limit)."""
    done = {_case_of(r): r for r in finished}
    return [done.get(_case_of(r), r) for r in not_run(reason, "timeout", **cases)]


def _case_of(r: Result) -> tuple:
    """What tells one case from another: an inference shape (its query rows and K/V heads)
    apart from the square case of the same B, H, T and d."""
    return (
        r.direction,
        r.impl,
        r.dtype,
        r.causal,
        r.batch,
        r.heads,
        r.tokens,
        r.queries,
        r.kv,
        r.head_dim,
        r.layout,
        r.inputs,
        r.gradient,
    )


def not_run(
    reason: str,
    verdict: str,
    impls=None,
    dtypes=tuple(DTYPES),
    causals=(False, True),
    shapes=CPU_SHAPES + INFERENCE_CPU_SHAPES,  # validate's own default
    block_m: int = DEFAULT_BLOCK,
    block_n: int = DEFAULT_BLOCK,
    seed: int = 0,
    backward_shapes=(),
) -> list[Result]:
    """Every case ``validate`` would run with this ``verdict`` and ``reason`` as its message,
    and with ``backward_shapes``, every backward case."""
    impls = catalog.names() if impls is None else impls
    grid = (impls, dtypes, causals)
    found = forward_not_run(reason, verdict, *grid, shapes, block_m, block_n, seed)
    if backward_shapes:
        found += backward_not_run(reason, verdict, *grid, backward_shapes, block_m, block_n, seed)
    return found
