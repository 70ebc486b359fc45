"""Fused attention forward in one Triton kernel: S and P live only in registers.

Each program owns BLOCK_M query rows and streams BLOCK_N-wide key tiles. With
``CARRY_STATS`` it keeps each row's running maximum and exponential sum and rescales what it
has accumulated when the maximum grows (online softmax): the result is exact attention.
Without it, each key tile is normalized on its own and used at once: the tile-local
softmax the seed warns about (see ``kernels.triton_tile_softmax``).

The key tiles run in two passes of one inner loop (``attend_tiles``), as in Triton's fused
attention tutorial: first the tiles every row of the block sees whole, with no mask at all,
then the few that need one — those the causal diagonal crosses and the last, partial tile
of a T that is not a multiple of BLOCK_N. Tiles a causal block cannot see are never visited.
``num_warps`` and ``num_stages`` (software pipelining of the loop's loads) are launch
options; the build stage compiles every candidate of ``kernels.spec.FUSED_LAUNCH_CANDIDATES``.

Inference shapes: q holds Tq query rows (Tq ≤ T when causal), k and v Hkv heads. Query head h
reads K/V head h // (H / Hkv) by its base pointer — K and V are never copied per query head,
though each query head's programs still load them. The queries are the sequence's last Tq
positions: causal row i sees key j ≤ i + (T − Tq), so the diagonal and the tiles a block
skips move right by that offset (what ``kernels.models.cost.walk_of`` walks). The grid covers
cdiv(Tq, BLOCK_M) query blocks: none lies wholly past the last query.

Under a mask beyond causal (``BOUNDED``, kernels.masks), each query row's run of keys
[lo, hi) comes as two int32s (``key_runs``). A block visits the key tiles from its first
row's lo to its last row's hi (kernels.masks.tiles.block_map): the tiles every row of the
block sees whole run unmasked, the partial ones on either side take the element mask, and the
tiles outside are never loaded.

With ``STORE_LSE`` (and carried statistics) the kernel also stores each row's log-sum-exp of
its scores, in base-2 units: LSE = log2 Σ_j exp2(c·log2(e)·S_ij) = log2(e)·logsumexp_j(c·S_ij),
float32, in a contiguous (B, H, Tq) tensor. The fused backward (``flash_backward``) rebuilds
P = exp2(c·log2(e)·S − LSE) from it without a second reduction over the keys. Unset, the
kernel has no extra load or store.
"""

from __future__ import annotations

import torch

from kernels.impl.triton.common import (
    LOG2E,
    cast,
    check_triton_device,
    default_stages,
    dot_in_float32,
    key_runs,
    mma,
    sm_scale,
    warps_for,
)
from kernels.impl.triton.lang import tl, triton
from kernels.impl.triton.launch import Launch


@triton.jit
def attend_tiles(
    acc,
    l_i,
    m_i,
    q,
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
    offset,
    qk_scale_log2,
    row_lo,
    row_hi,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    MASKED: tl.constexpr,
    CAUSAL: tl.constexpr,
    CARRY_STATS: tl.constexpr,
    DOT_F32: tl.constexpr,
    BOUNDED: tl.constexpr,
):
    """Key tiles [lo, hi) into the running state; masks only when ``MASKED`` (causal: row
    i sees key j ≤ i + ``offset``; ``BOUNDED``: row i sees keys row_lo[i] ≤ j < row_hi[i])."""
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        k_ptrs = k_base + offs_n[:, None] * s_kt + offs_d[None, :] * s_kd
        v_ptrs = v_base + offs_n[:, None] * s_vt + offs_d[None, :] * s_vd
        if MASKED:  # noqa: SIM108 (a statement per branch: the unmasked load has no mask at all)
            k = tl.load(k_ptrs, mask=offs_n[:, None] < T, other=0.0)
        else:
            k = tl.load(k_ptrs)
        # scores in log2 units: exp2(x·log2 e) = exp(x), with 1/√d folded into the factor
        s = mma(q, tl.trans(k), tl.zeros([BLOCK_M, BLOCK_N], tl.float32), DOT_F32)
        s = s * qk_scale_log2
        if MASKED:
            visible = offs_n[None, :] < T
            if CAUSAL:
                visible = visible & (offs_n[None, :] <= offs_m[:, None] + offset)
            if BOUNDED:
                visible = visible & (offs_n[None, :] >= row_lo[:, None]) & (offs_n[None, :] < row_hi[:, None])
            s = tl.where(visible, s, float("-inf"))
            v = tl.load(v_ptrs, mask=offs_n[:, None] < T, other=0.0)
        else:
            v = tl.load(v_ptrs)
        if CARRY_STATS:
            m_new = tl.maximum(m_i, tl.max(s, axis=1))
            m_use = m_new
            if BOUNDED:  # a row may see none of a tile's keys yet (its run starts further right)
                m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
            alpha = tl.exp2(m_i - m_use)
            p = tl.exp2(s - m_use[:, None])
            l_i = l_i * alpha + tl.sum(p, axis=1)
            acc = mma(cast(p, v.dtype), v, acc * alpha[:, None], DOT_F32)
            m_i = m_new
        else:
            m_tile = tl.max(s, axis=1)
            m_tile = tl.where(m_tile == float("-inf"), 0.0, m_tile)  # row fully masked here
            p = tl.exp2(s - m_tile[:, None])
            l_tile = tl.sum(p, axis=1)
            p = p / tl.where(l_tile == 0.0, 1.0, l_tile)[:, None]
            acc = mma(cast(p, v.dtype), v, acc, DOT_F32)
    return acc, l_i, m_i


