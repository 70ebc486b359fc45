"""Validation of every implementation against the float64 definition.

Pass rule (FlashAttention's): max|out − ref| ≤ 2·max|out_naive − ref| + 1e-5, with ref in
float64 and out_naive the plain PyTorch implementation (``torch_naive``) in the same dtype.
The output buffer is filled with NaN first, so an element a kernel never writes is caught.
``triton_tile_softmax`` is expected to pass only when a row fits in one key tile
(T ≤ BLOCK_N) and to fail otherwise: the seed's claim, checked both ways. A case with large
inputs (q = k = 61,440) checks the other claim about stored scores: an implementation whose S
cannot hold the largest score in its dtype is expected to return non-finite outputs
(verdict ``nonfinite``), while the fused kernels, which keep scores in float32, still pass.
Where torch_naive's own S overflows, the pass rule's baseline is the same three operations
with S in float32. The inference cases (fewer queries than keys, grouped K/V heads:
kernels.planning.cases) run on the implementations whose registration takes their
dimensions, and their rows say the shape (query_tokens, kv_heads).
"""

from __future__ import annotations

import math
import time

import torch

from kernels import catalog, masks
from kernels.impl.checks import DTYPES, UnavailableError
from kernels.impl.inputs import make_qkv
from kernels.impl.reference import hidden_keys, largest_product, per_query_head, reference_float64
from kernels.impl.registry import attention
from kernels.measure.verdict import RTOL_ABS, Result, expected_verdict
from kernels.paths.torch_naive.forward import torch_naive

# the cases are plain data in the study layer (the preflight plans them); re-exported here
from kernels.planning.cases import (  # noqa: F401
    CPU_SHAPES,
    CUDA_SHAPES,
    INFERENCE_CPU_SHAPES,
    INFERENCE_CUDA_SHAPES,
    Shape,
    case_key,
    cases,
    takes,
)
from kernels.spec import DEFAULT_BLOCK, LARGE_INPUT


def _max_abs(out: torch.Tensor, ref: torch.Tensor) -> float:
    return (out.double() - ref).abs().max().item()


def naive_baseline(q, k, v, causal) -> torch.Tensor:
    """torch_naive, or where its S overflows the input dtype, the same three operations with
    S kept in float32 (P still rounded to the input dtype), so that the bound stays finite.
    ``causal``: True or False, or a mask."""
    out = torch_naive(q, k, v, causal)
    if torch.isfinite(out).all():
        return out
    k, v = (per_query_head(x, q.shape[1]) for x in (k, v))  # a baseline: copies are fine here
    s = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(q.shape[-1])
    hidden = hidden_keys(masks.as_mask(causal), k.shape[-2], q.device, q.shape[-2])
    if hidden is not None:
        s = s.masked_fill(hidden, float("-inf"))
    return torch.softmax(s, dim=-1).to(q.dtype) @ v


def _run_into(impl, q, k, v, causal, blocks, poison: float) -> torch.Tensor:
    out = torch.full(q.shape, poison, dtype=q.dtype, device=q.device)
    attention(q, k, v, impl=impl, causal=causal, out=out, **blocks)
    return out


def check_impl(impl, q, k, v, causal, ref, bound, block_m, block_n) -> tuple[float, bool, str, str]:
    """Run one implementation into a NaN-poisoned buffer: (error, written, verdict, message).
    Where NaN remains, a second run into a −∞-poisoned buffer tells an element never written
    (poison in both) from a NaN the kernel computed (NaN in both)."""
    blocks = {"block_m": block_m, "block_n": block_n} if catalog.get(impl).triton else {}
    try:
        out = _run_into(impl, q, k, v, causal, blocks, float("nan"))
        unwritten = torch.isnan(out)
        if unwritten.any():
            unwritten &= _run_into(impl, q, k, v, causal, blocks, float("-inf")) == float("-inf")
    except UnavailableError as err:
        return float("nan"), False, "unavailable", str(err)
    except Exception as err:  # a crash is a verdict, not the end of the table
        return float("nan"), False, "error", f"{type(err).__name__}: {err}"
    written = not unwritten.any().item()
    if not written:
        return _max_abs(out, ref), False, "fail", "output elements left unwritten (NaN poison survived)"
    nonfinite = int((~torch.isfinite(out)).sum().item())
    if nonfinite:
        return float("nan"), True, "nonfinite", f"{nonfinite} of {out.numel()} outputs not finite"
    error = _max_abs(out, ref)
    return error, True, "pass" if error <= bound else "fail", ""


def validate(
    impls=None,
    dtypes=tuple(DTYPES),
    causals=(False, True),
    shapes=CPU_SHAPES + INFERENCE_CPU_SHAPES,
    device: str = "cpu",
    block_m: int = DEFAULT_BLOCK,
    block_n: int = DEFAULT_BLOCK,
    seed: int = 0,
    progress=None,
    unfit: dict[str, str] | None = None,
) -> list[Result]:
    """Every implementation on every case. ``unfit`` names cases (by ``case_key``) whose
    launches cannot run on this GPU, with the reason (the preflight's findings): they are
    left out with verdict ``unfit`` instead of failing at launch. ``impls``: every
    registered implementation unless named; an inference case runs only those of them that
    take its dimensions (kernels.planning.cases.takes)."""
    impls = catalog.names() if impls is None else impls
    results = []
    unfit = unfit or {}
    for case_index, (shape, dtype_name, causal) in enumerate(cases(shapes, dtypes, causals)):
        case_seed = seed * 1_000_003 + case_index
        q, k, v = make_qkv(
            shape.batch,
            shape.heads,
            shape.tokens,
            shape.head_dim,
            DTYPES[dtype_name],
            device,
            case_seed,
            shape.layout,
            shape.inputs,
            query_tokens=shape.query_tokens,
            kv_heads=shape.kv_heads,
        )
        ref = reference_float64(q, k, v, causal)
        bound = 2.0 * _max_abs(naive_baseline(q, k, v, causal), ref) + RTOL_ABS
        product = largest_product(q, k)
        for impl in (name for name in impls if takes(name, shape)):
            start = time.perf_counter()
            triton = catalog.get(impl).triton
            key = case_key(impl, shape, dtype_name, causal, block_m, block_n) if triton else None
            if key in unfit:
                error, written, verdict, message = float("nan"), False, "unfit", unfit[key]
            else:
                error, written, verdict, message = check_impl(
                    impl, q, k, v, causal, ref, bound, block_m, block_n
                )
            result = case_result(
                impl, shape, dtype_name, causal, (block_m, block_n), case_seed, product,
                error=error, bound=bound, written=written, verdict=verdict, message=message,
                seconds=time.perf_counter() - start,
            )  # fmt: skip
            results.append(result)
            if progress:
                progress(result)
    return results


