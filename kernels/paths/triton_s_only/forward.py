"""Attention that stores S but never P, in three Triton launches: scores → stats → S·V.

1. ``scores``: triton_naive's own kernel: S = Q·Kᵀ/√d in the input dtype into a global
   (B, H, Tq, T) tensor, tiles wholly in the future stored as −∞ without loading Q or K.
2. ``stats``: per block of BLOCK_M query rows, S's tiles streamed once, BLOCK_N columns at a
   time, into each row's maximum m and sum l = Σ exp(s − m) (online, in float32), stored as
   M and L, float32 tensors of shape (B, H, Tq).
3. ``pv``: per query block, S's tiles streamed again, p = exp(s − m)/l computed in
   registers and multiplied into V; only O is stored. P never exists in global memory.

Each jit function is named after its stage (``scores_kernel``, ``stats_kernel``,
``pv_kernel``), since the traffic counter and the cost model key bytes by that name: this
``pv_kernel`` (it reads S, M, L and V) is not triton_naive's (it reads P and V).

The T×T traffic is S written once and read twice, 3·T² elements against triton_naive's 4·T²
(S written and read, P written and read). When causal, stats and pv visit key tiles only up
to the query block's diagonal, like the fused kernel; the −∞ that scores stored above the
diagonal inside those tiles makes the mask, so no causal comparison is needed here.

The key tiles run in two passes of one inner loop, as in Triton's fused-attention tutorial
(and ``kernels.paths.triton_flash.forward``): first the tiles that need no mask at all, then the few
that do — the last, partial column tile of a T that is not a multiple of BLOCK_N, and every
tile of the last, partial query block of a Tq that is not a multiple of BLOCK_M.

Inference shapes (as in ``kernels.paths.triton_naive.forward``): q holds Tq query rows, k and
v Hkv heads; query head h reads V's head h // (H / Hkv) by index, and causal row i sees key
j ≤ i + (T − Tq), so a block's key span ends that much further right. Tq and Hkv come from
the tensors' shapes.
"""

from __future__ import annotations

import torch

from kernels.impl.triton.common import (
    bounded_keys,
    cast,
    check_triton_device,
    dot_in_float32,
    key_runs,
    mma,
    warps_for,
)
from kernels.impl.triton.lang import tl, triton
from kernels.impl.triton.launch import Launch
from kernels.paths.triton_naive.forward import kv_group, scores_launch

TRITON_S_ONLY_STAGES = ("scores", "stats", "pv")  # one kernel each, in launch order


