"""The sweep a configuration asks for: its points (``kernels.model.Point``), their file names
and their validations.

Pure Python, so that the workflow can plan thousands of points without importing torch.
"""

from __future__ import annotations

import itertools
import re

from kernels.model import Point
from kernels.names import TRITON_IMPLEMENTATIONS

POINT_PATTERN = "{impl}/{dtype}/B{batch}-H{heads}-T{tokens}-d{head_dim}-{mask}-{blocks}"
VALIDATION_PATTERN = "{impl}_{dtype}_{blocks}"
NO_BLOCKS = "na"


def blocks_label(block_m: int | None, block_n: int | None) -> str:
    return NO_BLOCKS if block_m is None else f"bm{block_m}-bn{block_n}"


def parse_blocks(label: str) -> tuple[int | None, int | None]:
    if label == NO_BLOCKS:
        return None, None
    bm, bn = label.split("-")
    return int(bm.removeprefix("bm")), int(bn.removeprefix("bn"))


def wildcards(point: Point) -> dict[str, str]:
    return {"impl": point.impl, "dtype": point.dtype, "batch": str(point.batch),
            "heads": str(point.heads), "tokens": str(point.tokens),
            "head_dim": str(point.head_dim), "mask": "causal" if point.causal else "full",
            "blocks": blocks_label(point.block_m, point.block_n)}


def point_name(point: Point) -> str:
    """The point's file name under results/points/, without the extension."""
    return POINT_PATTERN.format(**wildcards(point))


def validation_name(point: Point) -> str:
    """The validation (implementation, dtype, blocks) a point depends on."""
    return VALIDATION_PATTERN.format(**wildcards(point))


def batches_for(sweep: dict, tokens: int) -> list[int]:
    total = sweep.get("total_tokens")
    return [max(1, total // tokens)] if total else list(sweep["batch"])


def points(sweep: dict) -> list[Point]:
    """Every point of the sweep: the product of its lists, blocks for Triton impls only."""
    out = []
    for impl, tokens, heads, d, dtype, causal in itertools.product(
            sweep["impls"], sweep["tokens"], sweep["heads"], sweep["head_dim"], sweep["dtype"],
            sweep["causal"]):
        blocks = [tuple(b) for b in sweep["blocks"]] if impl in TRITON_IMPLEMENTATIONS else [(None, None)]
        for batch in batches_for(sweep, tokens):
            for bm, bn in blocks:
                out.append(Point(impl, batch, heads, tokens, d, dtype, causal, bm, bn))
    return out


def point_from_wildcards(wc) -> Point:
    bm, bn = parse_blocks(wc["blocks"])
    return Point(wc["impl"], int(wc["batch"]), int(wc["heads"]), int(wc["tokens"]),
                      int(wc["head_dim"]), wc["dtype"], wc["mask"] == "causal", bm, bn)


_NAME = re.compile(r"(?P<impl>\w+)/(?P<dtype>\w+)/B(?P<batch>\d+)-H(?P<heads>\d+)-T(?P<tokens>\d+)"
                   r"-d(?P<head_dim>\d+)-(?P<mask>causal|full)-(?P<blocks>na|bm\d+-bn\d+)")


def point_from_name(name: str) -> Point:
    """Inverse of ``point_name``."""
    match = _NAME.fullmatch(name.removesuffix(".json"))
    if not match:
        raise ValueError(f"point name {name!r} does not read as {POINT_PATTERN}")
    return point_from_wildcards(match.groupdict())


def cli_args(point: Point) -> list[str]:
    """The point's flags for ``python -m kernels measure``."""
    args = ["--impl", point.impl, "--batch", str(point.batch), "--heads", str(point.heads),
            "--tokens", str(point.tokens), "--head-dim", str(point.head_dim),
            "--dtype", point.dtype]
    if point.causal:
        args.append("--causal")
    if point.block_m is not None:
        args += ["--block-m", str(point.block_m), "--block-n", str(point.block_n)]
    return args
