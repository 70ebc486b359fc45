"""The forward pass of a point measured, from its inputs: one call counted under the
interpreter, or timed (the fastest of the launch candidates on a GPU), its peak allocation,
its output against the float64 definition, and its stages timed warm and cold. The harness
(kernels.measure.run) calls it for a forward point, kernels.measure.backward_run for a
backward one; neither direction imports the other."""

from __future__ import annotations

import math
import time
from contextlib import nullcontext

import torch

from kernels import catalog, masks
from kernels.impl import mode
from kernels.impl.checks import DTYPES
from kernels.masks import shifted
from kernels.measure.chain_times import STAGES_UNMASKED, timed_chain
from kernels.measure.memory import allocated_and_ops, peak_allocated
from kernels.measure.verdict import RTOL_ABS, held_to_the_rule, past_bound
from kernels.models.stage_cost import forward_stage_names
from kernels.planning.point import Point
from kernels.spec import REFERENCE_CHUNK_BYTES


def call_of(point: Point, q, k, v, launch: tuple[int, int] | None = None):
    """One call of the point; ``launch``: the fused kernel's (num_warps, num_stages)."""
    from kernels.impl.registry import attention

    options = {}
    if point.triton:
        options = {"block_m": point.block_m, "block_n": point.block_n}
    if launch:
        options |= {"num_warps": launch[0], "num_stages": launch[1]}
    if point.sp_dtype:  # a point has one only where its implementation takes the option
        options["sp_dtype"] = point.sp_dtype
    if point.num_splits:  # likewise
        options["num_splits"] = point.num_splits
    return lambda: attention(q, k, v, impl=point.impl, mask=point.mask, **options)


