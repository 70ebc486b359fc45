"""The sweep a configuration asks for: its points, the validations and builds they need, and
the groups their records are gathered in.

Pure Python, so that the workflow can plan thousands of points without importing torch.
"""

from __future__ import annotations

import itertools

from kernels.spec import DEFAULT_INPUTS, TRITON_IMPLEMENTATIONS
from kernels.study.point import Point


def batches_for(sweep: dict, tokens: int) -> list[int]:
    total = sweep.get("total_tokens")
    return [max(1, total // tokens)] if total else list(sweep["batch"])


def grid_points(grid: dict) -> list[Point]:
    """Every point of one grid: the product of its lists, blocks for Triton impls only."""
    out = []
    for impl, tokens, heads, d, dtype, causal, inputs in itertools.product(
        grid["impls"],
        grid["tokens"],
        grid["heads"],
        grid["head_dim"],
        grid["dtype"],
        grid["causal"],
        grid.get("inputs", [DEFAULT_INPUTS]),
    ):
        blocks = [tuple(b) for b in grid["blocks"]] if impl in TRITON_IMPLEMENTATIONS else [(None, None)]
        for batch in batches_for(grid, tokens):
            for bm, bn in blocks:
                out.append(Point(impl, batch, heads, tokens, d, dtype, causal, bm, bn, inputs=inputs))
    return out


def points(sweep: dict | list[dict]) -> list[Point]:
    """Every point of the sweep: one grid, or the points of several grids, each once."""
    grids = sweep if isinstance(sweep, list) else [sweep]
    return list(dict.fromkeys(p for grid in grids for p in grid_points(grid)))


def build_jobs(points: list[Point]) -> dict[str, list[str]]:
    """Build job name → names of the points it compiles for (Triton points only)."""
    jobs: dict[str, list[str]] = {}
    for point in points:
        if point.triton:
            jobs.setdefault(point.build_name, []).append(point.name)
    return jobs


def groups(points: list[Point]) -> dict[tuple[str, str], list[Point]]:
    """(impl, dtype) → its points. Records are gathered per group first: Snakemake hashes a
    job's whole input list once per upstream job, so one job over thousands would plan slowly."""
    out: dict[tuple[str, str], list[Point]] = {}
    for point in points:
        out.setdefault((point.impl, point.dtype), []).append(point)
    return dict(sorted(out.items()))
