"""Validation of every backward: dQ, dK and dV of each path against the float64 definition's.

The rule is FlashAttention's for gradients (FlashAttention-2's tests/test_flash_attn.py),
per gradient: max|dX − dX_ref| ≤ 3·max|dX_naive − dX_ref| + 1e-5, with dX_ref from autograd
through the float64 definition and dX_naive from autograd through torch_naive in the input
dtype; a case passes when all three gradients do. The factor is 3 where the forward's is 2:
torch_naive's autograd keeps the softmax's float32 result beside P (a second T×T tensor,
measured in saved_bytes), so a backward that reads the P it stored in bfloat16 — FlashAttention's
standard backward, triton_naive — has twice its error in dQ and dK by construction (measured:
84.2 against 41.8 on a large-dO case, and exactly that with torch's own operations on a
bfloat16 P). Where torch_naive's dP overflows the input dtype, the baseline is the same
math with dP and dS kept in float32 (``widened_gradients``).

Grouped K/V heads (a shape's kv_heads) run on every path whose registration takes them and
that has a backward, dK and dV per K/V head (the sum over the query heads sharing it); a
shape with fewer queries than keys has no backward case (a backward needs as many queries as
keys: kernels.impl.autograd refuses the graph), so validation leaves it out, by the shape.

Expected verdicts are computed, as the forward's are: ``refused`` for a path without a
backward (asking a gradient of it raises, naming why), ``nonfinite`` where the forward's
stored S already overflows, or where a materialized path (stores S and P) stores a dP whose
largest element max|dO·Vᵀ| its P's dtype cannot hold (dS, at most the scale times dP's
spread, is flagged with it), else ``pass``. Each row also carries the bytes the path kept
for its backward, measured with saved-tensor hooks (kernels.measure.saved), beside the
model's count (kernels.models.backward_cost) where there is one.
"""

from __future__ import annotations

import math
import time

import torch

from kernels import catalog
from kernels.impl.checks import DTYPES, NoBackwardError, UnavailableError
from kernels.impl.inputs import make_qkv
from kernels.impl.reference import largest_product, per_query_head, reference_float64
from kernels.impl.registry import attention
from kernels.measure.saved import saved_bytes, saved_during
from kernels.measure.verdict import RTOL_ABS, Result, expected_verdict
from kernels.models.backward_cost import kept_bytes
from kernels.paths.torch_naive.forward import torch_naive, torch_naive_parts
from kernels.planning.cases import BACKWARD_CPU_SHAPES, Shape, case_key, cases, takes
from kernels.planning.point import Point
from kernels.spec import DEFAULT_BLOCK, LARGE_GRADIENT, LARGE_INPUT, SDPA_IMPLEMENTATIONS

GRADIENT_NAMES = ("dQ", "dK", "dV")
GRADIENT_FACTOR = 3.0  # FlashAttention-2's tests hold dQ, dK, dV to 3× the PyTorch error
Gradients = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def upstream_gradient(q: torch.Tensor, seed: int, kind: str = "normal") -> torch.Tensor:
    """A fresh random dO of q's shape (B, H, T, d), contiguous, in q's dtype
    (kernels.spec.GRADIENTS: ``large`` scales it by LARGE_GRADIENT)."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    do = torch.randn(tuple(q.shape), generator=gen, dtype=torch.float32)
    if kind == "large":
        do *= LARGE_GRADIENT
    return do.to(dtype=q.dtype, device=q.device)


def gradients(fn, q, k, v, do) -> tuple[torch.Tensor, Gradients]:
    """fn(q, k, v) on fresh leaves and their (dQ, dK, dV) against ``do``, by autograd."""
    leaves = [t.detach().clone().requires_grad_(True) for t in (q, k, v)]
    out = fn(*leaves)
    out.backward(do.to(out.dtype))
    return out, tuple(t.grad for t in leaves)


def reference_gradients(q, k, v, do, causal) -> Gradients:
    """The float64 definition's gradients (``causal``: True or False, or a mask)."""
    wide = [t.double() for t in (q, k, v, do)]
    return gradients(lambda a, b, c: reference_float64(a, b, c, causal), *wide)[1]


