"""Split-KV attention ("flash-decoding"): the keys cut into chunks, each attended by its own
programs, the chunks' results merged exactly by their log-sum-exps.

Why split: with one query row per head (decode), a kernel with a program per block of query
rows has B·H programs (B·kv_heads once grouped heads are packed), too few to fill a GPU's SMs,
and each streams all T keys alone. Cutting the keys into ``splits`` chunks gives
splits × B·kv_heads × row-block programs that stream the cache in parallel.

``split_kv_partial``: grid (row blocks, B·kv_heads, splits); row blocks first, since with long
prompts they outnumber CUDA's limit on the other two axes (and neighbouring programs then share
one chunk of K and V in L2). A program takes one K/V head and one chunk of keys, and packs
into its BLOCK_M rows the query rows of every query head sharing that K/V head: packed row r is
query r % query_tokens of head kv·group + r // query_tokens. K and V are so read once per K/V
head per row block, not once per query head. Online softmax over the chunk's key tiles (row
maximum and sum carried, exp2 with log2(e)/√d folded into one factor), causal aligned to the
end (query i sees key j ≤ i + T − query_tokens; tiles past a block's deepest query are not
visited). It writes a float32 partial O normalized by its own sum, (B, H, query_tokens, splits,
d), and the partial's log-sum-exp in base 2, LSE = m + log2 l, as its two parts: the row
maximum m (in log2 units, −∞ where the chunk held no key the row sees) and the sum l, each
(B, H, query_tokens, splits). Kept apart because at extreme scores (|S| ~ 1e10, where float32
steps by thousands) m + log2 l rounds back to m, and the merge would weigh every split alike.

``split_kv_merge``: a program per block of O's rows weighs each split's partial by
exp2(LSE_s − max_s m_s) = l_s · exp2(m_s − max_s m_s) and writes O in q's dtype: exact
attention.
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
from kernels.models.cost import cdiv, next_power_of_2
from kernels.paths.triton_split_kv.model import FILL, TARGET_SMS, split_plan

MERGE_ROWS = 16  # the most rows of O one merge program writes


@triton.jit
def split_kv_partial_kernel(
    Q,
    K,
    V,
    O_partial,
    M,
    L,
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
    KV_HEADS,
    GROUP,
    QUERIES,
    T,
    CHUNK,
    SPLITS,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
    DOT_F32: tl.constexpr,
    BOUNDED: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_bk = tl.program_id(1).to(tl.int64)
    split = tl.program_id(2)
    b = pid_bk // KV_HEADS
    kv = pid_bk % KV_HEADS
    rows = GROUP * QUERIES
    offs_r = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    live = offs_r < rows
    head = kv * GROUP + offs_r // QUERIES
    position = offs_r % QUERIES + (T - QUERIES)  # each row's own position among the keys
    offs_d = tl.arange(0, HEAD_DIM)
    q_ptrs = Q + b * s_qb + head[:, None] * s_qh + (offs_r % QUERIES)[:, None] * s_qt + offs_d[None, :] * s_qd
    q = tl.load(q_ptrs, mask=live[:, None], other=0.0)
    lo = split * CHUNK
    hi = tl.minimum(T, lo + CHUNK)
    if CAUSAL:  # no tile past the block's deepest query
        hi = tl.minimum(hi, tl.max(tl.where(live, position, -1), axis=0) + 1)
    if BOUNDED:  # the chunk's part of the block's runs of keys (kernels.masks), from a whole tile
        row_lo = tl.load(BOUNDS + 2 * (offs_r % QUERIES), mask=live, other=0)
        row_hi = tl.load(BOUNDS + 2 * (offs_r % QUERIES) + 1, mask=live, other=0)
        first = (tl.min(tl.where(live, row_lo, T), axis=0) - lo) // BLOCK_N * BLOCK_N + lo
        lo = tl.maximum(lo, first)
        hi = tl.minimum(hi, tl.max(tl.where(live, row_hi, 0), axis=0))
    k_base = K + b * s_kb + kv * s_kh
    v_base = V + b * s_vb + kv * s_vh
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        inside = offs_n < T
        k = tl.load(k_base + offs_n[:, None] * s_kt + offs_d[None, :] * s_kd, mask=inside[:, None], other=0.0)
        s = mma(q, tl.trans(k), tl.zeros([BLOCK_M, BLOCK_N], tl.float32), DOT_F32) * qk_scale_log2
        visible = inside[None, :]
        if CAUSAL:
            visible = visible & (offs_n[None, :] <= position[:, None])
        if BOUNDED:
            visible = visible & (offs_n[None, :] >= row_lo[:, None]) & (offs_n[None, :] < row_hi[:, None])
        s = tl.where(visible, s, float("-inf"))
        v = tl.load(v_base + offs_n[:, None] * s_vt + offs_d[None, :] * s_vd, mask=inside[:, None], other=0.0)
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row that has seen no key yet
        alpha = tl.exp2(m_i - m_safe)
        p = tl.exp2(s - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = mma(cast(p, v.dtype), v, acc * alpha[:, None], DOT_F32)
        m_i = m_new
    acc = acc / tl.where(l_i > 0.0, l_i, 1.0)[:, None]
    slot = (pid_bk * rows + offs_r) * SPLITS + split  # (b, head, query, split), contiguous
    tl.store(O_partial + slot[:, None] * HEAD_DIM + offs_d[None, :], acc, mask=live[:, None])
    tl.store(M + slot, m_i, mask=live)  # −∞ (and a sum of 0) where the chunk held no visible key
    tl.store(L + slot, l_i, mask=live)


@triton.jit
def split_kv_merge_kernel(
    O_partial,
    M,
    L,
    O,
    s_ob,
    s_oh,
    s_ot,
    s_od,
    HEADS,
    QUERIES,
    ROWS,
    SPLITS,
    HEAD_DIM: tl.constexpr,
    BLOCK_R: tl.constexpr,
):
    offs_g = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    live = offs_g < ROWS
    offs_d = tl.arange(0, HEAD_DIM)
    m = tl.full([BLOCK_R], float("-inf"), tl.float32)
    weight = tl.zeros([BLOCK_R], tl.float32)
    acc = tl.zeros([BLOCK_R, HEAD_DIM], tl.float32)
    for split in range(0, SPLITS):  # the splits' maxima carried as the partial kernel's are
        slot = offs_g * SPLITS + split
        m_s = tl.load(M + slot, mask=live, other=float("-inf"))
        l_s = tl.load(L + slot, mask=live, other=0.0)
        o = tl.load(O_partial + slot[:, None] * HEAD_DIM + offs_d[None, :], mask=live[:, None], other=0.0)
        m_new = tl.maximum(m, m_s)
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp2(m - m_safe)
        w = l_s * tl.exp2(m_s - m_safe)  # exp2(LSE_s − max), the LSE's two parts apart
        acc = acc * alpha[:, None] + w[:, None] * o
        weight = weight * alpha + w
        m = m_new
    acc = acc / tl.where(weight > 0.0, weight, 1.0)[:, None]
    b = offs_g // (HEADS * QUERIES)
    h = offs_g // QUERIES % HEADS
    i = offs_g % QUERIES
    o_ptrs = O + b[:, None] * s_ob + h[:, None] * s_oh + i[:, None] * s_ot + offs_d[None, :] * s_od
    tl.store(o_ptrs, cast(acc, O.dtype.element_ty), mask=live[:, None])


def merge_rows(rows: int) -> int:
    """Rows of O per merge program: enough programs for FILL per SM, at most MERGE_ROWS."""
    return min(MERGE_ROWS, next_power_of_2(cdiv(rows, FILL * TARGET_SMS)))


def partials(q: torch.Tensor, splits: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The float32 partial O (B, H, query_tokens, splits, d) and its row maxima and sums
    (B, H, query_tokens, splits), contiguous, on q's device."""
    B, H, Tq, d = q.shape
    o_partial = torch.empty((B, H, Tq, splits, d), dtype=torch.float32, device=q.device)
    m, l = (torch.empty((B, H, Tq, splits), dtype=torch.float32, device=q.device) for _ in range(2))
    return o_partial, m, l


