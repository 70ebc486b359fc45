"""The sweep a configuration asks for: its points, the validations and builds they need, and
the groups their records are gathered in.

Pure Python, so that the workflow can plan thousands of points without importing torch.
"""

from __future__ import annotations

import itertools

from kernels.spec import TRITON_IMPLEMENTATIONS
from kernels.study.point import Point


def batches_for(sweep: dict, tokens: int) -> list[int]:
    total = sweep.get("total_tokens")
    return [max(1, total // tokens)] if total else list(sweep["batch"])


def points(sweep: dict) -> list[Point]:
    """Every point of the sweep: the product of its lists, blocks for Triton impls only."""
    out = []
    for impl, tokens, heads, d, dtype, causal in itertools.product(
        sweep["impls"], sweep["tokens"], sweep["heads"], sweep["head_dim"], sweep["dtype"], sweep["causal"]
    ):
        blocks = [tuple(b) for b in sweep["blocks"]] if impl in TRITON_IMPLEMENTATIONS else [(None, None)]
        for batch in batches_for(sweep, tokens):
            for bm, bn in blocks:
                out.append(Point(impl, batch, heads, tokens, d, dtype, causal, bm, bn))
    return out


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
