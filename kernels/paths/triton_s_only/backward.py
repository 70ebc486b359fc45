"""The backward of triton_s_only: S and the rows' statistics kept, P recomputed, dS never stored.

It is "the step between" the materialized backward and the fused one, in what it keeps:

- kept from the forward: S (B, H, T, T, the input dtype — the one T×T tensor), each row's
  max M and sum L (float32), and O (the caller holds it anyway; it gives D = rowsum(dO∘O));
- never stored: P, dP, dS — each exists only in registers, one tile at a time;
- recomputed: P from S (p = exp(s − M)/L, as the forward's ``pv`` does), never S from
  Q·Kᵀ. So K is not read to get dK, and no score product is run again; what is run twice is
  dP = dO·Vᵀ, once in each of the two main kernels.

Three launches: ``delta`` (D, shared with the other backwards), then ``dkdv`` (one program
per BLOCK_N key rows, streaming query blocks: dV += pᵀ·dO, dK += dsᵀ·Q) and ``dq`` (one
program per BLOCK_M query rows, streaming key blocks: dQ += ds·K). S is read twice, once by
each; with ds = c·p∘(dp − D) the scale c = 1/√d is folded into ds.

Grouped heads (k and v with Hkv < H heads): ``dq`` reads query head h's K and V at K/V head
h // (H / Hkv), by index; ``dkdv`` runs a program per key block of each K/V head, streams the
query blocks of every query head sharing it one head after another, and stores its dK and dV
once: the group's sum, taken in registers in a fixed order.

Causal: tiles wholly in the future of their query block are never visited. Inside the
visited ones the −∞ that ``scores`` stored above the diagonal gives p = 0, hence ds = 0,
so no causal comparison is made; masks guard only the T boundary. Each inner loop is one
``@triton.jit`` function called twice, first over the tiles that need no mask, then over
the partial ones (as ``stats_tiles``/``pv_tiles`` in ``kernels.paths.triton_s_only.forward``).
"""

from __future__ import annotations

import torch

from kernels.impl.autograd import check_backward_queries
from kernels.impl.triton.backward_common import delta_launch, delta_tensor, empty_gradients
from kernels.impl.triton.common import (
    bounded_keys,
    cast,
    check_triton_device,
    dot_in_float32,
    key_runs,
    key_tile_rows,
    mma,
    sm_scale,
    warps_for,
)
from kernels.impl.triton.lang import tl, triton
from kernels.impl.triton.launch import Launch
from kernels.paths.triton_s_only.forward import s_only_forward, s_only_tensors, unmasked_end

SAVED = ("S", "M", "L", "O")
BACKWARD_STAGES = ("delta", "dkdv", "dq")  # one kernel each, in launch order


