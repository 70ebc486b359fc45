"""triton_naive's backward, materialized like its forward: dP and dS are real global T×T
tensors, each written by one launch and read back by the next.

The forward keeps only P (``SAVED``); S is dropped. Since O = P·V and dP = dO·Vᵀ, the row
term D = rowsum(dO ∘ O) equals rowsum(P ∘ dP), so with dP stored anyway the backward needs
neither O nor a preprocessing launch. Five launches, in order:

1. ``dp``: dP = dO·Vᵀ tile by tile (a causal tile wholly in the future stores 0, loading
   nothing; inside the diagonal tile the future entries are 0 too);
2. ``ds``: by rows, as the forward's softmax: D = Σ P·dP, then dS = c·P∘(dP − D), in one
   pass where a row fits in the row block, two where it does not;
3. ``dv``: dV = Pᵀ·dO, a program per BLOCK_M key rows reading P's columns through its
   strides (no transposed copy), causal: query rows from the key block's first row on;
4. ``dq``: dQ = dS·K, causal: key tiles up to the diagonal one (dS is 0 beyond it);
5. ``dk``: dK = dSᵀ·Q, streamed as dv.

Grouped heads (k and v with Hkv < H heads, each shared by H / Hkv query heads): ``dp`` and
``dq`` read V and K of query head h at K/V head h // (H / Hkv), by index; ``dv`` and ``dk``
run a program per BLOCK_M key rows of each K/V head and stream, one after another, the P (dS)
and dO (Q) of every query head sharing it into one float32 sum, stored once: dK and dV with
k's and v's shapes, the group's sum in a fixed order.

Under a mask beyond causal (kernels.masks) dp, dq, dv and dk walk the forward's map of tiles:
dp and dq read each row's run of keys as the forward's scores and pv do, dv and dk each key
block's query rows (``key_tile_rows``); ds still reads P and dP whole.

dP and dS are stored in P's dtype, so a float16 dP overflows for a large dO·V exactly as
the forward's float16 S does for a large Q·Kᵀ; float32 accumulation everywhere else.
"""

from __future__ import annotations

import torch

from kernels.impl.autograd import check_backward_queries
from kernels.impl.checks import parse_dtype
from kernels.impl.triton.backward_common import empty_gradients
from kernels.impl.triton.common import (
    bounded_keys,
    cast,
    check_triton_device,
    dot_in_float32,
    key_runs,
    key_tile_rows,
    mma,
    sm_scale,
    unseen_tile,
    warps_for,
)
from kernels.impl.triton.lang import tl, triton
from kernels.impl.triton.launch import Launch
from kernels.paths.triton_naive.forward import (
    softmax_row_block,
    softmax_rows_per_program,
    sp_tensors,
    triton_naive,
)
from kernels.spec import MAX_ROW_BLOCK

SAVED: tuple[str, ...] = ("P",)
TRITON_NAIVE_BACKWARD_STAGES = ("dp", "ds", "dv", "dq", "dk")  # one kernel each, in launch order


@triton.jit
def key_block_queries(KEY_ROWS, pid_k, T, BLOCK_M: tl.constexpr, CAUSAL: tl.constexpr, BOUNDED: tl.constexpr):
    """[lo, hi): the query rows a key block streams: all; causal, from its first key on;
    ``BOUNDED``: the query tiles that see one of its keys (KEY_ROWS, the mask's map)."""
    lo = 0
    hi = T
    if CAUSAL:
        lo = pid_k * BLOCK_M
    if BOUNDED:
        lo = tl.load(KEY_ROWS + 2 * pid_k)
        hi = tl.minimum(tl.load(KEY_ROWS + 2 * pid_k + 1), T)
    return lo, hi