@triton.jit
def unmasked_tiles_end(first_row, hi, Tq, T, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Where the unmasked key tiles of a query block end: tiles [0, end) lie inside the Tq
    rows and the T keys and are visited (start < hi). A partial query block has none."""
    whole = tl.minimum((T // BLOCK_N) * BLOCK_N, ((hi + BLOCK_N - 1) // BLOCK_N) * BLOCK_N)
    return tl.where(first_row + BLOCK_M <= Tq, whole, 0)


@triton.jit
def unmasked_end(first_row, hi, T, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """``unmasked_tiles_end`` of the square problem (as many rows as keys)."""
    return unmasked_tiles_end(first_row, hi, T, T, BLOCK_M, BLOCK_N)


@triton.jit
def stats_tiles(
    m_i,
    l_i,
    s_rows,
    s_sn,
    offs_m,
    lo,
    hi,
    Tq,
    T,
    BLOCK_N: tl.constexpr,
    MASKED: tl.constexpr,
    BOUNDED: tl.constexpr,
):
    """S's key tiles [lo, hi) into the running maximum and sum; masks only when ``MASKED``.
    ``BOUNDED``: a row may have seen no key yet (its run starts further right): −∞ so far."""
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        s_ptrs = s_rows + offs_n[None, :].to(tl.int64) * s_sn
        if MASKED:
            inside = (offs_m[:, None] < Tq) & (offs_n[None, :] < T)
            s = tl.load(s_ptrs, mask=inside, other=float("-inf")).to(tl.float32)
            s = tl.where(offs_m[:, None] < Tq, s, 0.0)  # padding rows: finite, never stored
        else:
            s = tl.load(s_ptrs).to(tl.float32)
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_use = m_new
        if BOUNDED:
            m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
        l_i = l_i * tl.exp(m_i - m_use) + tl.sum(tl.exp(s - m_use[:, None]), axis=1)
        m_i = m_new
    return m_i, l_i


@triton.jit
def stats_kernel(
    S,
    M,
    L,
    BOUNDS,
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
    H,
    Tq,
    T,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
    BOUNDED: tl.constexpr,
):
    """Each row's max m and sum l = Σ exp(s − m) over its stored scores, for BLOCK_M of the
    Tq rows, streaming BLOCK_N-wide tiles of S (causal: up to the block's diagonal tile,
    T − Tq to the right of the square problem's; ``BOUNDED``: the tiles of the block's runs
    of keys, read from BOUNDS, ``bounded_keys``)."""
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = (pid_bh // H).to(tl.int64)
    h = (pid_bh % H).to(tl.int64)
    first_row = pid_m * BLOCK_M
    offs_m = first_row + tl.arange(0, BLOCK_M)
    s_rows = S + b * s_sb + h * s_sh + offs_m[:, None].to(tl.int64) * s_sm
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    if BOUNDED:  # the tiles of the block's runs of keys (S holds −∞ where they are hidden)
        lo, hi = bounded_keys(BOUNDS, offs_m, Tq, T, BLOCK_N)
        whole = tl.maximum(lo, unmasked_tiles_end(first_row, hi, Tq, T, BLOCK_M, BLOCK_N))
        m_i, l_i = stats_tiles(m_i, l_i, s_rows, s_sn, offs_m, lo, whole, Tq, T, BLOCK_N, False, True)
        m_i, l_i = stats_tiles(m_i, l_i, s_rows, s_sn, offs_m, whole, hi, Tq, T, BLOCK_N, True, True)
    else:
        hi = T
        if CAUSAL:
            hi = tl.minimum(T, first_row + BLOCK_M + T - Tq)
        whole = unmasked_tiles_end(first_row, hi, Tq, T, BLOCK_M, BLOCK_N)
        m_i, l_i = stats_tiles(m_i, l_i, s_rows, s_sn, offs_m, 0, whole, Tq, T, BLOCK_N, False, False)
        m_i, l_i = stats_tiles(m_i, l_i, s_rows, s_sn, offs_m, whole, hi, Tq, T, BLOCK_N, True, False)
    rows = offs_m.to(tl.int64)
    tl.store(M + b * s_mb + h * s_mh + rows * s_mt, m_i, mask=offs_m < Tq)
    tl.store(L + b * s_lb + h * s_lh + rows * s_lt, l_i, mask=offs_m < Tq)


@triton.jit
def pv_tiles(
    acc,
    m_i,
    l_i,
    s_rows,
    s_sn,
    v_base,
    s_vt,
    s_vd,
    offs_m,
    offs_d,
    lo,
    hi,
    Tq,
    T,
    BLOCK_N: tl.constexpr,
    MASKED: tl.constexpr,
    DOT_F32: tl.constexpr,
):
    """acc += softmax(S)·V over key tiles [lo, hi), P made in registers; masks only when ``MASKED``."""
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        s_ptrs = s_rows + offs_n[None, :].to(tl.int64) * s_sn
        v_ptrs = v_base + offs_n[:, None].to(tl.int64) * s_vt + offs_d[None, :] * s_vd
        if MASKED:
            inside = (offs_m[:, None] < Tq) & (offs_n[None, :] < T)
            s = tl.load(s_ptrs, mask=inside, other=float("-inf"))
            v = tl.load(v_ptrs, mask=offs_n[:, None] < T, other=0.0)
        else:
            s = tl.load(s_ptrs)
            v = tl.load(v_ptrs)
        p = tl.exp(s.to(tl.float32) - m_i[:, None]) / l_i[:, None]
        acc = mma(cast(p, v.dtype), v, acc, DOT_F32)
    return acc


@triton.jit
def pv_kernel(
    S,
    M,
    L,
    V,
    O,
    BOUNDS,
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
    """O = softmax(S)·V for BLOCK_M query rows (V's head h // GROUP), streaming S's tiles a
    second time with the rows' m and l: p = exp(s − m)/l lives only in registers (the tiles
    ``bounded_keys`` gives under a mask, as stats visits them).

    p is rounded to V's dtype before the product, as triton_naive rounds the P it stores to
    the input dtype: the two then differ only in where P lives (registers here, global
    memory there), not in their arithmetic, and the product runs on V's dtype (tensor cores
    at 2-byte rates on a GPU), as triton_naive's does. Keeping p in float32 would make
    2-byte inputs' product a float32 one (V widened), slower and no longer the twin's. The
    rounding costs about 2⁻¹¹ relative in float16, within the project's bound (torch_naive
    rounds P the same way); float32 inputs keep p in float32.
    """
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = (pid_bh // H).to(tl.int64)
    h = (pid_bh % H).to(tl.int64)
    first_row = pid_m * BLOCK_M
    offs_m = first_row + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    rows = offs_m.to(tl.int64)
    # padding rows get m = 0, l = 1: their scores load as −∞, so their p is 0, never NaN
    m_i = tl.load(M + b * s_mb + h * s_mh + rows * s_mt, mask=offs_m < Tq, other=0.0)
    l_i = tl.load(L + b * s_lb + h * s_lh + rows * s_lt, mask=offs_m < Tq, other=1.0)
    s_rows = S + b * s_sb + h * s_sh + rows[:, None] * s_sm
    v_base = V + b * s_vb + (h // GROUP) * s_vh
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    # fmt: off
    state = (m_i, l_i, s_rows, s_sn, v_base, s_vt, s_vd, offs_m, offs_d)
    if BOUNDED:  # the tiles stats visited
        lo, hi = bounded_keys(BOUNDS, offs_m, Tq, T, BLOCK_N)
        whole = tl.maximum(lo, unmasked_tiles_end(first_row, hi, Tq, T, BLOCK_M, BLOCK_N))
        acc = pv_tiles(acc, *state, lo, whole, Tq, T, BLOCK_N, False, DOT_F32)
        acc = pv_tiles(acc, *state, whole, hi, Tq, T, BLOCK_N, True, DOT_F32)
    else:
        hi = T
        if CAUSAL:
            hi = tl.minimum(T, first_row + BLOCK_M + T - Tq)
        whole = unmasked_tiles_end(first_row, hi, Tq, T, BLOCK_M, BLOCK_N)
        acc = pv_tiles(acc, *state, 0, whole, Tq, T, BLOCK_N, False, DOT_F32)
        acc = pv_tiles(acc, *state, whole, hi, Tq, T, BLOCK_N, True, DOT_F32)
    # fmt: on
    o_ptrs = O + b * s_ob + h * s_oh + rows[:, None] * s_ot + offs_d[None, :] * s_od
    tl.store(o_ptrs, cast(acc, O.dtype.element_ty), mask=offs_m[:, None] < Tq)


def stats_launch(s, m, l, causal: bool, block_m: int, block_n: int, bounds=None) -> Launch:
    B, H, Tq, T = s.shape
    options = dict(BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=causal, BOUNDED=bounds is not None)
    return Launch(
        stats_kernel,
        (triton.cdiv(Tq, block_m), B * H),
        (s, m, l, m if bounds is None else bounds, *s.stride(), *m.stride(), *l.stride(), H, Tq, T),
        options | {"num_warps": warps_for(block_m, block_n)},
    )


def pv_launch(s, m, l, v, o, causal: bool, block_m: int, block_n: int, bounds=None) -> Launch:
    B, H, Tq, T = s.shape
    d = v.shape[3]
    strides = (*s.stride(), *m.stride(), *l.stride(), *v.stride(), *o.stride())
    return Launch(
        pv_kernel,
        (triton.cdiv(Tq, block_m), B * H),
        (s, m, l, v, o, o if bounds is None else bounds, *strides, H, Tq, T, kv_group(o, v)),
        dict(
            HEAD_DIM=d,
            BLOCK_M=block_m,
            BLOCK_N=block_n,
            CAUSAL=causal,
            BOUNDED=bounds is not None,
            DOT_F32=dot_in_float32(v.dtype),
            # its register tiles: the scores (BLOCK_M × BLOCK_N) and the output (BLOCK_M × d)
            num_warps=warps_for(block_m, max(block_n, d)),
        ),
    )


def s_only_launches(
    q, k, v, s, m, l, o, causal: bool, block_m: int, block_n: int, bounds=None
) -> list[Launch]:
    """The three launches, in order, given the S, M, L and O tensors they write; ``bounds``:
    each query row's run of keys under a mask beyond causal (``key_runs``)."""
    return [
        scores_launch(q, k, s, causal, block_m, block_n, bounds),
        stats_launch(s, m, l, causal, block_m, block_n, bounds),
        pv_launch(s, m, l, v, o, causal, block_m, block_n, bounds),
    ]


