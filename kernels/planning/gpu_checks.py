"""What the tests marked gpu (tests/test_gpu.py) launch, as data: the preflight compiles the
same launches before a GPU minute is spent, and the tests read their cases from here, so the
two cannot drift apart. Paths are chosen by what they are (kernels.catalog), never by name."""

from __future__ import annotations

from kernels import catalog
from kernels.planning.point import Point
from kernels.spec import DEFAULT_BLOCK, DTYPES

VALIDATION_DTYPES: tuple[str, ...] = DTYPES
VALIDATION_BLOCKS: tuple[int, int] = (DEFAULT_BLOCK, DEFAULT_BLOCK)
# Nsight Compute's DRAM bytes where S and P (256 MiB each) far exceed any L2
_NCU_SHAPE = dict(batch=1, heads=16, tokens=8192, head_dim=128, dtype="bfloat16", mask="full")


def validation_impls() -> tuple[str, ...]:
    """Compiled validation of every one of our Triton paths on the GPU shapes (kernels.planning.cases)."""
    return tuple(name for name, entry in catalog.registered().items() if entry.ours and entry.triton)


def timing_points() -> tuple[Point, ...]:
    """A short and a long call of the fused path (T² four times larger): the clock measures the work."""
    fused = catalog.triton_path("none")
    return tuple(Point(fused, 1, 8, tokens, 128, "bfloat16", False, 128, 64) for tokens in (2048, 8192))


def candidate_point() -> Point:
    """Timed with each of its launch candidates: the fused path, which has them."""
    return Point(catalog.triton_path("none"), 1, 16, 4096, 128, "bfloat16", True, 128, 64)


def ncu_points() -> tuple[Point, ...]:
    """The materialized and the fused path where S and P far exceed any L2."""
    return (
        Point(catalog.triton_path("SP"), **_NCU_SHAPE, block_m=64, block_n=64),
        Point(catalog.triton_path("none"), **_NCU_SHAPE, block_m=128, block_n=64),
    )


def points() -> list[Point]:
    """Every point the gpu tests measure."""
    return [*timing_points(), candidate_point(), *ncu_points()]