@triton.jit
def unmasked_query_end(first_key, lo, T, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Where the unmasked query blocks of a key block end: blocks [lo, end) lie inside T in
    both directions. A partial key block has none (every tile of it has padding columns)."""
    return tl.where(first_key + BLOCK_N <= T, tl.maximum(lo, (T // BLOCK_M) * BLOCK_M), lo)


@triton.jit
def dkdv_tiles(
    dk,
    dv,
    v,
    s_cols,
    s_sm,
    m_base,
    s_mt,
    l_base,
    s_lt,
    d_base,
    s_dt,
    q_base,
    s_qt,
    s_qd,
    g_base,
    s_gt,
    s_gd,
    offs_n,
    offs_d,
    lo,
    hi,
    T,
    scale,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    MASKED: tl.constexpr,
    DOT_F32: tl.constexpr,
):
    """Query blocks [lo, hi) into one key block's dK and dV; masks only when ``MASKED``."""
    for start_m in range(lo, hi, BLOCK_M):
        offs_m = start_m + tl.arange(0, BLOCK_M)
        rows = offs_m.to(tl.int64)
        s_ptrs = s_cols + rows[:, None] * s_sm
        q_ptrs = q_base + offs_m[:, None] * s_qt + offs_d[None, :] * s_qd
        g_ptrs = g_base + offs_m[:, None] * s_gt + offs_d[None, :] * s_gd
        if MASKED:
            inside = (offs_m[:, None] < T) & (offs_n[None, :] < T)
            s = tl.load(s_ptrs, mask=inside, other=float("-inf"))
            # padding rows: m = 0, l = 1 with −∞ scores give p = 0, never NaN
            m_i = tl.load(m_base + rows * s_mt, mask=offs_m < T, other=0.0)
            l_i = tl.load(l_base + rows * s_lt, mask=offs_m < T, other=1.0)
            delta = tl.load(d_base + rows * s_dt, mask=offs_m < T, other=0.0)
            q = tl.load(q_ptrs, mask=offs_m[:, None] < T, other=0.0)
            do = tl.load(g_ptrs, mask=offs_m[:, None] < T, other=0.0)
        else:
            s = tl.load(s_ptrs)
            m_i = tl.load(m_base + rows * s_mt)
            l_i = tl.load(l_base + rows * s_lt)
            delta = tl.load(d_base + rows * s_dt)
            q = tl.load(q_ptrs)
            do = tl.load(g_ptrs)
        p = tl.exp(s.to(tl.float32) - m_i[:, None]) / l_i[:, None]
        dv = mma(tl.trans(cast(p, do.dtype)), do, dv, DOT_F32)
        dp = mma(do, tl.trans(v), tl.zeros([BLOCK_M, BLOCK_N], tl.float32), DOT_F32)
        ds = scale * p * (dp - delta[:, None])
        dk = mma(tl.trans(cast(ds, q.dtype)), q, dk, DOT_F32)
    return dk, dv


@triton.jit
def dkdv_kernel(
    S,
    M,
    L,
    Q,
    DO,
    V,
    Delta,
    DK,
    DV,
    KEY_ROWS,
    scale,
    s_sb,
    s_sh,
    s_sm,
    s_sn,
    s_mb,
    s_mh,
    s_mt,
    s_lb,
    s_lh,
    s_lt,
    s_qb,
    s_qh,
    s_qt,
    s_qd,
    s_gb,
    s_gh,
    s_gt,
    s_gd,
    s_vb,
    s_vh,
    s_vt,
    s_vd,
    s_db,
    s_dh,
    s_dt,
    s_kb,
    s_kh,
    s_kt,
    s_kd,
    s_ub,
    s_uh,
    s_ut,
    s_ud,
    H_KV,
    GROUP,
    T,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
    DOT_F32: tl.constexpr,
    BOUNDED: tl.constexpr,
):
    """dK and dV of BLOCK_N key rows of one K/V head, streaming the query blocks that see
    them (causal: from the block holding the first of these keys on; ``BOUNDED``: the query
    rows KEY_ROWS gives, the mask's tile map read by key block) of each of the GROUP query
    heads sharing it, summed in registers; S's column tile gives p, never Q·Kᵀ."""
    pid_n = tl.program_id(0)
    pid_bkv = tl.program_id(1)
    b = (pid_bkv // H_KV).to(tl.int64)
    h_kv = (pid_bkv % H_KV).to(tl.int64)
    first_key = pid_n * BLOCK_N
    offs_n = first_key + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    keys = offs_n[:, None] < T
    v_ptrs = V + b * s_vb + h_kv * s_vh + offs_n[:, None] * s_vt + offs_d[None, :] * s_vd
    v = tl.load(v_ptrs, mask=keys, other=0.0)
    dk = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    lo = 0
    hi = T
    if CAUSAL:
        lo = (first_key // BLOCK_M) * BLOCK_M  # earlier query blocks are wholly in the past
    if BOUNDED:  # S holds −∞ where the mask hides a score: no element mask beyond T's
        lo = tl.load(KEY_ROWS + 2 * pid_n)
        hi = tl.load(KEY_ROWS + 2 * pid_n + 1)
    whole = tl.minimum(unmasked_query_end(first_key, lo, T, BLOCK_M, BLOCK_N), hi)
    for g in range(GROUP):  # the query heads sharing this K/V head, in order
        h = h_kv * GROUP + g
        s_cols = S + b * s_sb + h * s_sh + offs_n[None, :].to(tl.int64) * s_sn
        # fmt: off
        state = (v, s_cols, s_sm, M + b * s_mb + h * s_mh, s_mt, L + b * s_lb + h * s_lh, s_lt,
                 Delta + b * s_db + h * s_dh, s_dt, Q + b * s_qb + h * s_qh, s_qt, s_qd,
                 DO + b * s_gb + h * s_gh, s_gt, s_gd, offs_n, offs_d)
        dk, dv = dkdv_tiles(dk, dv, *state, lo, whole, T, scale, BLOCK_M, BLOCK_N, False, DOT_F32)
        dk, dv = dkdv_tiles(dk, dv, *state, whole, hi, T, scale, BLOCK_M, BLOCK_N, True, DOT_F32)
        # fmt: on
    dk_ptrs = DK + b * s_kb + h_kv * s_kh + offs_n[:, None] * s_kt + offs_d[None, :] * s_kd
    dv_ptrs = DV + b * s_ub + h_kv * s_uh + offs_n[:, None] * s_ut + offs_d[None, :] * s_ud
    tl.store(dk_ptrs, cast(dk, DK.dtype.element_ty), mask=keys)
    tl.store(dv_ptrs, cast(dv, DV.dtype.element_ty), mask=keys)


@triton.jit
def dq_tiles(
    dq,
    do,
    m_i,
    l_i,
    delta,
    s_rows,
    s_sn,
    v_base,
    s_vt,
    s_vd,
    k_base,
    s_kt,
    s_kd,
    offs_m,
    offs_d,
    lo,
    hi,
    T,
    scale,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    MASKED: tl.constexpr,
    DOT_F32: tl.constexpr,
):
    """Key blocks [lo, hi) into one query block's dQ; masks only when ``MASKED``."""
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        s_ptrs = s_rows + offs_n[None, :].to(tl.int64) * s_sn
        v_ptrs = v_base + offs_n[:, None] * s_vt + offs_d[None, :] * s_vd
        k_ptrs = k_base + offs_n[:, None] * s_kt + offs_d[None, :] * s_kd
        if MASKED:
            inside = (offs_m[:, None] < T) & (offs_n[None, :] < T)
            s = tl.load(s_ptrs, mask=inside, other=float("-inf"))
            v = tl.load(v_ptrs, mask=offs_n[:, None] < T, other=0.0)
            k = tl.load(k_ptrs, mask=offs_n[:, None] < T, other=0.0)
        else:
            s = tl.load(s_ptrs)
            v = tl.load(v_ptrs)
            k = tl.load(k_ptrs)
        p = tl.exp(s.to(tl.float32) - m_i[:, None]) / l_i[:, None]
        dp = mma(do, tl.trans(v), tl.zeros([BLOCK_M, BLOCK_N], tl.float32), DOT_F32)
        ds = scale * p * (dp - delta[:, None])
        dq = mma(cast(ds, k.dtype), k, dq, DOT_F32)
    return dq


@triton.jit
def dq_kernel(
    S,
    M,
    L,
    DO,
    V,
    Delta,
    K,
    DQ,
    BOUNDS,
    scale,
    s_sb,
    s_sh,
    s_sm,
    s_sn,
    s_mb,
    s_mh,
    s_mt,
    s_lb,
    s_lh,
    s_lt,
    s_gb,
    s_gh,
    s_gt,
    s_gd,
    s_vb,
    s_vh,
    s_vt,
    s_vd,
    s_db,
    s_dh,
    s_dt,
    s_kb,
    s_kh,
    s_kt,
    s_kd,
    s_qb,
    s_qh,
    s_qt,
    s_qd,
    H,
    GROUP,
    T,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
    DOT_F32: tl.constexpr,
    BOUNDED: tl.constexpr,
):
    """dQ of BLOCK_M query rows, streaming S's row tiles up to the diagonal (causal) with
    the rows' M, L, D and dO held in registers, and K and V of K/V head h // GROUP;
    ``BOUNDED``: the tiles its forward's pv visits (the rows' runs of keys in BOUNDS)."""
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = (pid_bh // H).to(tl.int64)
    h = (pid_bh % H).to(tl.int64)
    h_kv = h // GROUP  # the K/V head this query head shares, by index
    first_row = pid_m * BLOCK_M
    offs_m = first_row + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    rows = offs_m.to(tl.int64)
    inside = offs_m < T
    # padding rows get m = 0, l = 1: their scores load as −∞, so their p is 0, never NaN
    m_i = tl.load(M + b * s_mb + h * s_mh + rows * s_mt, mask=inside, other=0.0)
    l_i = tl.load(L + b * s_lb + h * s_lh + rows * s_lt, mask=inside, other=1.0)
    delta = tl.load(Delta + b * s_db + h * s_dh + rows * s_dt, mask=inside, other=0.0)
    g_ptrs = DO + b * s_gb + h * s_gh + offs_m[:, None] * s_gt + offs_d[None, :] * s_gd
    do = tl.load(g_ptrs, mask=inside[:, None], other=0.0)
    s_rows = S + b * s_sb + h * s_sh + rows[:, None] * s_sm
    dq = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    lo = 0
    hi = T
    if CAUSAL:
        hi = tl.minimum(T, first_row + BLOCK_M)
    if BOUNDED:
        lo, hi = bounded_keys(BOUNDS, offs_m, T, T, BLOCK_N)
    whole = tl.maximum(lo, unmasked_end(first_row, hi, T, BLOCK_M, BLOCK_N))
    # fmt: off
    state = (do, m_i, l_i, delta, s_rows, s_sn, V + b * s_vb + h_kv * s_vh, s_vt, s_vd,
             K + b * s_kb + h_kv * s_kh, s_kt, s_kd, offs_m, offs_d)
    dq = dq_tiles(dq, *state, lo, whole, T, scale, BLOCK_M, BLOCK_N, False, DOT_F32)
    dq = dq_tiles(dq, *state, whole, hi, T, scale, BLOCK_M, BLOCK_N, True, DOT_F32)
    # fmt: on
    dq_ptrs = DQ + b * s_qb + h * s_qh + offs_m[:, None] * s_qt + offs_d[None, :] * s_qd
    tl.store(dq_ptrs, cast(dq, DQ.dtype.element_ty), mask=inside[:, None])


def dkdv_launch(
    s, m, l, q, do, v, delta, dk, dv, causal: bool, block_m: int, block_n: int, key_rows=None
) -> Launch:
    """A program per BLOCK_N keys of each (b, K/V head), over the query heads it serves;
    ``key_rows``: each key block's query rows under a mask beyond causal."""
    B, H, T, d = q.shape
    Hkv = v.shape[1]
    tensors = (s, m, l, q, do, v, delta, dk, dv)
    rows = dk if key_rows is None else key_rows  # dK stands in for the pointer a causal launch ignores
    return Launch(
        dkdv_kernel,
        (triton.cdiv(T, block_n), B * Hkv),
        (*tensors, rows, sm_scale(d), *(x for t in tensors for x in t.stride()), Hkv, H // Hkv, T),
        dict(
            HEAD_DIM=d,
            BLOCK_M=block_m,
            BLOCK_N=block_n,
            CAUSAL=causal,
            BOUNDED=key_rows is not None,
            DOT_F32=dot_in_float32(q.dtype),
            # its register tiles: the scores (BLOCK_M × BLOCK_N), dK and dV (BLOCK_N × d)
            num_warps=warps_for(block_n, max(block_m, d)),
        ),
    )


def dq_launch(s, m, l, do, v, delta, k, dq, causal: bool, block_m: int, block_n: int, bounds=None) -> Launch:
    """``bounds``: each query row's run of keys under a mask beyond causal (``key_runs``)."""
    B, H, T, d = dq.shape
    tensors = (s, m, l, do, v, delta, k, dq)
    runs = dq if bounds is None else bounds
    return Launch(
        dq_kernel,
        (triton.cdiv(T, block_m), B * H),
        (*tensors, runs, sm_scale(d), *(x for t in tensors for x in t.stride()), H, H // k.shape[1], T),
        dict(
            HEAD_DIM=d,
            BLOCK_M=block_m,
            BLOCK_N=block_n,
            CAUSAL=causal,
            BOUNDED=bounds is not None,
            DOT_F32=dot_in_float32(k.dtype),
            # its register tiles: the scores (BLOCK_M × BLOCK_N), dO and dQ (BLOCK_M × d)
            num_warps=warps_for(block_m, max(block_n, d)),
        ),
    )


def _no_options(options: dict) -> None:
    if options:
        raise ValueError(f"triton_s_only takes no options, got {', '.join(sorted(options))}")


def forward_saving(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool,
    block_m: int,
    block_n: int,
    mask=None,
    **options,
) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
    """O, and (S, M, L, O): the forward's own three launches, their tensors kept."""
    _no_options(options)
    saved = s_only_forward(q, k, v, causal, block_m, block_n, mask=mask)
    return saved[-1], saved


def backward_launches(
    do, q, k, v, saved, grads, causal, block_m, block_n, mask=None, **options
) -> list[Launch]:
    """delta, dkdv, dq on the caller's (dq, dk, dv); D is allocated here on q's device.
    ``mask`` beyond causal: both kernels visit only the tiles its forward visited."""
    _no_options(options)
    s, m, l, o = saved
    dq, dk, dv = grads
    delta = delta_tensor(o)
    bounds, key_rows = key_runs(mask, q, k), key_tile_rows(mask, q, block_m, block_n)
    causal = causal and bounds is None
    return [
        delta_launch(o, do, delta),
        dkdv_launch(s, m, l, q, do, v, delta, dk, dv, causal, block_m, block_n, key_rows),
        dq_launch(s, m, l, do, v, delta, k, dq, causal, block_m, block_n, bounds),
    ]


def backward(
    do: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    saved: tuple[torch.Tensor, ...],
    causal: bool,
    block_m: int,
    block_n: int,
    **options,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dQ, dK, dV), contiguous in the inputs' dtype, each shaped as its input."""
    check_triton_device(q)
    check_backward_queries(q, k)
    grads = empty_gradients(q, k, v)
    for launch in backward_launches(do, q, k, v, saved, grads, causal, block_m, block_n, **options):
        launch.run()
    return grads


def planned_backward_launches(q, k, v, *, causal, block_m, block_n, **options) -> list[Launch]:
    """One backward's launches on tensors allocated like a call's (meta tensors: the build);
    nothing runs."""
    s, m, l = s_only_tensors(q)
    o = torch.empty_like(q)
    saved = (s, m, l, o)
    grads = empty_gradients(q, k, v)
    return backward_launches(torch.empty_like(q), q, k, v, saved, grads, causal, block_m, block_n, **options)
