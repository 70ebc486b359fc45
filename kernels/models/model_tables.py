"""What do the reports read of the model itself (sizes, block traffic, Figure 4)?

The model's own tables for the reports, written into results/model/ by the ``model`` rule,
so that a report only reads files: S/P sizes against T, the fused kernel's traffic against
its block size, and the seed's Figure 4 example.
"""

from __future__ import annotations

import json
import os

from kernels import catalog, masks
from kernels.io.atomic import write_text_atomic
from kernels.io.computed_tables import write_table
from kernels.models import cost
from kernels.models.softmax_example import figure4, softmax, tile_local_softmax
from kernels.planning.point import Point
from kernels.planning.sweep import points
from kernels.spec import BLOCK_SIZES

STORAGE_TOKENS = tuple(2**k for k in range(8, 16))  # 256 … 32,768
STORAGE_DTYPES = ("float32", "float16")
EXAMPLE_ROW = (0.0, 0.0, 2.0, 2.0)  # the seed's Figure 4 row, with x = 2
EXAMPLE_TILE = 2


def matrix_sizes() -> list[dict]:
    """Bytes of one T×T matrix (S or P) for one head."""
    return [
        {"tokens": t, "dtype": dtype, "element_bytes": point.e_sp, "bytes": cost.matrix_bytes(point)}
        for t in STORAGE_TOKENS
        for dtype in STORAGE_DTYPES
        for point in [Point(catalog.triton_path("SP"), 1, 1, t, 64, dtype, False)]
    ]


def block_traffic(sweep: dict | list[dict]) -> list[dict]:
    """The fused kernel's as-issued traffic for one head and square blocks, for every
    (T, d, dtype, causal) of the sweep's causal and full points: larger blocks, fewer re-reads
    of K and V (the masks' own table is mask_tiles.csv)."""
    unmasked = [p for p in points(sweep) if p.square and not masks.beyond_causal(p.mask_kind)]
    cases = sorted({(p.tokens, p.head_dim, p.dtype, p.causal) for p in unmasked})
    fused = catalog.triton_path("none")
    rows = []
    for tokens, head_dim, dtype, causal in cases:
        for block in BLOCK_SIZES:
            point = Point(fused, 1, 1, tokens, head_dim, dtype, causal, block, block)
            rows.append(
                {
                    "tokens": tokens,
                    "head_dim": head_dim,
                    "dtype": dtype,
                    "causal": causal,
                    "block": block,
                    "bytes": cost.summarize(point)["traffic_model_bytes"],
                }
            )
    return rows


def softmax_example() -> dict:
    row = list(EXAMPLE_ROW)
    return {
        "scores": row,
        "tile": EXAMPLE_TILE,
        "whole_row": softmax(row),
        "per_tile": tile_local_softmax(row, EXAMPLE_TILE),
        "figure4": figure4(EXAMPLE_ROW[2]),
    }


def write(
    sweep: dict | list[dict],
    sizes: str | os.PathLike,
    block_curves: str | os.PathLike,
    example: str | os.PathLike,
) -> None:
    """Write the three tables, each atomically (block_traffic.csv its header alone where the
    sweep has no square point)."""
    write_table(sizes, "matrix_sizes.csv", matrix_sizes())
    write_table(block_curves, "block_traffic.csv", block_traffic(sweep))
    write_text_atomic(example, json.dumps(softmax_example(), indent=1) + "\n")