def s_only_tensors(q: torch.Tensor, k: torch.Tensor | None = None):
    """Empty S (input dtype, (B, H, Tq, T)) and the rows' M and L (float32, (B, H, Tq)) for
    q's rows against k's keys (without k: as many keys as q has rows), on q's device."""
    B, H, Tq, _ = q.shape
    T = Tq if k is None else k.shape[2]
    s = torch.empty((B, H, Tq, T), dtype=q.dtype, device=q.device)
    m = torch.empty((B, H, Tq), dtype=torch.float32, device=q.device)
    return s, m, torch.empty_like(m)


def planned_launches(q, k, v, *, causal, block_m, block_n, mask=None):
    """One call's launches on tensors allocated like the call's (meta tensors: the build)."""
    o, bounds = torch.empty_like(q), key_runs(mask, q, k)
    return s_only_launches(q, k, v, *s_only_tensors(q, k), o, causal, block_m, block_n, bounds)


def triton_s_only_stages(q, k, v, causal: bool, block_m: int, block_n: int):
    """The three launches as stages (name, callable) on S, M, L and O allocated here once,
    in launch order; returns the stages and O."""
    check_triton_device(q)
    s, m, l = s_only_tensors(q, k)
    o = torch.empty_like(q)
    launches = s_only_launches(q, k, v, s, m, l, o, causal, block_m, block_n)
    return [(name, launch.run) for name, launch in zip(TRITON_S_ONLY_STAGES, launches, strict=True)], o


def triton_s_only(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool,
    block_m: int,
    block_n: int,
    *,
    out: torch.Tensor | None = None,
    mask=None,
) -> torch.Tensor:
    """Exact attention through a global S and the rows' softmax statistics; P is never stored.
    Under ``mask`` S is still stored whole, the hidden scores as −∞."""
    return s_only_forward(q, k, v, causal, block_m, block_n, out, mask)[-1]


def s_only_forward(q, k, v, causal: bool, block_m: int, block_n: int, out=None, mask=None):
    """(S, M, L, O): the three launches and every tensor they write (the backward keeps them)."""
    check_triton_device(q)
    s, m, l = s_only_tensors(q, k)
    o = torch.empty_like(q) if out is None else out
    bounds = key_runs(mask, q, k)
    causal = causal and bounds is None
    for launch in s_only_launches(q, k, v, s, m, l, o, causal, block_m, block_n, bounds):
        launch.run()
    return s, m, l, o