def widened_gradients(q, k, v, do, causal: bool) -> Gradients:
    """The standard backward (FlashAttention's Algorithm 3) on torch_naive's P with dP and
    dS kept in float32 (dV and the results in the input dtype): dV = Pᵀ·dO, dP = dO·Vᵀ,
    dS = P∘(dP − rowsum(P∘dP))/√d, dQ = dS·K, dK = dSᵀ·Q — the baseline where torch_naive's
    own dP overflows the input dtype. With grouped heads, per query head, then dK and dV
    summed over each K/V head's group."""
    _, p, _ = torch_naive_parts(q, k, v, causal)
    kv_heads = k.shape[1]
    k, v = (per_query_head(x, q.shape[1]) for x in (k, v))  # a baseline: copies are fine here
    dv = p.transpose(-1, -2) @ do
    p32 = p.float()
    dp = do.float() @ v.float().transpose(-1, -2)
    ds = p32 * (dp - (p32 * dp).sum(-1, keepdim=True)) / math.sqrt(q.shape[-1])
    dk = ds.transpose(-1, -2) @ q.float()
    return (ds @ k.float()).to(q.dtype), per_kv_head(dk, kv_heads).to(q.dtype), per_kv_head(dv, kv_heads)


def per_kv_head(grad: torch.Tensor, kv_heads: int) -> torch.Tensor:
    """A gradient with a head per query head as one per K/V head: the sum over the query heads
    sharing it, added in float32, in the gradient's dtype (as given where none is shared)."""
    if grad.shape[1] == kv_heads:
        return grad
    return grad.unflatten(1, (kv_heads, -1)).float().sum(2).to(grad.dtype)


def baseline_gradients(q, k, v, do, causal: bool) -> Gradients:
    """torch_naive's autograd in the input dtype, or where that overflows, widened_gradients."""
    got = gradients(lambda a, b, c: torch_naive(a, b, c, causal), q, k, v, do)[1]
    if all(torch.isfinite(g).all() for g in got):
        return got
    return widened_gradients(q, k, v, do, causal)


def _max_abs(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.double() - b).abs().max().item()


def gradient_errors(got: Gradients, ref: Gradients, base: Gradients) -> list[tuple[str, float, float]]:
    """(name, error, bound) of dQ, dK and dV: the rule, gradient by gradient."""
    rows = []
    for name, g, r, b in zip(GRADIENT_NAMES, got, ref, base, strict=True):
        rows.append((name, _max_abs(g, r), GRADIENT_FACTOR * _max_abs(b, r) + RTOL_ABS))
    return rows


def worst_gradient(got: Gradients, ref: Gradients, base: Gradients) -> tuple[str, float, float]:
    """(name, error, bound) of the gradient furthest past its bound, or nearest to it."""
    rows = gradient_errors(got, ref, base)
    return max(rows, key=lambda row: math.inf if not row[1] <= row[2] else row[1] / row[2])


def stored_gradient(impl: str, dtype: str, product: float) -> float | None:
    """The largest dP a materialized path stores (max|dO·Vᵀ|), in its P's dtype; None where
    no dP is stored (S only, fused, PyTorch's SDPA, whose math backend may widen, float32 P)."""
    entry = catalog.get(impl)
    stored_dtype = entry.sp_dtype or dtype
    if not entry.materialized or impl in SDPA_IMPLEMENTATIONS or stored_dtype in ("float32", "float64"):
        return None
    return product


