"""The validation cases: which shapes, dtypes and masks an implementation is checked on,
on a CPU (through the interpreter) and on a GPU (compiled), the inference shapes (fewer
queries than keys, grouped K/V heads) on the implementations that take them. Plain data,
importable without torch, so that a plan (the GPU preflight, the budget) can list every case
validation will run before anything runs."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

from kernels import catalog


@dataclass(frozen=True)
class Shape:
    batch: int
    heads: int
    tokens: int
    head_dim: int
    layout: str = "contiguous"
    inputs: str = "normal"
    gradient: str = "normal"  # the backward's upstream gradient dO (kernels.spec.GRADIENTS)
    query_tokens: int | None = None  # queries against the T keys (the last ones); None: T
    kv_heads: int | None = None  # K/V heads, each shared by heads / kv_heads; None: heads

    @property
    def inference(self) -> tuple[bool, bool]:
        """Whether it has fewer queries than keys, and grouped K/V heads: the dimensions an
        implementation must take (its registration's ``takes``) to be validated on it."""
        return self.query_tokens is not None, self.kv_heads is not None

    def name_suffix(self) -> str:
        """-KV<n> and -Q<n> where the shape has them, as a point's name spells them."""
        kv = "" if self.kv_heads is None else f"-KV{self.kv_heads}"
        return kv + ("" if self.query_tokens is None else f"-Q{self.query_tokens}")


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
# Inference: fewer queries than keys (query_tokens: 1, decode, and 7) at odd T, and grouped
# K/V heads (2 of 8 query heads, and 1: multi-query), each dimension alone and both together,
# T under one block and past it, one case strided. Validated on every implementation that
# takes the shape's dimensions (its registration's takes=), causal and not. Their T differ
# from the square cases', so that no two cases share (B, H, T, d).
INFERENCE_CPU_SHAPES = (
    Shape(2, 2, 29, 16, query_tokens=1),
    Shape(1, 8, 37, 16, query_tokens=7),
    Shape(1, 8, 45, 16, kv_heads=2),
    Shape(2, 8, 77, 64, "bthd", query_tokens=7, kv_heads=2),
    Shape(1, 4, 53, 16, query_tokens=1, kv_heads=1),
)
INFERENCE_CUDA_SHAPES = (
    Shape(4, 4, 1001, 16, query_tokens=1),
    Shape(2, 8, 255, 64, query_tokens=7),
    Shape(1, 8, 301, 128, kv_heads=2),
    Shape(2, 8, 999, 64, "bthd", query_tokens=7, kv_heads=2),
    Shape(1, 8, 4095, 128, query_tokens=1, kv_heads=1),
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
    Shape(1, 8, 37, 16, kv_heads=2),  # grouped heads: dK and dV summed over each group of 4
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
    Shape(1, 8, 1000, 128, kv_heads=2),  # grouped heads
)


def shapes_for(device: str, backward: bool = False) -> tuple[Shape, ...]:
    """The device's validation cases: the square ones, then (forward) the inference ones."""
    if backward:
        return BACKWARD_CUDA_SHAPES if device == "cuda" else BACKWARD_CPU_SHAPES
    if device == "cuda":
        return CUDA_SHAPES + INFERENCE_CUDA_SHAPES
    return CPU_SHAPES + INFERENCE_CPU_SHAPES


def takes(impl: str, shape: Shape) -> bool:
    """Whether the implementation's registration takes the shape's inference dimensions."""
    return catalog.get(impl).shape_refusal(*shape.inference) is None


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
        f"-bm{block_m}-bn{block_n}-{shape.layout}-{shape.inputs}{shape.name_suffix()}"
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