@triton.jit
def visited_tiles(row_lo, row_hi, live, T, BLOCK_N: tl.constexpr):
    """(first, whole_lo, whole_hi, stop): the key tiles a block of rows with these runs of keys
    visits (kernels.masks.tiles.block_map), [first, stop), and among them those every live row
    sees whole, [whole_lo, whole_hi) (empty, at ``first``, where there are none)."""
    first = (tl.min(tl.where(live, row_lo, T)) // BLOCK_N) * BLOCK_N
    stop = tl.max(tl.where(live, row_hi, 0))
    full_lo = tl.cdiv(tl.max(tl.where(live, row_lo, 0)), BLOCK_N) * BLOCK_N
    full_hi = (tl.min(tl.where(live, row_hi, T)) // BLOCK_N) * BLOCK_N
    whole_lo = tl.where(full_lo < full_hi, full_lo, first)
    whole_hi = tl.where(full_lo < full_hi, full_hi, first)
    return first, whole_lo, whole_hi, stop


@triton.jit
def attention_fwd_kernel(
    Q,
    K,
    V,
    O,
    LSE,
    BOUNDS,
    qk_scale_log2,
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
    s_ob,
    s_oh,
    s_ot,
    s_od,
    H,
    T,
    Tq,
    GROUP,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
    CARRY_STATS: tl.constexpr,
    DOT_F32: tl.constexpr,
    STORE_LSE: tl.constexpr,
    BOUNDED: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = (pid_bh // H).to(tl.int64)
    h = (pid_bh % H).to(tl.int64)
    first_row = pid_m * BLOCK_M
    offs_m = first_row + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(
        Q + b * s_qb + h * s_qh + offs_m[:, None] * s_qt + offs_d[None, :] * s_qd,
        mask=offs_m[:, None] < Tq,
        other=0.0,
    )
    h_kv = h // GROUP  # the K/V head this query head shares, by index
    k_base = K + b * s_kb + h_kv * s_kh
    v_base = V + b * s_vb + h_kv * s_vh
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    # whole tiles: inside T and, causal, left of the diagonal (moved right by the offset of
    # the queries in the sequence) for every row of the block
    offset = T - Tq
    state = (q, k_base, v_base, s_kt, s_kd, s_vt, s_vd, offs_m, offs_d)
    # fmt: off
    if BOUNDED:
        # each row's run of keys (kernels.masks): the block visits the tiles from its first
        # row's start to its last row's end; those every row sees whole run unmasked, the
        # partial ones on either side with the element mask; the rest are never loaded
        live = offs_m < Tq
        row_lo = tl.load(BOUNDS + 2 * offs_m, mask=live, other=0)
        row_hi = tl.load(BOUNDS + 2 * offs_m + 1, mask=live, other=0)
        first, whole_lo, whole_hi, stop = visited_tiles(row_lo, row_hi, live, T, BLOCK_N)
        runs = (T, offset, qk_scale_log2, row_lo, row_hi)
        acc, l_i, m_i = attend_tiles(acc, l_i, m_i, *state, first, whole_lo, *runs, BLOCK_M, BLOCK_N,
                                     True, False, CARRY_STATS, DOT_F32, True)
        acc, l_i, m_i = attend_tiles(acc, l_i, m_i, *state, whole_lo, whole_hi, *runs, BLOCK_M, BLOCK_N,
                                     False, False, CARRY_STATS, DOT_F32, True)
        acc, l_i, m_i = attend_tiles(acc, l_i, m_i, *state, whole_hi, stop, *runs, BLOCK_M, BLOCK_N,
                                     True, False, CARRY_STATS, DOT_F32, True)
    else:
        hi = T
        whole = (T // BLOCK_N) * BLOCK_N
        if CAUSAL:
            hi = tl.minimum(T, first_row + BLOCK_M + offset)
            whole = tl.minimum(whole, ((first_row + 1 + offset) // BLOCK_N) * BLOCK_N)
        # the two passes, unmasked then masked (one call each, as in Triton's tutorial)
        by_index = (T, offset, qk_scale_log2, offs_m, offs_m)  # no runs: offs_m stands in for them
        acc, l_i, m_i = attend_tiles(acc, l_i, m_i, *state, 0, whole, *by_index, BLOCK_M, BLOCK_N,
                                     False, CAUSAL, CARRY_STATS, DOT_F32, False)
        acc, l_i, m_i = attend_tiles(acc, l_i, m_i, *state, whole, hi, *by_index, BLOCK_M, BLOCK_N,
                                     True, CAUSAL, CARRY_STATS, DOT_F32, False)
    # fmt: on
    if CARRY_STATS:
        if BOUNDED:  # rows past the last query see no key under the bounds: 0/0, never stored
            l_i = tl.where(l_i == 0.0, 1.0, l_i)
        acc = acc / l_i[:, None]
    o_ptrs = O + b * s_ob + h * s_oh + offs_m[:, None] * s_ot + offs_d[None, :] * s_od
    tl.store(o_ptrs, cast(acc, O.dtype.element_ty), mask=offs_m[:, None] < Tq)
    if STORE_LSE:  # base 2, as the scores above: m_i is in log2 units
        tl.store(LSE + pid_bh.to(tl.int64) * Tq + offs_m, m_i + tl.log2(l_i), mask=offs_m < Tq)


def attention_fwd_launch(
    q,
    k,
    v,
    o,
    causal: bool,
    block_m: int,
    block_n: int,
    carry_stats: bool,
    num_warps: int | None = None,
    num_stages: int | None = None,
    lse: torch.Tensor | None = None,
    bounds: torch.Tensor | None = None,
) -> Launch:
    """The launch; ``num_warps`` defaults by register tile size, ``num_stages`` to the
    deepest pipelining that fits the known targets' shared memory (``default_stages``).
    ``lse``: a contiguous float32 (B, H, Tq) for the rows' base-2 log-sum-exp (needs
    ``carry_stats``); None stores none, and O stands in for the pointer the kernel ignores.
    ``bounds``: each query row's run of keys under a mask beyond causal, a contiguous int32
    (Tq, 2) (``key_runs``; ``causal`` is then False); None: causal or full, as ``causal``
    says. Tq and Hkv are q's and k's: q (B, H, Tq, d), k and v (B, Hkv, T, d)."""
    B, H, Tq, d = q.shape
    T, group = k.shape[2], H // k.shape[1]
    if lse is not None and not carry_stats:
        raise ValueError("lse: the log-sum-exp needs carry_stats=True (tile-local sums are not the row's)")
    stages = num_stages or default_stages(block_m, block_n, d, q.element_size())
    pointers = (q, k, v, o, o if lse is None else lse, o if bounds is None else bounds)
    return Launch(
        attention_fwd_kernel,
        (triton.cdiv(Tq, block_m), B * H),
        (*pointers, sm_scale(d) * LOG2E, *q.stride(), *k.stride(), *v.stride(), *o.stride(), H, T, Tq, group),
        dict(
            HEAD_DIM=d,
            BLOCK_M=block_m,
            BLOCK_N=block_n,
            CAUSAL=causal,
            CARRY_STATS=carry_stats,
            DOT_F32=dot_in_float32(q.dtype),
            STORE_LSE=lse is not None,
            BOUNDED=bounds is not None,
            # its register tiles: the scores (BLOCK_M × BLOCK_N) and the output (BLOCK_M × d)
            num_warps=num_warps or warps_for(block_m, max(block_n, d)),
            num_stages=stages,
        ),
    )


def planned_launches(q, k, v, *, causal, block_m, block_n, num_warps=None, num_stages=None, mask=None):
    """One call's launch on an output allocated like the call's (meta tensors: the build);
    under ``mask`` beyond causal, the block-sparse variant reading each row's run of keys."""
    o, bounds = torch.empty_like(q), key_runs(mask, q, k)
    options = dict(num_warps=num_warps, num_stages=num_stages, bounds=bounds)
    return [attention_fwd_launch(q, k, v, o, causal, block_m, block_n, True, **options)]


def triton_flash(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool,
    block_m: int,
    block_n: int,
    *,
    out: torch.Tensor | None = None,
    num_warps: int | None = None,
    num_stages: int | None = None,
    mask=None,
) -> torch.Tensor:
    """Exact attention, fused: no S or P in global memory; under ``mask``, block sparse."""
    check_triton_device(q)
    o = torch.empty_like(q) if out is None else out
    bounds = key_runs(mask, q, k)
    causal = causal and bounds is None
    attention_fwd_launch(
        q, k, v, o, causal, block_m, block_n, True, num_warps, num_stages, bounds=bounds
    ).run()
    return o
