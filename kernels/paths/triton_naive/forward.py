"""Materialized attention in three Triton launches: scores → softmax → P·V.

S and P are real global tensors, written by one kernel and read back by the next: the
traffic the seed's analysis is about. Their dtype defaults to the input dtype (2 bytes for
float16/bfloat16) and can be float32.

Inference shapes: q holds Tq query rows, k and v Hkv heads (Hkv dividing H), so S and P are
(B, H, Tq, T). Query head h reads K/V head h // (H / Hkv) by its base pointer: K and V are
never copied per query head, though each query head's programs still load them. The queries
are the sequence's last Tq positions: causal row i sees key j ≤ i + (T − Tq), so the diagonal
and the tiles a block skips move right by that offset (what ``kernels.models.cost.walk_of``
walks). Tq and Hkv come from the tensors' shapes.
"""

from __future__ import annotations

import torch

from kernels.impl.checks import parse_dtype
from kernels.impl.triton.common import (
    bounded_keys,
    cast,
    check_triton_device,
    dot_in_float32,
    key_runs,
    mma,
    sm_scale,
    unseen_tile,
    warps_for,
)
from kernels.impl.triton.lang import tl, triton
from kernels.impl.triton.launch import Launch
from kernels.spec import MAX_ROW_BLOCK  # rows longer than this take two passes


