"""The fused backward of triton_flash: nothing T×T in global memory, P rebuilt tile by tile.

Kept from the forward: O (the caller holds it anyway; it gives D = rowsum(dO∘O)) and each
row's log-sum-exp LSE, float32, in base-2 units (``flash.attention_fwd_kernel`` with
``STORE_LSE``): LSE_i = log2 Σ_j exp2(c·log2(e)·S_ij). With it a tile of P is one exp2 away
from its scores, P = exp2(c·log2(e)·Q·Kᵀ − LSE), with no reduction over the keys.

Three launches:

- ``delta`` (``backward_common``): D = rowsum(dO∘O), float32 (B, H, T);
- ``dkdv``: one program per BLOCK_N key rows and (b, K/V head), streaming the query blocks
  that see them (of each query head sharing the K/V head, one head after another): S = Q·Kᵀ
  again, P from S and LSE, dV += Pᵀ·dO, dP = dO·Vᵀ, dS = P∘(dP − D), dK += dSᵀ·Q, and dK
  scaled by c once at the end (c = 1/√d folded out of dS);
- ``dq``: one program per BLOCK_M query rows, streaming key blocks: S, P, dP, dS again,
  dQ += dS·K, scaled by c at the end.

Why two kernels and 7 tile products per tile pair (4 in ``dkdv``, 3 in ``dq``), the layout of
Triton's fused-attention tutorial, rather than FlashAttention-2's one loop of 5 (S, dV, dP,
dK, and dQ added into global memory with atomics from every key block): each program here
owns the rows it writes, so there are no atomics and every sum runs in a fixed order: the
gradients are the same bits on every run, on the GPU as in Triton's interpreter (which runs
programs one after another, so it could not show the run-to-run differences that atomic
float additions make on a GPU), and the traffic counted is plain loads and stores. The cost
is S and dP computed twice, 7 products per tile pair instead of 5.

Causal: tiles wholly in the future of their query block are never visited, in either
kernel. Each inner loop is one ``@triton.jit`` function with a ``MASKED`` switch, run
unmasked over the tiles that need no mask and masked over the ones the diagonal crosses and
the partial last tile of a T that is not a multiple of the block (as ``attend_tiles`` in
``flash``). ``dq`` calls it twice (unmasked, masked: the diagonal and the edge are both at
the end of its key range). ``dkdv`` calls it three times, because a key block's masked
query blocks lie at both ends of its range: the diagonal first, the edge last.

Under a mask beyond causal (``BOUNDED``, kernels.masks), ``dq`` walks the forward's map of
key tiles (each row's run of keys read from ``BOUNDS``), and ``dkdv`` the same map read by key
block (``key_block_rows``: the query blocks that see any of its keys, and those that see all of
them, which run unmasked); the tiles outside are never loaded.

Grouped heads (k and v with Hkv < H heads, each shared by a group of H / Hkv query heads):
``dq`` reads query head h's keys at K/V head h // (H / Hkv), by index; ``dkdv`` sums its K/V
head's dK and dV over the group in registers, the heads in order, and stores them once. So
dK and dV come out with k's shape, summed in a fixed order (no per-query-head float32
buffers, no atomics), and K and V are loaded once per key block by ``dkdv`` (by ``dq`` once
per query head's programs, as the forward does).

A partial block of the rows a program owns (keys in ``dkdv``, queries in ``dq``) needs no
mask inside the loop: its padding rows are loaded as zeros and only ever feed the padding
rows of the program's own result (rows of a matrix product do not mix), which are not
stored. Only the streamed dimension is masked.
"""

from __future__ import annotations

import torch

from kernels.impl.autograd import check_backward_queries
from kernels.impl.triton.backward_common import delta_launch, delta_tensor, empty_gradients
from kernels.impl.triton.common import (
    LOG2E,
    cast,
    check_triton_device,
    dot_in_float32,
    key_runs,
    mma,
    sm_scale,
    warps_for,
)
from kernels.impl.triton.lang import tl, triton
from kernels.impl.triton.launch import Launch
from kernels.paths.triton_flash.backward_model import key_block_rows as model_rows
from kernels.paths.triton_flash.forward import attention_fwd_launch, visited_tiles