@triton.jit
def dp_kernel(
    DO,
    V,
    DP,
    BOUNDS,
    s_gb,
    s_gh,
    s_gt,
    s_gd,
    s_vb,
    s_vh,
    s_vt,
    s_vd,
    s_pb,
    s_ph,
    s_pm,
    s_pn,
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
    """One BLOCK_M×BLOCK_N tile of dP = dO·Vᵀ (V of K/V head h // GROUP), future entries 0;
    a tile wholly in the future stores its zeros without loading dO or V. ``BOUNDED``: the
    entries outside each row's run of keys (BOUNDS) are 0, as the forward's scores tile."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    pid_bh = tl.program_id(2)
    b = (pid_bh // H).to(tl.int64)
    h = (pid_bh % H).to(tl.int64)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    dp_ptrs = (
        DP + b * s_pb + h * s_ph + offs_m[:, None].to(tl.int64) * s_pm + offs_n[None, :].to(tl.int64) * s_pn
    )
    in_bounds = (offs_m[:, None] < T) & (offs_n[None, :] < T)
    unseen = CAUSAL and pid_n * BLOCK_N > pid_m * BLOCK_M + BLOCK_M - 1
    if BOUNDED:
        row_lo, row_hi, unseen = unseen_tile(BOUNDS, offs_m, pid_n * BLOCK_N, T, T, BLOCK_N)
    if unseen:
        tl.store(dp_ptrs, cast(tl.zeros([BLOCK_M, BLOCK_N], tl.float32), DP.dtype.element_ty), mask=in_bounds)
    else:
        do_ptrs = DO + b * s_gb + h * s_gh + offs_m[:, None] * s_gt + offs_d[None, :] * s_gd
        v_ptrs = V + b * s_vb + (h // GROUP) * s_vh + offs_n[:, None] * s_vt + offs_d[None, :] * s_vd
        do = tl.load(do_ptrs, mask=offs_m[:, None] < T, other=0.0)
        v = tl.load(v_ptrs, mask=offs_n[:, None] < T, other=0.0)
        dp = mma(do, tl.trans(v), tl.zeros([BLOCK_M, BLOCK_N], tl.float32), DOT_F32)
        if CAUSAL:
            dp = tl.where(offs_n[None, :] <= offs_m[:, None], dp, 0.0)
        if BOUNDED:
            dp = tl.where((offs_n[None, :] >= row_lo[:, None]) & (offs_n[None, :] < row_hi[:, None]), dp, 0.0)
        tl.store(dp_ptrs, cast(dp, DP.dtype.element_ty), mask=in_bounds)


@triton.jit
def ds_kernel(
    P,
    DP,
    DS,
    scale,
    s_pb,
    s_ph,
    s_pm,
    s_pn,
    s_gb,
    s_gh,
    s_gm,
    s_gn,
    s_sb,
    s_sh,
    s_sm,
    s_sn,
    H,
    T,
    BLOCK_R: tl.constexpr,
    ROW_BLOCK: tl.constexpr,
    SINGLE_PASS: tl.constexpr,
):
    """dS = c·P∘(dP − D), D = Σ_j P·dP, for BLOCK_R rows in float32 arithmetic. A row that
    fits in ROW_BLOCK is read once; a longer one twice (D first, then dS)."""
    pid_r = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = (pid_bh // H).to(tl.int64)
    h = (pid_bh % H).to(tl.int64)
    rows = (pid_r * BLOCK_R + tl.arange(0, BLOCK_R)).to(tl.int64)
    p_rows = P + b * s_pb + h * s_ph + rows[:, None] * s_pm
    dp_rows = DP + b * s_gb + h * s_gh + rows[:, None] * s_gm
    ds_rows = DS + b * s_sb + h * s_sh + rows[:, None] * s_sm
    cols = tl.arange(0, ROW_BLOCK)[None, :].to(tl.int64)
    if SINGLE_PASS:
        inside = (rows[:, None] < T) & (cols < T)
        p = tl.load(p_rows + cols * s_pn, mask=inside, other=0.0).to(tl.float32)
        dp = tl.load(dp_rows + cols * s_gn, mask=inside, other=0.0).to(tl.float32)
        d = tl.sum(p * dp, axis=1)
        ds = scale * p * (dp - d[:, None])
        tl.store(ds_rows + cols * s_sn, cast(ds, DS.dtype.element_ty), mask=inside)
    else:
        d = tl.zeros([BLOCK_R], tl.float32)
        for start in range(0, T, ROW_BLOCK):
            inside = (rows[:, None] < T) & (start + cols < T)
            p = tl.load(p_rows + (start + cols) * s_pn, mask=inside, other=0.0).to(tl.float32)
            dp = tl.load(dp_rows + (start + cols) * s_gn, mask=inside, other=0.0).to(tl.float32)
            d += tl.sum(p * dp, axis=1)
        for start in range(0, T, ROW_BLOCK):
            inside = (rows[:, None] < T) & (start + cols < T)
            p = tl.load(p_rows + (start + cols) * s_pn, mask=inside, other=0.0).to(tl.float32)
            dp = tl.load(dp_rows + (start + cols) * s_gn, mask=inside, other=0.0).to(tl.float32)
            ds = scale * p * (dp - d[:, None])
            tl.store(ds_rows + (start + cols) * s_sn, cast(ds, DS.dtype.element_ty), mask=inside)


@triton.jit
def streamed_product(
    acc,
    a_base,
    s_a_fixed,
    s_a_stream,
    b_base,
    s_bt,
    s_bd,
    fixed,
    lo,
    hi,
    T,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    DOT_F32: tl.constexpr,
):
    """acc + Σ_t A[fixed, t]·B[t, :] over t from lo to hi in BLOCK_N steps (tiles cut at T),
    in float32. A's element (f, t) lies at a_base + f·s_a_fixed + t·s_a_stream, so swapping
    the two strides reads a T×T tensor transposed in place."""
    offs_d = tl.arange(0, HEAD_DIM)
    a_rows = a_base + fixed[:, None].to(tl.int64) * s_a_fixed
    for start in range(lo, hi, BLOCK_N):
        offs_t = start + tl.arange(0, BLOCK_N)
        a = tl.load(
            a_rows + offs_t[None, :].to(tl.int64) * s_a_stream,
            mask=(fixed[:, None] < T) & (offs_t[None, :] < T),
            other=0.0,
        )
        b_ptrs = b_base + offs_t[:, None] * s_bt + offs_d[None, :] * s_bd
        b = tl.load(b_ptrs, mask=offs_t[:, None] < T, other=0.0)
        acc = mma(a, b, acc, DOT_F32)
    return acc


@triton.jit
def dv_kernel(
    P,
    DO,
    DV,
    KEY_ROWS,
    s_pb,
    s_ph,
    s_pm,
    s_pn,
    s_gb,
    s_gh,
    s_gt,
    s_gd,
    s_vb,
    s_vh,
    s_vt,
    s_vd,
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
    """dV = Σ_h Pᵀ·dO for BLOCK_M key rows of one K/V head, over the GROUP query heads h
    sharing it, streaming each one's query rows; causal: from the key block's first row on
    (P is 0 above the diagonal)."""
    pid_k = tl.program_id(0)
    pid_bkv = tl.program_id(1)
    b = (pid_bkv // H_KV).to(tl.int64)
    h_kv = (pid_bkv % H_KV).to(tl.int64)
    keys = pid_k * BLOCK_M + tl.arange(0, BLOCK_M)
    lo, hi = key_block_queries(KEY_ROWS, pid_k, T, BLOCK_M, CAUSAL, BOUNDED)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    for g in range(GROUP):  # the query heads sharing this K/V head, in order
        h = h_kv * GROUP + g
        # fmt: off
        acc = streamed_product(acc, P + b * s_pb + h * s_ph, s_pn, s_pm, DO + b * s_gb + h * s_gh,
                               s_gt, s_gd, keys, lo, hi, T, HEAD_DIM, BLOCK_M, BLOCK_N, DOT_F32)
        # fmt: on
    offs_d = tl.arange(0, HEAD_DIM)
    dv_ptrs = DV + b * s_vb + h_kv * s_vh + keys[:, None] * s_vt + offs_d[None, :] * s_vd
    tl.store(dv_ptrs, cast(acc, DV.dtype.element_ty), mask=keys[:, None] < T)


@triton.jit
def dq_kernel(
    DS,
    K,
    DQ,
    BOUNDS,
    s_sb,
    s_sh,
    s_sm,
    s_sn,
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
    """dQ = dS·K for BLOCK_M query rows of head h, streaming key tiles of K/V head
    h // GROUP; causal rows stop at the diagonal tile; ``BOUNDED``: the key tiles the
    forward's pv streams (its rows' runs of keys, BOUNDS)."""
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = (pid_bh // H).to(tl.int64)
    h = (pid_bh % H).to(tl.int64)
    queries = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    lo = 0
    hi = T
    if CAUSAL:
        hi = tl.minimum(T, (pid_m + 1) * BLOCK_M)
    if BOUNDED:
        lo, hi = bounded_keys(BOUNDS, queries, T, T, BLOCK_N)
    acc = streamed_product(
        tl.zeros([BLOCK_M, HEAD_DIM], tl.float32),
        DS + b * s_sb + h * s_sh,
        s_sm,
        s_sn,
        K + b * s_kb + (h // GROUP) * s_kh,
        s_kt,
        s_kd,
        queries,
        lo,
        hi,
        T,
        HEAD_DIM,
        BLOCK_M,
        BLOCK_N,
        DOT_F32,
    )
    offs_d = tl.arange(0, HEAD_DIM)
    dq_ptrs = DQ + b * s_qb + h * s_qh + queries[:, None] * s_qt + offs_d[None, :] * s_qd
    tl.store(dq_ptrs, cast(acc, DQ.dtype.element_ty), mask=queries[:, None] < T)


@triton.jit
def dk_kernel(
    DS,
    Q,
    DK,
    KEY_ROWS,
    s_sb,
    s_sh,
    s_sm,
    s_sn,
    s_qb,
    s_qh,
    s_qt,
    s_qd,
    s_kb,
    s_kh,
    s_kt,
    s_kd,
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
    """dK = Σ_h dSᵀ·Q for BLOCK_M key rows of one K/V head, over the GROUP query heads h
    sharing it, streaming each one's query rows; causal: from the key block's first row on
    (dS is 0 above the diagonal)."""
    pid_k = tl.program_id(0)
    pid_bkv = tl.program_id(1)
    b = (pid_bkv // H_KV).to(tl.int64)
    h_kv = (pid_bkv % H_KV).to(tl.int64)
    keys = pid_k * BLOCK_M + tl.arange(0, BLOCK_M)
    lo, hi = key_block_queries(KEY_ROWS, pid_k, T, BLOCK_M, CAUSAL, BOUNDED)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    for g in range(GROUP):  # the query heads sharing this K/V head, in order
        h = h_kv * GROUP + g
        # fmt: off
        acc = streamed_product(acc, DS + b * s_sb + h * s_sh, s_sn, s_sm, Q + b * s_qb + h * s_qh,
                               s_qt, s_qd, keys, lo, hi, T, HEAD_DIM, BLOCK_M, BLOCK_N, DOT_F32)
        # fmt: on
    offs_d = tl.arange(0, HEAD_DIM)
    dk_ptrs = DK + b * s_kb + h_kv * s_kh + keys[:, None] * s_kt + offs_d[None, :] * s_kd
    tl.store(dk_ptrs, cast(acc, DK.dtype.element_ty), mask=keys[:, None] < T)


def _tile_options(
    d: int, block_m: int, block_n: int, causal: bool, bounded: bool, warps: int, *operands
) -> dict:
    return dict(
        HEAD_DIM=d,
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        CAUSAL=causal,
        BOUNDED=bounded,
        DOT_F32=dot_in_float32(*(t.dtype for t in operands)),
        num_warps=warps,
    )


def dp_launch(do, v, dp, causal: bool, block_m: int, block_n: int, bounds=None) -> Launch:
    """``bounds``: each query row's run of keys under a mask beyond causal (``key_runs``)."""
    B, H, T, d = do.shape
    runs = dp if bounds is None else bounds  # dP stands in for the pointer a causal launch ignores
    return Launch(
        dp_kernel,
        (triton.cdiv(T, block_m), triton.cdiv(T, block_n), B * H),
        (do, v, dp, runs, *do.stride(), *v.stride(), *dp.stride(), H, H // v.shape[1], T),
        _tile_options(d, block_m, block_n, causal, bounds is not None, warps_for(block_m, block_n), do, v),
    )


def ds_launch(p, dp, ds, scale: float, max_row_block: int = MAX_ROW_BLOCK) -> Launch:
    """By rows, grouped and split exactly as the forward's softmax launch."""
    B, H, T, _ = p.shape
    row_block = softmax_row_block(T, max_row_block)
    rows = softmax_rows_per_program(row_block)
    num_warps = 4 if row_block <= 2048 else 8 if row_block <= 4096 else 16
    return Launch(
        ds_kernel,
        (triton.cdiv(T, rows), B * H),
        (p, dp, ds, scale, *p.stride(), *dp.stride(), *ds.stride(), H, T),
        dict(BLOCK_R=rows, ROW_BLOCK=row_block, SINGLE_PASS=row_block >= T, num_warps=num_warps),
    )


def streamed_launch(kernel, a, b, out, causal: bool, block_m: int, block_n: int, walk=None) -> Launch:
    """dv, dq or dk: a program per BLOCK_M rows of each head of ``out``, A (T×T, a matrix per
    query head) and B (T×d) streamed. dv and dk have a head per K/V head and sum the group of
    query heads sharing it; dq has a head per query head and reads K by its K/V head.
    ``walk``, under a mask beyond causal: dq's rows' runs of keys, dv's and dk's key blocks'
    query rows."""
    B, H, T, d = out.shape
    group = a.shape[1] // min(b.shape[1], out.shape[1])  # query heads per K/V head
    return Launch(
        kernel,
        (triton.cdiv(T, block_m), B * H),
        (a, b, out, out if walk is None else walk, *a.stride(), *b.stride(), *out.stride(), H, group, T),
        # the float32 accumulator is BLOCK_M × d, the loaded tile of A BLOCK_M × BLOCK_N
        _tile_options(
            d, block_m, block_n, causal, walk is not None, warps_for(block_m, max(block_n, d)), a, b
        ),
    )


def intermediate_tensors(q: torch.Tensor, p: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Empty dP and dS, (B, H, T, T) in P's dtype, on q's device (meta tensors plan a build)."""
    dp = torch.empty(p.shape, dtype=p.dtype, device=q.device)
    return dp, torch.empty_like(dp)


def materialized_launches(
    do, q, k, v, p, dp, ds, grads, causal, block_m, block_n, max_row_block, mask=None
) -> list[Launch]:
    """The five launches, in order, given every tensor they read and write. ``mask`` beyond
    causal: dp, dq, dv and dk visit only the tiles its map keeps (dv and dk stream query
    tiles of BLOCK_N rows for key blocks of BLOCK_M, the map read by key block)."""
    dq, dk, dv = grads
    bounds, key_rows = key_runs(mask, q, k), key_tile_rows(mask, q, block_n, block_m)
    causal = causal and bounds is None
    return [
        dp_launch(do, v, dp, causal, block_m, block_n, bounds),
        ds_launch(p, dp, ds, sm_scale(q.shape[-1]), max_row_block),
        streamed_launch(dv_kernel, p, do, dv, causal, block_m, block_n, key_rows),
        streamed_launch(dq_kernel, ds, k, dq, causal, block_m, block_n, bounds),
        streamed_launch(dk_kernel, ds, q, dk, causal, block_m, block_n, key_rows),
    ]


def _saved_p(q: torch.Tensor, saved: tuple[torch.Tensor, ...], sp_dtype) -> torch.Tensor:
    """P from ``saved``, checked against the sp_dtype the call asks for."""
    (p,) = saved
    asked = q.dtype if sp_dtype is None else parse_dtype(sp_dtype, "sp_dtype")
    if p.dtype != asked:
        raise ValueError(f"saved P is {p.dtype}, but sp_dtype asks for {asked}")
    return p


def forward_saving(
    q,
    k,
    v,
    causal: bool,
    block_m: int,
    block_n: int,
    *,
    sp_dtype=None,
    max_row_block: int = MAX_ROW_BLOCK,
    mask=None,
) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
    """O by the forward's three launches, and P (S is dropped: the backward needs only P)."""
    # fmt: off
    _, p, o = triton_naive(q, k, v, causal, block_m, block_n, sp_dtype=sp_dtype, max_row_block=max_row_block,
                           return_intermediates=True, mask=mask)
    # fmt: on
    return o, (p,)


def backward_launches(
    do,
    q,
    k,
    v,
    saved,
    grads,
    causal: bool,
    block_m: int,
    block_n: int,
    *,
    sp_dtype=None,
    max_row_block: int = MAX_ROW_BLOCK,
    mask=None,
) -> list[Launch]:
    """The backward's five launches in order, on dP and dS allocated here."""
    p = _saved_p(q, saved, sp_dtype)
    dp, ds = intermediate_tensors(q, p)
    return materialized_launches(do, q, k, v, p, dp, ds, grads, causal, block_m, block_n, max_row_block, mask)


def backward(
    do,
    q,
    k,
    v,
    saved,
    causal: bool,
    block_m: int,
    block_n: int,
    *,
    sp_dtype=None,
    max_row_block: int = MAX_ROW_BLOCK,
    return_intermediates: bool = False,
    mask=None,
):
    """(dQ, dK, dV), each shaped as its input; with ``return_intermediates``, (dQ, dK, dV, dP,
    dS)."""
    check_triton_device(q)
    check_backward_queries(q, k)
    p = _saved_p(q, saved, sp_dtype)
    grads = empty_gradients(q, k, v)
    dp, ds = intermediate_tensors(q, p)
    launches = materialized_launches(
        do, q, k, v, p, dp, ds, grads, causal, block_m, block_n, max_row_block, mask
    )
    for launch in launches:
        launch.run()
    return (*grads, dp, ds) if return_intermediates else grads


def planned_backward_launches(
    q, k, v, *, causal, block_m, block_n, sp_dtype=None, max_row_block: int = MAX_ROW_BLOCK, mask=None
) -> list[Launch]:
    """One backward's launches on tensors allocated like the call's (meta tensors: the build);
    nothing runs."""
    _, p = sp_tensors(q, sp_dtype)
    do = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    grads = empty_gradients(q, k, v)
    # fmt: off
    return backward_launches(do, q, k, v, (p,), grads, causal, block_m, block_n, sp_dtype=sp_dtype,
                             max_row_block=max_row_block, mask=mask)
    # fmt: on


KERNELS = ("dp", "ds", "dv", "dq", "dk")  # launch order, the standard backward's five steps


def backward_stages(q, k, v, do, causal: bool, block_m: int, block_n: int, **options):
    """Its backward's kernels as stages on the P its forward saved, in launch order; returns
    them and (dQ, dK, dV), for the stage timing (kernels.measure.backward_run)."""
    check_backward_queries(q, k)
    _, saved = forward_saving(q, k, v, causal, block_m, block_n, **options)
    grads = empty_gradients(q, k, v)
    launches = backward_launches(do, q, k, v, saved, grads, causal, block_m, block_n, **options)
    return [(name, launch.run) for name, launch in zip(KERNELS, launches, strict=True)], grads
