"""What the tests marked gpu (tests/test_gpu.py) launch, as data: the preflight compiles the
same launches before a GPU minute is spent, and the tests read their cases from here, so the
two cannot drift apart."""

from __future__ import annotations

from kernels.spec import DEFAULT_BLOCK, DTYPES
from kernels.study.point import Point

# compiled validation of every Triton implementation on the GPU shapes (kernels.study.cases)
VALIDATION_IMPLS: tuple[str, ...] = ("triton_naive", "triton_flash", "triton_tile_softmax")
VALIDATION_DTYPES: tuple[str, ...] = DTYPES
VALIDATION_BLOCKS: tuple[int, int] = (DEFAULT_BLOCK, DEFAULT_BLOCK)
# a short and a long call (T² four times larger): the clock measures the work
TIMING_POINTS: tuple[Point, ...] = tuple(
    Point("triton_flash", 1, 8, tokens, 128, "bfloat16", False, 128, 64) for tokens in (2048, 8192)
)
# timed with each of its launch candidates
CANDIDATE_POINT = Point("triton_flash", 1, 16, 4096, 128, "bfloat16", True, 128, 64)
# Nsight Compute's DRAM bytes where S and P (256 MiB each) far exceed any L2
_NCU_SHAPE = dict(batch=1, heads=16, tokens=8192, head_dim=128, dtype="bfloat16", causal=False)
NCU_POINTS: tuple[Point, ...] = (
    Point("triton_naive", **_NCU_SHAPE, block_m=64, block_n=64),
    Point("triton_flash", **_NCU_SHAPE, block_m=128, block_n=64),
)


def points() -> list[Point]:
    """Every point the gpu tests measure."""
    return [*TIMING_POINTS, CANDIDATE_POINT, *NCU_POINTS]