def _chunk_rows(q) -> int:
    return max(1, REFERENCE_CHUNK_BYTES // (8 * q.shape[0] * q.shape[1] * q.shape[2]))


def check_output(point: Point, q, k, v, out: torch.Tensor) -> dict:
    """Error against the float64 definition and the count of non-finite outputs. Where the
    output is not finite but the definition is, the point failed: the reason says whether the
    largest score exceeds what its S dtype holds. Where its error exceeds the validation
    rule's bound at this very point (``bound_at``), it failed too, unless its path is wrong
    there on purpose (the tile-local softmax past one key tile)."""
    from kernels.impl.reference import largest_product, reference_float64

    ref = reference_float64(q, k, v, point.mask_kind, chunk_rows=_chunk_rows(q))
    bad = int((~torch.isfinite(out)).sum().item())
    found = {"nonfinite_outputs": bad, "max_abs_error": None}
    if not bad:
        error = (out.double() - ref).abs().max().item()
        found["max_abs_error"] = error
        if error > RTOL_ABS and held_to_the_rule(point.impl, point.tokens, point.block_n):
            bound = bound_at(point, q, k, v, ref)
            if not error <= bound:
                found["check_reason"] = past_bound("its output", error, bound, BOUND_RULE)
        return found
    if not torch.isfinite(ref).all():
        return found | {"check_reason": "the float64 definition itself is not finite"}
    product = largest_product(q, k, _chunk_rows(q))
    return found | {"overflow": overflow_reason(point, bad, out.numel(), product)}


BOUND_RULE = "2 × torch_naive's error in the same dtype + 1e-05, as validation holds it"


def bound_at(point: Point, q, k, v, ref: torch.Tensor) -> float:
    """The validation rule's bound on these very inputs: 2·max|naive − ref| + 1e-5, the naive
    baseline (torch_naive in the point's dtype, kernels.measure.validate.naive_baseline)
    computed a block of query rows at a time against the keys those rows see, so that it
    needs no more memory than the float64 reference's blocks. Only asked where the error
    exceeds 1e-5, which a float32 point's seldom does. Causal, each block against the keys up
    to its last row's; any other mask against all T, as the block's rows see it."""
    from kernels.measure.validate import naive_baseline

    queries, T = q.shape[-2], k.shape[-2]
    step = _chunk_rows(q)
    worst = 0.0
    for start in range(0, queries, step):
        rows = slice(start, min(queries, start + step))
        seen = T - queries + rows.stop if point.causal else T  # keys past the last row's are masked
        kind = point.mask_kind
        mask = shifted.for_rows(kind, rows, queries) if masks.beyond_causal(kind) else kind
        naive = naive_baseline(q[..., rows, :], k[..., :seen, :], v[..., :seen, :], mask)
        worst = max(worst, (naive.double() - ref[..., rows, :]).abs().max().item())
    return 2.0 * worst + RTOL_ABS


def overflow_reason(point: Point, bad: int, total: int, product: float) -> str:
    text = f"{bad:,} of {total:,} outputs are not finite where the float64 definition is"
    sp = catalog.stored_dtype(point.impl, point.dtype, point.sp_dtype) if point.stores != "none" else None
    if sp is None:
        return text
    largest = torch.finfo(DTYPES[sp]).max
    scaled = product / math.sqrt(point.head_dim)
    if max(product, scaled) <= largest:
        return text
    return (
        f"{text}: the largest |q·k| is {product:.3g} ({scaled:.3g} after the 1/√d scale), beyond "
        f"{sp}'s largest finite value {largest:,.0f}, so S stored in {sp} overflows"
    )


def first_call_seconds(call, device: str) -> float:
    """A compiled path's first call of this shape and mask, which compiles it (or loads it
    from the compiler's cache), timed apart from the timed calls and before the machine's
    load is watched (compiling may start helper processes)."""
    started = time.perf_counter()
    call()
    if device == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - started


def fastest_launch(point: Point, q, k, v, candidates: list[tuple[int, int]]) -> dict:
    """Time the point with each launch candidate (after its own warm-up, which compiles it)
    and keep the fastest, as Triton's autotuner would, but with every time recorded."""
    from kernels.measure.timing import time_cuda

    timed = []
    for launch in candidates:
        call = call_of(point, q, k, v, launch)
        call()
        timed.append({"num_warps": launch[0], "num_stages": launch[1], **time_cuda(call)})
    best = min(timed, key=lambda t: t["time_ms"])
    return best | {
        "launch_candidates": [{k: t[k] for k in ("num_warps", "num_stages", "time_ms")} for t in timed]
    }


def run_forward(
    point: Point,
    q,
    k,
    v,
    device: str,
    threads: int,
    use_ncu: bool,
    ncu_args: list[str],
    candidates: list[tuple[int, int]],
) -> dict:
    """A forward point's measurement from its inputs: counted under the interpreter, else
    timed (the fastest launch candidate on a GPU), its peak allocation, its output checked
    against float64 and its stages timed, with the machine's load around it."""
    from kernels.measure.contention import watched
    from kernels.measure.timing import time_cpu, time_cuda

    call = call_of(point, q, k, v)
    out_bytes = q.numel() * q.element_size()
    found: dict = {}
    interpreted = point.triton and mode.interpret()
    if catalog.get(point.impl).compiles and not interpreted:
        found["compile_seconds"] = first_call_seconds(call, device)
    # the machine's load while the point is timed, its call and its stages (never interpreted)
    with nullcontext() if interpreted else watched(threads) as contention:
        if interpreted:
            from kernels.measure.traffic import count_traffic

            with count_traffic() as counter:
                peak, out = peak_allocated(device, call)
            found["counted"] = counter.by_stage()
            found["time_reason"] = "not timed: Triton interpreter (correctness and counting only)"
        elif device == "cuda" and candidates:
            found |= fastest_launch(point, q, k, v, candidates)
            chosen = (found["num_warps"], found["num_stages"])
            peak, out = peak_allocated(device, call_of(point, q, k, v, chosen))
        else:
            if device == "cuda":
                call()  # compile and warm up before anything is measured
            # the operations a PyTorch call ran (not the interpreter's, which are not the kernel's)
            peak, found["ops_run"], out = allocated_and_ops(device, call)
            found |= time_cuda(call) if device == "cuda" else time_cpu(call, threads)
        found["peak_alloc_bytes"] = max(0, peak - out_bytes)
        found |= check_output(point, q, k, v, out)
        if forward_stage_names(point):
            del out  # the stages allocate their own S and P
            found |= timed_stages(point, q, k, v, device)
    if contention is not None:
        found["contention"] = contention
    if device == "cuda" and use_ncu:
        from kernels.measure import ncu

        chosen = ["--launch", f"{found['num_warps']},{found['num_stages']}"] if "num_warps" in found else []
        found |= ncu.profile(ncu_args + chosen)  # the launch that was timed
    return found


def stage_chain(point: Point, q, k, v) -> list:
    """The point's stages as callables, in chain order (its registration's stage chain)."""
    chain = catalog.get(point.impl).stage_chain()
    blocks = (point.block_m, point.block_n) if point.triton else ()
    options = {"sp_dtype": point.sp_dtype} if point.sp_dtype else {}
    return chain(q, k, v, point.causal, *blocks, **options)[0]


def timed_stages(point: Point, q, k, v, device: str) -> dict:
    """Each stage's warm and cold times beside its bytes, FLOPs and exponentials; under the
    interpreter only the reason they were not timed."""
    if point.triton and mode.interpret():
        return {"stage_time_reason": "not timed: Triton interpreter (correctness and counting only)"}
    if masks.beyond_causal(point.mask_kind):
        return {"stage_time_reason": STAGES_UNMASKED}
    return timed_chain(point, stage_chain(point, q, k, v), device)
