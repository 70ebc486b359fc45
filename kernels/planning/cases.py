"""The validation cases: which shapes, dtypes and masks an implementation is checked on,
on a CPU (through the interpreter) and on a GPU (compiled). Plain data, importable without
torch, so that a plan (the GPU preflight, the budget) can list every case validation will
run before anything runs."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Shape:
    batch: int
    heads: int
    tokens: int
    head_dim: int
    layout: str = "contiguous"
    inputs: str = "normal"
    gradient: str = "normal"  # the backward's upstream gradient dO (kernels.spec.GRADIENTS)


# Small enough for the interpreter; T not a multiple of the block, every head dim, and one
# case whose scores overflow a float16 S.
CPU_SHAPES = (
    Shape(2, 3, 1, 16),
    Shape(1, 2, 50, 128),
    Shape(2, 1, 130, 64),
    Shape(1, 2, 67, 32, "bthd"),
    Shape(1, 1, 20, 256),
    Shape(1, 2, 40, 64, inputs="large"),
)
# Compiled kernels on a GPU: up to 16,384 tokens, d = 64 and 128 at length, the rest short.
CUDA_SHAPES = (
    Shape(2, 3, 1, 64),
    Shape(2, 3, 257, 128),
    Shape(1, 2, 300, 16),
    Shape(1, 2, 300, 32, "bthd"),
    Shape(1, 2, 300, 256),
    Shape(1, 4, 1000, 64),
    Shape(1, 2, 4097, 128),
    Shape(1, 2, 8192, 64),
    Shape(1, 1, 8192, 128),
    Shape(1, 1, 16384, 128),
    Shape(1, 2, 1000, 128, inputs="large"),
)

# The backward's cases (each path's gradients, kernels.measure.validate_backward): odd T,
# every head dim, strides, and one case whose products dO·Vᵀ overflow a float16 dP.
BACKWARD_CPU_SHAPES = (
    Shape(2, 3, 1, 16),
    Shape(1, 2, 45, 128),
    Shape(1, 1, 77, 64),
    Shape(1, 2, 67, 32, "bthd"),
    Shape(1, 1, 20, 256),
    Shape(1, 2, 40, 64, gradient="large"),
)
BACKWARD_CUDA_SHAPES = (
    Shape(2, 3, 1, 64),
    Shape(2, 3, 257, 128),
    Shape(1, 2, 300, 16),
    Shape(1, 2, 300, 32, "bthd"),
    Shape(1, 2, 300, 256),
    Shape(1, 4, 1000, 64),
    Shape(1, 2, 4097, 128),
    Shape(1, 2, 1000, 128, gradient="large"),
)


def shapes_for(device: str, backward: bool = False) -> tuple[Shape, ...]:
    if backward:
        return BACKWARD_CUDA_SHAPES if device == "cuda" else BACKWARD_CPU_SHAPES
    return CUDA_SHAPES if device == "cuda" else CPU_SHAPES


def backward_shapes(asked: bool, shapes, given: bool, gradient: str, device: str) -> tuple[Shape, ...]:
    """validate --backward's shapes: the given ``shapes`` (--tokens) with the upstream
    ``gradient``, or the device's backward cases; none unless ``asked``."""
    if not asked:
        return ()
    if not given:
        return shapes_for(device, backward=True)
    return tuple(replace(shape, gradient=gradient) for shape in shapes)


def cases(shapes, dtypes, causals) -> list[tuple[Shape, str, bool]]:
    """Every (shape, dtype, causal) validation runs, in the order it runs them (the order
    sets each case's seed)."""
    return list(itertools.product(shapes, dtypes, causals))


def case_key(
    impl: str, shape: Shape, dtype: str, causal: bool, block_m, block_n, direction: str = "forward"
) -> str:
    """One name for a validation case, the same in the preflight's findings and in
    validation, so that a case the preflight found unlaunchable is left out by name."""
    mask = "causal" if causal else "full"
    key = (
        f"{impl}/{dtype}/B{shape.batch}-H{shape.heads}-T{shape.tokens}-d{shape.head_dim}-{mask}"
        f"-bm{block_m}-bn{block_n}-{shape.layout}-{shape.inputs}"
    )
    return key if direction == "forward" else f"{key}-backward-dO{shape.gradient}"


def unfit_cases(preflight: dict, use: str = "validate") -> dict[str, str]:
    """From the preflight's findings (``python -m kernels preflight``): validation case key →
    why one of its launches cannot run (the first such launch, with its kernel and target)."""
    out: dict[str, str] = {}
    for launch in preflight["launches"]:
        if launch["use"] == use and launch["status"] == "unfit":
            out.setdefault(launch["what"], f"{launch['kernel']} on {launch['target']}: {launch['reason']}")
    return out
