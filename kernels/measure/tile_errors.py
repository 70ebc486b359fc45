"""The tile-softmax error map: the tile-local and the fused kernel against float64, over T and
BLOCK_N, on one causal head of float32. Computed by the ``tile_errors`` rule in the same
Triton mode as validation, so that the report only reads the table. Asked for cuda on a
machine without a GPU, the command writes the header alone (no error was computed) and says
why on its log."""

from __future__ import annotations

import os

import torch

from kernels import catalog
from kernels.impl.inputs import make_qkv
from kernels.impl.reference import reference_float64
from kernels.impl.registry import attention
from kernels.io.computed_tables import write_table

TOKENS = (16, 40, 100)
BLOCKS_N = (16, 32, 64)
BLOCK_M = 16
HEAD_DIM = 32


def compared() -> tuple[str, ...]:
    """Our tile-local paths, then the fused path that carries the rows' statistics across
    tiles: the same loop, wrong and right."""
    ours = [e for e in catalog.registered().values() if e.ours]
    return (*[e.name for e in ours if e.tile_local], catalog.triton_path("none"))


def tile_errors(device: str, tokens=TOKENS, blocks_n=BLOCKS_N, seed: int = 0) -> list[dict]:
    """Max |out − ref| of both kernels for every T and BLOCK_N (fresh inputs per T)."""
    rows = []
    for i, t in enumerate(tokens):
        q, k, v = make_qkv(1, 1, t, HEAD_DIM, torch.float32, device, seed + i)
        ref = reference_float64(q, k, v, True)
        for block_n in blocks_n:
            for impl in compared():
                out = attention(q, k, v, impl=impl, causal=True, block_m=BLOCK_M, block_n=block_n)
                rows.append(
                    {
                        "impl": impl,
                        "tokens": t,
                        "block_m": BLOCK_M,
                        "block_n": block_n,
                        "head_dim": HEAD_DIM,
                        "dtype": "float32",
                        "causal": True,
                        "error": (out.double() - ref).abs().max().item(),
                    }
                )
    return rows


def write(rows: list[dict], path: str | os.PathLike) -> None:
    write_table(path, "tile_errors.csv", rows)
