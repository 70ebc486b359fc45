"""What does each mask of the sweep keep, what does a block-sparse kernel visit of it, and
what does the mask itself weigh?

results/model/mask_tiles.csv, written by the ``model`` rule for the Masks page. For every
(mask, T, query_tokens) of the sweep's points under a mask beyond causal, and causal and full at
the same lengths (the two ends every other mask falls between), and for each square block
size: the share of the scores the mask keeps, the share held by the tiles a block-sparse
kernel visits (tiles cut at T), and how many of those tiles need the element mask
(kernels.masks.tiles.coverage). Beside them, the mask's own bytes per head in the two forms
the paths take it: a dense boolean (query_tokens × T) tensor, as torch_naive builds it and
PyTorch's SDPA takes it (``attn_mask``), and each row's run of keys, as our Triton kernels read
it (kernels.models.cost.RUN_BYTES a row; causal and full need neither, the kernels mask them by
index). Pure Python: the map the kernels iterate and the traffic models walk.
"""

from __future__ import annotations

import os

from kernels import masks
from kernels.io.computed_tables import write_table
from kernels.masks import tiles
from kernels.models.cost import RUN_BYTES
from kernels.planning.sweep import points
from kernels.spec import BLOCK_SIZES


def cases(sweep: dict | list[dict]) -> list[tuple[str, int, int]]:
    """(mask, T, query_tokens) of every point under a mask beyond causal, with causal and full
    at each of their lengths; none where the sweep has no such point."""
    found: dict[tuple[str, int, int], None] = {}
    for point in points(sweep):
        if masks.beyond_causal(point.mask_kind):
            for mask in (point.mask, *(masks.from_causal(c).spelled() for c in (True, False))):
                found[(mask, point.tokens, point.queries)] = None
    return sorted(found, key=lambda case: (case[1], case[2], case[0]))


def rows(sweep: dict | list[dict]) -> list[dict]:
    found = []
    for mask, tokens, queries in cases(sweep):
        kind = masks.parse(mask)
        hides = kind != masks.from_causal(False)
        own = {
            "dense_mask_bytes": queries * tokens * masks.DENSE_BYTES if hides else 0,
            "runs_bytes": queries * RUN_BYTES if masks.beyond_causal(kind) else 0,
        }
        case = {"mask": mask, "tokens": tokens, "query_tokens": queries}
        for block in BLOCK_SIZES:
            covered = tiles.coverage(kind, tokens, block, block, queries).as_row()
            found.append(case | {"block": block} | covered | own)
    return found


def write(sweep: dict | list[dict], out: str | os.PathLike) -> None:
    """The table, atomically (its header alone where the sweep has no mask beyond causal)."""
    write_table(out, "mask_tiles.csv", rows(sweep))