SAVED = ("O", "LSE")
BACKWARD_STAGES = ("delta", "dkdv", "dq")  # one kernel each, in launch order
# num_stages of dkdv and dq: built for sm_80 and sm_90 (d 64–256, blocks 64–128, 2-byte
# dtypes), 2 fits both targets' shared memory up to d = 256 with 64 × 64 blocks and spills
# less than 1 (which ptxas handles badly at 128 × 128 on sm_80)
BACKWARD_STAGES_DEPTH = 2


@triton.jit
def dkdv_tiles(
    dk,
    dv,
    k,
    v,
    q_base,
    do_base,
    lse_base,
    delta_base,
    s_qt,
    s_qd,
    s_gt,
    s_gd,
    offs_n,
    offs_d,
    lo,
    hi,
    T,
    qk_scale_log2,
    bounds_base,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    MASKED: tl.constexpr,
    CAUSAL: tl.constexpr,
    DOT_F32: tl.constexpr,
    BOUNDED: tl.constexpr,
):
    """Query blocks [lo, hi) into one key block's dK (unscaled) and dV, key-major: the tiles
    are Sᵀ (BLOCK_N × BLOCK_M), so that both products accumulate without a transpose of P.
    ``BOUNDED``: the masked tiles read their rows' runs of keys at ``bounds_base``."""
    for start_m in range(lo, hi, BLOCK_M):
        offs_m = start_m + tl.arange(0, BLOCK_M)
        q_ptrs = q_base + offs_m[:, None] * s_qt + offs_d[None, :] * s_qd
        do_ptrs = do_base + offs_m[:, None] * s_gt + offs_d[None, :] * s_gd
        if MASKED:
            rows = offs_m < T
            q = tl.load(q_ptrs, mask=rows[:, None], other=0.0)
            do = tl.load(do_ptrs, mask=rows[:, None], other=0.0)
            lse = tl.load(lse_base + offs_m, mask=rows, other=0.0)
            delta = tl.load(delta_base + offs_m, mask=rows, other=0.0)
        else:
            q = tl.load(q_ptrs)
            do = tl.load(do_ptrs)
            lse = tl.load(lse_base + offs_m)
            delta = tl.load(delta_base + offs_m)
        s_t = mma(k, tl.trans(q), tl.zeros([BLOCK_N, BLOCK_M], tl.float32), DOT_F32)
        p_t = tl.exp2(s_t * qk_scale_log2 - lse[None, :])
        if MASKED:
            visible = offs_m[None, :] < T
            if CAUSAL:
                visible = visible & (offs_m[None, :] >= offs_n[:, None])
            if BOUNDED:
                row_lo = tl.load(bounds_base + 2 * offs_m, mask=offs_m < T, other=0)
                row_hi = tl.load(bounds_base + 2 * offs_m + 1, mask=offs_m < T, other=0)
                visible = visible & (offs_n[:, None] >= row_lo[None, :]) & (offs_n[:, None] < row_hi[None, :])
            p_t = tl.where(visible, p_t, 0.0)
        dv = mma(cast(p_t, do.dtype), do, dv, DOT_F32)
        dp_t = mma(v, tl.trans(do), tl.zeros([BLOCK_N, BLOCK_M], tl.float32), DOT_F32)
        ds_t = p_t * (dp_t - delta[None, :])
        dk = mma(cast(ds_t, q.dtype), q, dk, DOT_F32)
    return dk, dv