@triton.jit
def scores_kernel(
    Q,
    K,
    S,
    BOUNDS,
    scale,
    s_qb,
    s_qh,
    s_qt,
    s_qd,
    s_kb,
    s_kh,
    s_kt,
    s_kd,
    s_sb,
    s_sh,
    s_sm,
    s_sn,
    H,
    Tq,
    T,
    GROUP,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
    DOT_F32: tl.constexpr,
    BOUNDED: tl.constexpr,
):
    """One BLOCK_M×BLOCK_N tile of S = Q·Kᵀ/√d (Tq query rows, T keys, K's head h // GROUP),
    causal-masked with −∞ (row i sees key j ≤ i + T − Tq), stored to S. A tile wholly in the
    future stores −∞ without loading Q or K. ``BOUNDED``: row i sees keys BOUNDS[i, 0] ≤ j <
    BOUNDS[i, 1] instead (kernels.masks), a tile none of its rows sees stored as −∞ alike."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    pid_bh = tl.program_id(2)
    b = (pid_bh // H).to(tl.int64)
    h = (pid_bh % H).to(tl.int64)
    offset = T - Tq
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    s_ptrs = (
        S + b * s_sb + h * s_sh + offs_m[:, None].to(tl.int64) * s_sm + offs_n[None, :].to(tl.int64) * s_sn
    )
    in_bounds = (offs_m[:, None] < Tq) & (offs_n[None, :] < T)
    unseen = CAUSAL and pid_n * BLOCK_N > pid_m * BLOCK_M + BLOCK_M - 1 + offset
    if BOUNDED:  # a tile none of its rows sees: its rows' runs end before it or start after it
        row_lo, row_hi, unseen = unseen_tile(BOUNDS, offs_m, pid_n * BLOCK_N, Tq, T, BLOCK_N)
    if unseen:
        hidden = tl.full([BLOCK_M, BLOCK_N], float("-inf"), tl.float32)
        tl.store(s_ptrs, cast(hidden, S.dtype.element_ty), mask=in_bounds)
    else:
        q_ptrs = Q + b * s_qb + h * s_qh + offs_m[:, None] * s_qt + offs_d[None, :] * s_qd
        k_ptrs = K + b * s_kb + (h // GROUP) * s_kh + offs_n[:, None] * s_kt + offs_d[None, :] * s_kd
        q = tl.load(q_ptrs, mask=offs_m[:, None] < Tq, other=0.0)
        k = tl.load(k_ptrs, mask=offs_n[:, None] < T, other=0.0)
        s = mma(q, tl.trans(k), tl.zeros([BLOCK_M, BLOCK_N], tl.float32), DOT_F32) * scale
        if CAUSAL:
            s = tl.where(offs_n[None, :] <= offs_m[:, None] + offset, s, float("-inf"))
        if BOUNDED:
            s = tl.where(
                (offs_n[None, :] >= row_lo[:, None]) & (offs_n[None, :] < row_hi[:, None]), s, float("-inf")
            )
        tl.store(s_ptrs, cast(s, S.dtype.element_ty), mask=in_bounds)


@triton.jit
def softmax_kernel(
    S,
    P,
    s_sb,
    s_sh,
    s_sm,
    s_sn,
    s_pb,
    s_ph,
    s_pm,
    s_pn,
    H,
    Tq,
    T,
    BLOCK_R: tl.constexpr,
    ROW_BLOCK: tl.constexpr,
    SINGLE_PASS: tl.constexpr,
):
    """Row softmax of BLOCK_R of S's Tq rows (T long) into P, in float32 arithmetic. A row
    that fits in ROW_BLOCK is read once; a longer one twice (running max and sum, then
    normalize)."""
    pid_r = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = (pid_bh // H).to(tl.int64)
    h = (pid_bh % H).to(tl.int64)
    rows = (pid_r * BLOCK_R + tl.arange(0, BLOCK_R)).to(tl.int64)
    s_rows = S + b * s_sb + h * s_sh + rows[:, None] * s_sm
    p_rows = P + b * s_pb + h * s_ph + rows[:, None] * s_pm
    cols = tl.arange(0, ROW_BLOCK)[None, :]
    if SINGLE_PASS:
        inside = (rows[:, None] < Tq) & (cols < T)
        s = tl.load(s_rows + cols * s_sn, mask=inside, other=float("-inf")).to(tl.float32)
        s = tl.where(rows[:, None] < Tq, s, 0.0)  # padding rows: finite, never stored
        e = tl.exp(s - tl.max(s, axis=1)[:, None])
        p = e / tl.sum(e, axis=1)[:, None]
        tl.store(p_rows + cols * s_pn, cast(p, P.dtype.element_ty), mask=inside)
    else:
        m = tl.full([BLOCK_R], float("-inf"), tl.float32)
        total = tl.zeros([BLOCK_R], tl.float32)
        for start in range(0, T, ROW_BLOCK):
            inside = (rows[:, None] < Tq) & (start + cols < T)
            s = tl.load(s_rows + (start + cols) * s_sn, mask=inside, other=float("-inf"))
            s = tl.where(rows[:, None] < Tq, s.to(tl.float32), 0.0)
            m_new = tl.maximum(m, tl.max(s, axis=1))
            total = total * tl.exp(m - m_new) + tl.sum(tl.exp(s - m_new[:, None]), axis=1)
            m = m_new
        for start in range(0, T, ROW_BLOCK):
            inside = (rows[:, None] < Tq) & (start + cols < T)
            s = tl.load(s_rows + (start + cols) * s_sn, mask=inside, other=float("-inf"))
            s = tl.where(rows[:, None] < Tq, s.to(tl.float32), 0.0)
            p = tl.exp(s - m[:, None]) / total[:, None]
            tl.store(p_rows + (start + cols) * s_pn, cast(p, P.dtype.element_ty), mask=inside)


@triton.jit
def pv_kernel(
    P,
    V,
    O,
    BOUNDS,
    s_pb,
    s_ph,
    s_pm,
    s_pn,
    s_vb,
    s_vh,
    s_vt,
    s_vd,
    s_ob,
    s_oh,
    s_ot,
    s_od,
    H,
    Tq,
    T,
    GROUP,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
    DOT_F32: tl.constexpr,
    BOUNDED: tl.constexpr,
):
    """O = P·V for BLOCK_M query rows (V's head h // GROUP), streaming key tiles; causal rows
    stop at the diagonal tile, moved right by T − Tq (P is zero beyond it); ``BOUNDED``: the
    tiles from the block's first row's start to its last row's end (kernels.masks)."""
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = (pid_bh // H).to(tl.int64)
    h = (pid_bh % H).to(tl.int64)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    p_base = P + b * s_pb + h * s_ph + offs_m[:, None].to(tl.int64) * s_pm
    v_base = V + b * s_vb + (h // GROUP) * s_vh
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    lo = 0
    hi = T
    if CAUSAL:
        hi = tl.minimum(T, (pid_m + 1) * BLOCK_M + T - Tq)
    if BOUNDED:
        lo, hi = bounded_keys(BOUNDS, offs_m, Tq, T, BLOCK_N)
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        p = tl.load(
            p_base + offs_n[None, :].to(tl.int64) * s_pn,
            mask=(offs_m[:, None] < Tq) & (offs_n[None, :] < T),
            other=0.0,
        )
        v = tl.load(
            v_base + offs_n[:, None] * s_vt + offs_d[None, :] * s_vd, mask=offs_n[:, None] < T, other=0.0
        )
        acc = mma(p, v, acc, DOT_F32)
    o_ptrs = O + b * s_ob + h * s_oh + offs_m[:, None] * s_ot + offs_d[None, :] * s_od
    tl.store(o_ptrs, cast(acc, O.dtype.element_ty), mask=offs_m[:, None] < Tq)


def softmax_row_block(T: int, max_row_block: int = MAX_ROW_BLOCK) -> int:
    return min(triton.next_power_of_2(T), max_row_block)


def kv_group(q: torch.Tensor, k: torch.Tensor) -> int:
    """Query heads per K/V head: query head h reads K/V head h // this (by index, no copy)."""
    H, Hkv = q.shape[1], k.shape[1]
    if H % Hkv:
        raise ValueError(f"k has {Hkv} heads, which must divide q's {H} (q.shape={tuple(q.shape)})")
    return H // Hkv


def scores_launch(q, k, s, causal: bool, block_m: int, block_n: int, bounds=None) -> Launch:
    """``bounds``: each query row's run of keys under a mask beyond causal (``key_runs``)."""
    B, H, Tq, d = q.shape
    T = k.shape[2]
    runs = s if bounds is None else bounds  # S stands in for the pointer a causal launch ignores
    return Launch(
        scores_kernel,
        (triton.cdiv(Tq, block_m), triton.cdiv(T, block_n), B * H),
        (q, k, s, runs, sm_scale(d), *q.stride(), *k.stride(), *s.stride(), H, Tq, T, kv_group(q, k)),
        dict(
            HEAD_DIM=d,
            BLOCK_M=block_m,
            BLOCK_N=block_n,
            CAUSAL=causal,
            BOUNDED=bounds is not None,
            DOT_F32=dot_in_float32(q.dtype),
            num_warps=warps_for(block_m, block_n),
        ),
    )


def softmax_rows_per_program(row_block: int) -> int:
    """Short rows are grouped so that a program handles about 2,048 elements at once."""
    return max(1, min(16, 2048 // row_block))


def softmax_launch(s, p, max_row_block: int = MAX_ROW_BLOCK) -> Launch:
    """By rows of S (B, H, Tq, T): a program per group of rows, each row T long."""
    B, H, Tq, T = s.shape
    row_block = softmax_row_block(T, max_row_block)
    rows = softmax_rows_per_program(row_block)
    num_warps = 4 if row_block <= 2048 else 8 if row_block <= 4096 else 16
    return Launch(
        softmax_kernel,
        (triton.cdiv(Tq, rows), B * H),
        (s, p, *s.stride(), *p.stride(), H, Tq, T),
        dict(BLOCK_R=rows, ROW_BLOCK=row_block, SINGLE_PASS=row_block >= T, num_warps=num_warps),
    )


def pv_launch(p, v, o, causal: bool, block_m: int, block_n: int, bounds=None) -> Launch:
    B, H, Tq, T = p.shape
    d = v.shape[3]
    return Launch(
        pv_kernel,
        (triton.cdiv(Tq, block_m), B * H),
        (
            p,
            v,
            o,
            o if bounds is None else bounds,
            *p.stride(),
            *v.stride(),
            *o.stride(),
            H,
            Tq,
            T,
            kv_group(o, v),
        ),
        dict(
            HEAD_DIM=d,
            BLOCK_M=block_m,
            BLOCK_N=block_n,
            CAUSAL=causal,
            BOUNDED=bounds is not None,
            DOT_F32=dot_in_float32(p.dtype, v.dtype),
            num_warps=warps_for(block_m, block_n),
        ),
    )


def naive_launches(
    q,
    k,
    v,
    s,
    p,
    o,
    causal: bool,
    block_m: int,
    block_n: int,
    max_row_block: int = MAX_ROW_BLOCK,
    bounds=None,
) -> list[Launch]:
    """The three launches, in order, given the S, P and O tensors they write."""
    return [
        scores_launch(q, k, s, causal, block_m, block_n, bounds),
        softmax_launch(s, p, max_row_block),
        pv_launch(p, v, o, causal, block_m, block_n, bounds),
    ]


def sp_tensors(q: torch.Tensor, sp_dtype=None, k: torch.Tensor | None = None):
    """Empty S and P, (B, H, Tq, T), for q's rows against k's keys (without k: as many keys
    as q has rows), on q's device (meta tensors plan a build)."""
    B, H, Tq, _ = q.shape
    T = Tq if k is None else k.shape[2]
    dtype = q.dtype if sp_dtype is None else parse_dtype(sp_dtype, "sp_dtype")
    s = torch.empty((B, H, Tq, T), dtype=dtype, device=q.device)
    return s, torch.empty_like(s)


def planned_launches(
    q, k, v, *, causal, block_m, block_n, sp_dtype=None, max_row_block=MAX_ROW_BLOCK, mask=None
):
    """One call's launches on tensors allocated like the call's (meta tensors: the build)."""
    s, p = sp_tensors(q, sp_dtype, k)
    o, bounds = torch.empty_like(q), key_runs(mask, q, k)
    return naive_launches(q, k, v, s, p, o, causal, block_m, block_n, max_row_block, bounds)


TRITON_NAIVE_STAGES = ("scores", "softmax", "pv")  # one kernel each, in launch order


def triton_naive_stages(
    q, k, v, causal: bool, block_m: int, block_n: int, *, sp_dtype=None, max_row_block: int = MAX_ROW_BLOCK
):
    """The three launches as stages (name, callable) on S, P and O allocated here once, in
    launch order; returns the stages and O."""
    check_triton_device(q)
    s, p = sp_tensors(q, sp_dtype, k)
    o = torch.empty_like(q)
    launches = naive_launches(q, k, v, s, p, o, causal, block_m, block_n, max_row_block)
    return [(name, launch.run) for name, launch in zip(TRITON_NAIVE_STAGES, launches, strict=True)], o


def triton_naive(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool,
    block_m: int,
    block_n: int,
    *,
    sp_dtype: str | torch.dtype | None = None,
    out: torch.Tensor | None = None,
    return_intermediates: bool = False,
    max_row_block: int = MAX_ROW_BLOCK,
    mask=None,
):
    """Three launches through global S and P. With ``return_intermediates`` returns (S, P, O).
    Under ``mask`` S and P are still stored whole, the hidden scores as −∞ and 0."""
    check_triton_device(q)
    s, p = sp_tensors(q, sp_dtype, k)
    o = torch.empty_like(q) if out is None else out
    bounds = key_runs(mask, q, k)
    causal = causal and bounds is None
    for launch in naive_launches(q, k, v, s, p, o, causal, block_m, block_n, max_row_block, bounds):
        launch.run()
    return (s, p, o) if return_intermediates else o