def expected_backward(
    impl: str, shape: Shape, dtype: str, block_n: int, products: tuple[float, float]
) -> str:
    """``refused`` (no backward), ``nonfinite`` (a stored S or dP overflows) or ``pass``."""
    if catalog.get(impl).backward_reason():
        return "refused"
    qk, dov = products
    if expected_verdict(impl, shape.tokens, block_n, dtype, qk, shape.head_dim) == "nonfinite":
        return "nonfinite"
    stored = stored_gradient(impl, dtype, dov)
    if stored is None:
        return "pass"
    return "nonfinite" if stored > torch.finfo(DTYPES[catalog.get(impl).sp_dtype or dtype]).max else "pass"


def runs_backward(shape: Shape) -> bool:
    """Whether a shape has a backward case: as many queries as keys (a graph with fewer is
    refused when its forward builds it, kernels.impl.autograd), so no inference shape with
    query_tokens is one."""
    return shape.query_tokens in (None, shape.tokens)


def backward_cases(shapes, dtypes, causals) -> list[tuple[Shape, str, bool]]:
    """Every (shape, dtype, causal) the backward validation runs, in order (the order sets
    each case's seed): the shapes that have a backward (``runs_backward``)."""
    return cases([shape for shape in shapes if runs_backward(shape)], dtypes, causals)


def backward_impls(impls, shape: Shape) -> list[str]:
    """The paths a backward case runs: on the square problem every one (a path without a
    backward is expected to refuse); on grouped K/V heads, those whose registration takes
    kv_heads and that have a backward."""
    if shape.kv_heads in (None, shape.heads):
        return list(impls)
    return [name for name in impls if takes(name, shape) and not catalog.get(name).backward_reason()]


def modelled_kept(impl, shape: Shape, dtype: str, causal: bool, blocks) -> int | None:
    """The backward model's bytes kept from the forward for this case, where it has one."""
    point = Point(
        impl, shape.batch, shape.heads, shape.tokens, shape.head_dim, dtype, causal, *blocks,
        kv_heads=shape.kv_heads,
    )  # fmt: skip
    kept = kept_bytes(point)
    return None if kept is None else sum(kept.values())


def check_backward(impl, q, k, v, do, causal, ref, base, blocks) -> dict:
    """One path's gradients on one case: error, bound, verdict, message and saved bytes."""
    options = {"block_m": blocks[0], "block_n": blocks[1]} if catalog.get(impl).triton else {}
    verdict = {"error": math.nan, "bound": math.nan, "written": False, "saved_bytes": None}
    run = lambda a, b, c: attention(a, b, c, impl=impl, causal=causal, **options)  # noqa: E731
    try:
        (_, got), saved = _saving(lambda: gradients(run, q, k, v, do))
    except UnavailableError as err:
        return verdict | {"verdict": "unavailable", "message": str(err)}
    except NoBackwardError as err:
        return verdict | {"verdict": "refused", "message": str(err)}
    except Exception as err:  # a crash is a verdict, not the end of the table
        return verdict | {"verdict": "error", "message": f"{type(err).__name__}: {err}"}
    verdict |= {"written": True, "saved_bytes": saved}
    broken = [n for n, g in zip(GRADIENT_NAMES, got, strict=True) if not torch.isfinite(g).all()]
    if broken:
        count = sum(int((~torch.isfinite(g)).sum()) for g in got)
        return verdict | {
            "verdict": "nonfinite",
            "message": f"{count} gradient elements not finite ({', '.join(broken)})",
        }
    name, error, bound = worst_gradient(got, ref, base)
    passed = error <= bound
    return verdict | {
        "error": error,
        "bound": bound,
        "verdict": "pass" if passed else "fail",
        "message": f"worst: {name}",
    }


def _saving(run):
    """run()'s result and the bytes autograd saved while its forward ran."""
    result, saved = saved_during(run)
    return result, saved_bytes(saved)