def split_kv_launches(
    q, k, v, o, causal: bool, block_m: int, block_n: int, num_splits: int | None = None, bounds=None
) -> list[Launch]:
    """The partial and merge launches of one call writing ``o``; ``bounds``: each query's run
    of keys under a mask beyond causal (``key_runs``): a chunk the runs miss loads nothing."""
    B, H, Tq, d = q.shape
    kv_heads, T = k.shape[1], k.shape[2]
    group = H // kv_heads
    splits, chunk = split_plan(B * kv_heads, group * Tq, T, block_m, block_n, num_splits)
    o_partial, m, l = partials(q, splits)
    partial = Launch(
        split_kv_partial_kernel,
        (cdiv(group * Tq, block_m), B * kv_heads, splits),
        (q, k, v, o_partial, m, l, m if bounds is None else bounds, sm_scale(d) * LOG2E)
        + (*q.stride(), *k.stride(), *v.stride())
        + (kv_heads, group, Tq, T, chunk, splits),
        dict(
            HEAD_DIM=d,
            BLOCK_M=block_m,
            BLOCK_N=block_n,
            CAUSAL=causal,
            DOT_F32=dot_in_float32(q.dtype),
            BOUNDED=bounds is not None,
            num_warps=warps_for(block_m, max(block_n, d)),
            num_stages=default_stages(block_m, block_n, d, q.element_size()),
        ),
    )
    rows = B * H * Tq
    block_r = merge_rows(rows)
    merge = Launch(
        split_kv_merge_kernel,
        (cdiv(rows, block_r),),
        (o_partial, m, l, o, *o.stride(), H, Tq, rows, splits),
        dict(HEAD_DIM=d, BLOCK_R=block_r, num_warps=max(1, min(4, block_r * d // 256))),
    )
    return [partial, merge]


def planned_launches(q, k, v, *, causal, block_m, block_n, num_splits=None, mask=None) -> list[Launch]:
    """One call's launches on an output and partials allocated like the call's (meta
    tensors: the build)."""
    bounds = key_runs(mask, q, k)
    return split_kv_launches(q, k, v, torch.empty_like(q), causal, block_m, block_n, num_splits, bounds)


def triton_split_kv(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool,
    block_m: int,
    block_n: int,
    *,
    out: torch.Tensor | None = None,
    num_splits: int | None = None,
    mask=None,
) -> torch.Tensor:
    """Exact attention, the keys split across programs and merged (see the module's doc);
    under ``mask`` each program reads only its chunk's part of the queries' runs of keys."""
    check_triton_device(q)
    o = torch.empty_like(q) if out is None else out
    bounds = key_runs(mask, q, k)
    causal = causal and bounds is None
    for launch in split_kv_launches(q, k, v, o, causal, block_m, block_n, num_splits, bounds):
        launch.run()
    return o
