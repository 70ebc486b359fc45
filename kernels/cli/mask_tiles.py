"""``mask-tiles``: for each mask, T and block shape, the share of the scores the mask keeps
against the share a block-sparse kernel computes (the tiles it visits), and how many of
those tiles need the element mask. Pure Python, no torch: the map the kernels and the
models derive from the mask (kernels.masks.tiles)."""

from __future__ import annotations

import argparse
import json

from kernels import masks
from kernels.masks import tiles
from kernels.planning.point import mask_text, tokens_int
from kernels.spec import BLOCK_SIZES, MAX_TOKENS

COLUMNS = ("mask", "tokens", "queries", "block_m", "block_n", "kept", "visited", "partial of visited")


def add_mask_tiles_arguments(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument(
        "--mask", type=mask_text, nargs="+", required=True, help=f"one or more of {masks.spellings()}"
    )
    cmd.add_argument(
        "--tokens", type=tokens_int, nargs="+", required=True, help=f"T (one or more; at most {MAX_TOKENS:,})"
    )
    cmd.add_argument(
        "--query-tokens", type=tokens_int, help="queries against the T keys, the last ones (default: T)"
    )
    cmd.add_argument(
        "--blocks",
        type=int,
        nargs="+",
        choices=BLOCK_SIZES,
        default=[64],
        help="square tiles, BLOCK_M = BLOCK_N",
    )
    cmd.add_argument("--json", action="store_true", help="print JSON rows instead of a table")


def rows(args: argparse.Namespace) -> list[dict]:
    """One row per mask, T and block; a mask that does not fit a T, or more queries than
    keys, stops the command naming why."""
    found = []
    for mask in map(masks.parse, args.mask):
        for tokens in args.tokens:
            queries = args.query_tokens or tokens
            refusal = mask.refusal(tokens) or (
                f"--query-tokens {queries:,} is more than T = {tokens:,}" if queries > tokens else None
            )
            if refusal:
                raise SystemExit(f"error: {refusal}")
            for block in args.blocks:
                share = tiles.coverage(mask, tokens, block, block, queries).as_row()
                found.append(
                    {"mask": mask.spelled(), "tokens": tokens, "queries": queries} | share | {"block": block}
                )
    return found


def _table(found: list[dict]) -> str:
    cells = [
        (row["mask"], f"{row['tokens']:,}", f"{row['queries']:,}", str(row["block"]), str(row["block"]))
        + tuple(f"{row[share]:.1%}" for share in ("kept_share", "visited_share", "partial_share"))
        for row in found
    ]
    widths = [max(len(c) for c in column) for column in zip(COLUMNS, *cells, strict=True)]
    return "\n".join(
        "  ".join(c.rjust(w) for c, w in zip(line, widths, strict=True)) for line in [COLUMNS, *cells]
    )


def run_mask_tiles(args: argparse.Namespace) -> int:
    found = rows(args)
    print(json.dumps(found, indent=1) if args.json else _table(found))
    return 0