def validate_backward(
    impls=None,
    dtypes=tuple(DTYPES),
    causals=(False, True),
    shapes=BACKWARD_CPU_SHAPES,
    device: str = "cpu",
    block_m: int = DEFAULT_BLOCK,
    block_n: int = DEFAULT_BLOCK,
    seed: int = 0,
    progress=None,
    unfit: dict[str, str] | None = None,
) -> list[Result]:
    """Every implementation's gradients on every backward case (kernels.measure.validate's
    arguments; ``unfit`` keyed by case_key(..., "backward"))."""
    impls = catalog.names() if impls is None else impls
    unfit = unfit or {}
    results = []
    for case_index, (shape, dtype_name, causal) in enumerate(backward_cases(shapes, dtypes, causals)):
        case_seed = seed * 1_000_003 + case_index
        q, k, v = make_qkv(
            shape.batch, shape.heads, shape.tokens, shape.head_dim, DTYPES[dtype_name], device,
            case_seed, shape.layout, shape.inputs, kv_heads=shape.kv_heads,
        )  # fmt: skip
        do = upstream_gradient(q, case_seed + 1, shape.gradient)
        ref = reference_gradients(q, k, v, do, causal)
        base = baseline_gradients(q, k, v, do, causal)
        products = (largest_product(q, k), largest_product(do, v))
        for impl in backward_impls(impls, shape):
            start = time.perf_counter()
            blocks = (block_m, block_n) if catalog.get(impl).triton else (None, None)
            key = case_key(impl, shape, dtype_name, causal, block_m, block_n, "backward")
            if catalog.get(impl).triton and key in unfit:
                found = {"error": math.nan, "bound": math.nan, "written": False, "saved_bytes": None}
                found |= {"verdict": "unfit", "message": unfit[key]}
            else:
                found = check_backward(impl, q, k, v, do, causal, ref, base, (block_m, block_n))
            result = backward_result(impl, shape, dtype_name, causal, blocks, case_seed, products, found)
            result.seconds = time.perf_counter() - start
            results.append(result)
            if progress:
                progress(result)
    return results


def backward_result(
    impl, shape: Shape, dtype: str, causal: bool, blocks, seed: int, products, found
) -> Result:
    """One backward case's row: the case, its expected verdict and what was found."""
    block_m, block_n = blocks
    return Result(
        impl=impl, dtype=dtype, causal=causal, batch=shape.batch, heads=shape.heads,
        tokens=shape.tokens, head_dim=shape.head_dim, layout=shape.layout, inputs=shape.inputs,
        block_m=block_m, block_n=block_n, seed=seed,
        expected=expected_backward(impl, shape, dtype, block_n or DEFAULT_BLOCK, products),
        seconds=0.0, direction="backward", gradient=shape.gradient,
        saved_model_bytes=modelled_kept(impl, shape, dtype, causal, (block_m, block_n)),
        kv_heads=shape.kv_heads, **found,
    )  # fmt: skip


def typical_products(shape: Shape) -> tuple[float, float]:
    """max|q·kᵀ| and max|dO·Vᵀ| of a case that was not run, for its expected verdict: exact
    for large inputs (q = k = LARGE_INPUT), four standard deviations of the products of
    N(0, 1) inputs otherwise."""
    d = shape.head_dim
    qk = d * LARGE_INPUT**2 if shape.inputs == "large" else 4 * math.sqrt(d)
    dov = 4 * math.sqrt(d) * (LARGE_GRADIENT if shape.gradient == "large" else 1.0)
    return qk, dov


def backward_not_run(reason, verdict, impls, dtypes, causals, shapes, block_m, block_n, seed) -> list[Result]:
    """Every backward case with this ``verdict`` and ``reason`` (nothing run)."""
    out = []
    for case_index, (shape, dtype_name, causal) in enumerate(backward_cases(shapes, dtypes, causals)):
        for impl in backward_impls(impls, shape):
            blocks = (block_m, block_n) if catalog.get(impl).triton else (None, None)
            found = {"error": math.nan, "bound": math.nan, "written": False, "saved_bytes": None}
            found |= {"verdict": verdict, "message": reason}
            seed_of = seed * 1_000_003 + case_index
            out.append(
                backward_result(
                    impl, shape, dtype_name, causal, blocks, seed_of, typical_products(shape), found
                )
            )
    return out