def forward_not_run(reason, verdict, impls, dtypes, causals, shapes, block_m, block_n, seed) -> list[Result]:
    """Every forward case ``validate`` would run with this ``verdict`` and ``reason`` as its
    message (nothing run)."""
    results = []
    for case_index, (shape, dtype_name, causal) in enumerate(cases(shapes, dtypes, causals)):
        # max |q·k|: q = k = LARGE_INPUT everywhere for large inputs; normal inputs never
        # come near a stored dtype's largest value
        product = shape.head_dim * LARGE_INPUT**2 if shape.inputs == "large" else 0.0
        for impl in (name for name in impls if takes(name, shape)):
            results.append(
                case_result(
                    impl,
                    shape,
                    dtype_name,
                    causal,
                    (block_m, block_n),
                    seed * 1_000_003 + case_index,
                    product,
                    error=float("nan"),
                    bound=float("nan"),
                    written=False,
                    verdict=verdict,
                    message=reason,
                    seconds=0.0,
                )  # fmt: skip
            )
    return results


def case_result(impl, shape, dtype_name, causal, blocks, seed, product, **verdict) -> Result:
    """One case's result: the case as validation ran it (blocks for the Triton paths only)
    and the verdict it was expected to give, with ``verdict``'s fields (error, bound,
    written, verdict, message, seconds)."""
    triton = catalog.get(impl).triton
    block_m, block_n = blocks
    return Result(
        impl=impl,
        dtype=dtype_name,
        causal=causal,
        batch=shape.batch,
        heads=shape.heads,
        tokens=shape.tokens,
        head_dim=shape.head_dim,
        layout=shape.layout,
        inputs=shape.inputs,
        block_m=block_m if triton else None,
        block_n=block_n if triton else None,
        seed=seed,
        expected=expected_verdict(impl, shape.tokens, block_n, dtype_name, product, shape.head_dim),
        query_tokens=shape.query_tokens,
        kv_heads=shape.kv_heads,
        **verdict,
    )


HEADER = (
    "impl",
    "pass",
    "dtype",
    "causal",
    "B",
    "H",
    "Hkv",
    "T",
    "Tq",
    "d",
    "layout",
    "inputs",
    "blocks",
    "error",
    "bound",
    "verdict",
    "expected",
    "",
)


def table_row(r: Result) -> tuple[str, ...]:
    blocks = f"{r.block_m}x{r.block_n}" if r.block_m else "-"
    mark = "ok" if r.as_expected else "UNEXPECTED"
    return (
        r.impl,
        r.direction if r.gradient == "normal" else f"{r.direction} (dO {r.gradient})",
        r.dtype,
        str(r.causal).lower(),
        str(r.batch),
        str(r.heads),
        str(r.kv),
        str(r.tokens),
        str(r.queries),
        str(r.head_dim),
        r.layout,
        r.inputs,
        blocks,
        f"{r.error:.2e}",
        f"{r.bound:.2e}",
        r.verdict,
        r.expected,
        mark + (f" {r.message}" if r.message else ""),
    )


def format_table(results: list[Result]) -> str:
    rows = [HEADER] + [table_row(r) for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADER) - 1)]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)) + "  " + row[-1] for row in rows
    ]
    return "\n".join(line.rstrip() for line in lines)


def summary(results: list[Result]) -> str:
    line = _summary([r for r in results if r.direction == "forward"])
    backward = [r for r in results if r.direction == "backward"]
    if backward:
        unexpected = sum(not r.as_expected for r in backward)
        large = [r for r in backward if r.gradient != "normal"]
        overflow = sum(r.verdict == "nonfinite" for r in large)
        foreseen = sum(r.expected == "nonfinite" for r in large)
        line += (
            f"\nbackward: {len(backward)} checks: {len(backward) - unexpected} as expected, {unexpected} "
            f"unexpected; {overflow} with a large dO gave non-finite gradients "
            f"({foreseen} expected: a stored float16 dP)"
        )
    return line


def _summary(results: list[Result]) -> str:
    unexpected = sum(not r.as_expected for r in results)
    tile = [r for r in results if catalog.get(r.impl).tile_local]
    line = f"{len(results)} checks: {len(results) - unexpected} as expected, {unexpected} unexpected"
    if tile:
        fails = sum(r.verdict == "fail" for r in tile)
        line += (
            f"; tile-local softmax failed {fails} of {len(tile)} cases "
            f"({sum(r.expected == 'fail' for r in tile)} expected to fail: T > BLOCK_N)"
        )
    return line