@triton.jit
def dkdv_kernel(
    Q,
    K,
    V,
    DO,
    LSE,
    Delta,
    DK,
    DV,
    BOUNDS,
    KEY_ROWS,
    s_qb,
    s_qh,
    s_qt,
    s_qd,
    s_kb,
    s_kh,
    s_kt,
    s_kd,
    s_vb,
    s_vh,
    s_vt,
    s_vd,
    s_gb,
    s_gh,
    s_gt,
    s_gd,
    s_dkb,
    s_dkh,
    s_dkt,
    s_dkd,
    s_dvb,
    s_dvh,
    s_dvt,
    s_dvd,
    H_KV,
    GROUP,
    T,
    qk_scale_log2,
    scale,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
    DOT_F32: tl.constexpr,
    BOUNDED: tl.constexpr,
):
    """dK and dV of BLOCK_N key rows of one K/V head: the sum over the GROUP query heads
    sharing it (h_kv·GROUP … h_kv·GROUP + GROUP − 1), each streaming its query blocks.
    ``BOUNDED``: the query blocks this key block's keys are seen by, as KEY_ROWS gives them
    (first, first unmasked, end of the unmasked, end), each row's run of keys at BOUNDS."""
    pid_n = tl.program_id(0)
    pid_bkv = tl.program_id(1)
    b = (pid_bkv // H_KV).to(tl.int64)
    h_kv = (pid_bkv % H_KV).to(tl.int64)
    first_key = pid_n * BLOCK_N
    offs_n = first_key + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    keys = offs_n[:, None] < T
    k = tl.load(
        K + b * s_kb + h_kv * s_kh + offs_n[:, None] * s_kt + offs_d[None, :] * s_kd, mask=keys, other=0.0
    )
    v = tl.load(
        V + b * s_vb + h_kv * s_vh + offs_n[:, None] * s_vt + offs_d[None, :] * s_vd, mask=keys, other=0.0
    )
    dk = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    # query blocks: [lo, diagonal_end) crossed by the diagonal, then whole ones up to the
    # last whole block of T, then the partial rest; non-causal, the first range is empty
    whole = (T // BLOCK_M) * BLOCK_M
    lo = 0
    unmasked_lo = 0
    stop = T
    if CAUSAL:
        lo = (first_key // BLOCK_M) * BLOCK_M  # the first block with a row i ≥ first_key
        # the first block whose every row sees the whole key block: i ≥ first_key + BLOCK_N − 1
        diagonal_end = (first_key + BLOCK_N + BLOCK_M - 2) // BLOCK_M * BLOCK_M
        unmasked_lo = tl.maximum(lo, tl.minimum(diagonal_end, whole))
    unmasked_hi = tl.maximum(unmasked_lo, whole)
    if BOUNDED:
        lo = tl.load(KEY_ROWS + 4 * pid_n)
        unmasked_lo = tl.load(KEY_ROWS + 4 * pid_n + 1)
        unmasked_hi = tl.load(KEY_ROWS + 4 * pid_n + 2)
        stop = tl.load(KEY_ROWS + 4 * pid_n + 3)
    for g in range(GROUP):  # the query heads sharing this K/V head, in order
        h = h_kv * GROUP + g
        row = (pid_bkv.to(tl.int64) * GROUP + g) * T  # (b, h)'s LSE and D: b·H + h
        # fmt: off
        state = (Q + b * s_qb + h * s_qh, DO + b * s_gb + h * s_gh, LSE + row, Delta + row,
                 s_qt, s_qd, s_gt, s_gd, offs_n, offs_d)
        dk, dv = dkdv_tiles(dk, dv, k, v, *state, lo, unmasked_lo, T, qk_scale_log2, BOUNDS,
                            BLOCK_M, BLOCK_N, True, CAUSAL, DOT_F32, BOUNDED)
        dk, dv = dkdv_tiles(dk, dv, k, v, *state, unmasked_lo, unmasked_hi, T, qk_scale_log2, BOUNDS,
                            BLOCK_M, BLOCK_N, False, CAUSAL, DOT_F32, BOUNDED)
        dk, dv = dkdv_tiles(dk, dv, k, v, *state, unmasked_hi, stop, T, qk_scale_log2, BOUNDS,
                            BLOCK_M, BLOCK_N, True, CAUSAL, DOT_F32, BOUNDED)
        # fmt: on
    dk_ptrs = DK + b * s_dkb + h_kv * s_dkh + offs_n[:, None] * s_dkt + offs_d[None, :] * s_dkd
    dv_ptrs = DV + b * s_dvb + h_kv * s_dvh + offs_n[:, None] * s_dvt + offs_d[None, :] * s_dvd
    tl.store(dk_ptrs, cast(dk * scale, DK.dtype.element_ty), mask=keys)
    tl.store(dv_ptrs, cast(dv, DV.dtype.element_ty), mask=keys)


@triton.jit
def dq_tiles(
    dq,
    q,
    do,
    lse,
    delta,
    k_base,
    v_base,
    s_kt,
    s_kd,
    s_vt,
    s_vd,
    offs_m,
    offs_d,
    lo,
    hi,
    T,
    qk_scale_log2,
    row_lo,
    row_hi,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    MASKED: tl.constexpr,
    CAUSAL: tl.constexpr,
    DOT_F32: tl.constexpr,
    BOUNDED: tl.constexpr,
):
    """Key blocks [lo, hi) into one query block's dQ (unscaled); ``BOUNDED``: row i sees
    keys row_lo[i] ≤ j < row_hi[i]."""
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        k_ptrs = k_base + offs_n[:, None] * s_kt + offs_d[None, :] * s_kd
        v_ptrs = v_base + offs_n[:, None] * s_vt + offs_d[None, :] * s_vd
        if MASKED:
            k = tl.load(k_ptrs, mask=offs_n[:, None] < T, other=0.0)
            v = tl.load(v_ptrs, mask=offs_n[:, None] < T, other=0.0)
        else:
            k = tl.load(k_ptrs)
            v = tl.load(v_ptrs)
        s = mma(q, tl.trans(k), tl.zeros([BLOCK_M, BLOCK_N], tl.float32), DOT_F32)
        p = tl.exp2(s * qk_scale_log2 - lse[:, None])
        if MASKED:
            visible = offs_n[None, :] < T
            if CAUSAL:
                visible = visible & (offs_n[None, :] <= offs_m[:, None])
            if BOUNDED:
                visible = visible & (offs_n[None, :] >= row_lo[:, None]) & (offs_n[None, :] < row_hi[:, None])
            p = tl.where(visible, p, 0.0)
        dp = mma(do, tl.trans(v), tl.zeros([BLOCK_M, BLOCK_N], tl.float32), DOT_F32)
        ds = p * (dp - delta[:, None])
        dq = mma(cast(ds, k.dtype), k, dq, DOT_F32)
    return dq


@triton.jit
def dq_kernel(
    Q,
    K,
    V,
    DO,
    LSE,
    Delta,
    DQ,
    BOUNDS,
    s_qb,
    s_qh,
    s_qt,
    s_qd,
    s_kb,
    s_kh,
    s_kt,
    s_kd,
    s_vb,
    s_vh,
    s_vt,
    s_vd,
    s_gb,
    s_gh,
    s_gt,
    s_gd,
    s_dqb,
    s_dqh,
    s_dqt,
    s_dqd,
    H,
    GROUP,
    T,
    qk_scale_log2,
    scale,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
    DOT_F32: tl.constexpr,
    BOUNDED: tl.constexpr,
):
    """dQ of BLOCK_M query rows of head h, streaming the keys of its K/V head h // GROUP;
    ``BOUNDED``: the key tiles its rows' runs of keys (BOUNDS) reach, as the forward visits them."""
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = (pid_bh // H).to(tl.int64)
    h = (pid_bh % H).to(tl.int64)
    h_kv = h // GROUP  # the K/V head this query head shares, by index
    first_row = pid_m * BLOCK_M
    offs_m = first_row + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    rows = offs_m < T
    q_ptrs = Q + b * s_qb + h * s_qh + offs_m[:, None] * s_qt + offs_d[None, :] * s_qd
    do_ptrs = DO + b * s_gb + h * s_gh + offs_m[:, None] * s_gt + offs_d[None, :] * s_gd
    q = tl.load(q_ptrs, mask=rows[:, None], other=0.0)
    do = tl.load(do_ptrs, mask=rows[:, None], other=0.0)
    lse = tl.load(LSE + pid_bh.to(tl.int64) * T + offs_m, mask=rows, other=0.0)
    delta = tl.load(Delta + pid_bh.to(tl.int64) * T + offs_m, mask=rows, other=0.0)
    dq = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    # key blocks: whole ones (inside T and, causal, wholly at or before every row's
    # diagonal), then the masked rest up to the block's last visible key
    # fmt: off
    state = (q, do, lse, delta, K + b * s_kb + h_kv * s_kh, V + b * s_vb + h_kv * s_vh,
             s_kt, s_kd, s_vt, s_vd, offs_m, offs_d)
    if BOUNDED:  # as the forward: masked tiles on either side of the run every row sees whole
        row_lo = tl.load(BOUNDS + 2 * offs_m, mask=rows, other=0)
        row_hi = tl.load(BOUNDS + 2 * offs_m + 1, mask=rows, other=0)
        first, whole_lo, whole_hi, stop = visited_tiles(row_lo, row_hi, rows, T, BLOCK_N)
        runs = (T, qk_scale_log2, row_lo, row_hi)
        dq = dq_tiles(dq, *state, first, whole_lo, *runs, BLOCK_M, BLOCK_N, True, False, DOT_F32, True)
        dq = dq_tiles(dq, *state, whole_lo, whole_hi, *runs, BLOCK_M, BLOCK_N, False, False, DOT_F32, True)
        dq = dq_tiles(dq, *state, whole_hi, stop, *runs, BLOCK_M, BLOCK_N, True, False, DOT_F32, True)
    else:
        hi = T
        whole = (T // BLOCK_N) * BLOCK_N
        if CAUSAL:
            hi = tl.minimum(T, first_row + BLOCK_M)
            whole = tl.minimum(whole, ((first_row + 1) // BLOCK_N) * BLOCK_N)
        by_index = (T, qk_scale_log2, offs_m, offs_m)  # no runs: offs_m stands in for them
        dq = dq_tiles(dq, *state, 0, whole, *by_index, BLOCK_M, BLOCK_N, False, CAUSAL, DOT_F32, False)
        dq = dq_tiles(dq, *state, whole, hi, *by_index, BLOCK_M, BLOCK_N, True, CAUSAL, DOT_F32, False)
    # fmt: on
    dq_ptrs = DQ + b * s_dqb + h * s_dqh + offs_m[:, None] * s_dqt + offs_d[None, :] * s_dqd
    tl.store(dq_ptrs, cast(dq * scale, DQ.dtype.element_ty), mask=rows[:, None])


def backward_kernel_options(rows: int, columns: int, q: torch.Tensor, causal: bool, bounded: bool) -> dict:
    """Constexprs and launch options of dkdv or dq: warps by the float32 the program keeps
    in registers, rows × columns (see the launches)."""
    return dict(
        HEAD_DIM=q.shape[-1],
        CAUSAL=causal,
        BOUNDED=bounded,
        DOT_F32=dot_in_float32(q.dtype),
        num_warps=warps_for(rows, columns),
        num_stages=BACKWARD_STAGES_DEPTH,
    )


def dkdv_launch(
    q, k, v, do, lse, delta, dk, dv, causal: bool, block_m: int, block_n: int, bounds=None, key_rows=None
) -> Launch:
    """A program per BLOCK_N keys of each (b, K/V head), over the query heads it serves;
    under a mask beyond causal, ``bounds`` (each row's run of keys) and ``key_rows`` (each key
    block's query rows, ``key_block_rows``)."""
    B, H, T, d = q.shape
    Hkv = k.shape[1]
    strides = (*q.stride(), *k.stride(), *v.stride(), *do.stride(), *dk.stride(), *dv.stride())
    runs = (dk, dk) if bounds is None else (bounds, key_rows)  # dK stands in for unused pointers
    return Launch(
        dkdv_kernel,
        (triton.cdiv(T, block_n), B * Hkv),
        (
            q,
            k,
            v,
            do,
            lse,
            delta,
            dk,
            dv,
            *runs,
            *strides,
            Hkv,
            H // Hkv,
            T,
            sm_scale(d) * LOG2E,
            sm_scale(d),
        ),
        # its register tiles: Sᵀ and dPᵀ (BLOCK_N × BLOCK_M), dK and dV (BLOCK_N × d each)
        dict(
            BLOCK_M=block_m,
            BLOCK_N=block_n,
            **backward_kernel_options(block_n, max(block_m, 2 * d), q, causal, bounds is not None),
        ),
    )


def dq_launch(q, k, v, do, lse, delta, dq, causal: bool, block_m: int, block_n: int, bounds=None) -> Launch:
    B, H, T, d = q.shape
    group = H // k.shape[1]
    strides = (*q.stride(), *k.stride(), *v.stride(), *do.stride(), *dq.stride())
    return Launch(
        dq_kernel,
        (triton.cdiv(T, block_m), B * H),
        (q, k, v, do, lse, delta, dq, dq if bounds is None else bounds, *strides, H, group, T)
        + (sm_scale(d) * LOG2E, sm_scale(d)),
        # its register tiles: S and dP (BLOCK_M × BLOCK_N), dQ (BLOCK_M × d)
        dict(
            BLOCK_M=block_m,
            BLOCK_N=block_n,
            **backward_kernel_options(block_m, max(block_n, d), q, causal, bounds is not None),
        ),
    )


def key_block_rows(mask, tokens: int, block_m: int, block_n: int, device) -> torch.Tensor:
    """backward_model.key_block_rows as the int32 (key blocks, 4) tensor dkdv reads."""
    return torch.tensor(model_rows(mask, tokens, block_m, block_n), dtype=torch.int32, device=device)


def lse_tensor(q: torch.Tensor) -> torch.Tensor:
    """An empty float32 (B, H, T) for the rows' log-sum-exp, on q's device."""
    B, H, T, _ = q.shape
    return torch.empty((B, H, T), dtype=torch.float32, device=q.device)


def forward_saving(
    q, k, v, causal: bool, block_m: int, block_n: int, num_warps=None, num_stages=None, mask=None
) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
    """O (as ``triton_flash`` computes it, the same bits) and (O, LSE) for the backward."""
    check_triton_device(q)
    o, lse = torch.empty_like(q), lse_tensor(q)
    bounds = key_runs(mask, q, k)
    causal = causal and bounds is None
    launch = attention_fwd_launch(
        q, k, v, o, causal, block_m, block_n, True, num_warps, num_stages, lse, bounds
    )
    launch.run()
    return o, (o, lse)


def backward_launches(
    do, q, k, v, saved, grads, causal: bool, block_m: int, block_n: int, mask=None, **options
) -> list[Launch]:
    """delta, dkdv, dq on ``grads`` = (dQ, dK, dV); D allocated here. ``options`` (the
    forward's num_warps, num_stages) do not apply: the backward kernels pick their own.
    ``mask`` beyond causal: both kernels visit only the tiles it keeps."""
    o, lse = saved
    dq, dk, dv = grads
    delta = delta_tensor(o)
    bounds = key_runs(mask, q, k)
    key_rows = None if bounds is None else key_block_rows(mask, k.shape[2], block_m, block_n, q.device)
    causal = causal and bounds is None
    return [
        delta_launch(o, do, delta),
        dkdv_launch(q, k, v, do, lse, delta, dk, dv, causal, block_m, block_n, bounds, key_rows),
        dq_launch(q, k, v, do, lse, delta, dq, causal, block_m, block_n, bounds),
    ]


def backward(
    do, q, k, v, saved, causal: bool, block_m: int, block_n: int, **options
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dQ, dK, dV), contiguous, in the inputs' dtype, each shaped as its input."""
    check_triton_device(q)
    check_backward_queries(q, k)
    if do.shape != q.shape or do.dtype != q.dtype:
        raise ValueError(f"dO: {tuple(do.shape)} {do.dtype}, expected O's {tuple(q.shape)} {q.dtype}")
    grads = empty_gradients(q, k, v)
    for launch in backward_launches(do, q, k, v, saved, grads, causal, block_m, block_n, **options):
        launch.run()
    return grads


def planned_backward_launches(q, k, v, *, causal, block_m, block_n, mask=None, **options) -> list[Launch]:
    """One backward's launches on tensors allocated as a call allocates them (O like q, as
    the forward does; dO like q; LSE and the gradients contiguous): nothing runs."""
    saved = (torch.empty_like(q), lse_tensor(q))
    grads = empty_gradients(q, k, v)
    do = torch.empty_like(q)
    return backward_launches(do, q, k, v, saved, grads, causal, block_m, block_n, mask=mask, **options)
