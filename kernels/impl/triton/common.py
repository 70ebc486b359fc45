"""Pieces every Triton implementation shares: the device check, launch constants and the
matrix-product helper that keeps float32 exact and works around the interpreter."""

from __future__ import annotations

import math

import torch

from kernels import masks
from kernels.impl.mode import SWITCH
from kernels.impl.triton.lang import INTERPRET, tl, triton
from kernels.masks import tiles
from kernels.spec import MAX_GRID_YZ, MAX_SHARED_PER_BLOCK

LOG2E = 1.4426950408889634


def check_triton_device(q: torch.Tensor) -> None:
    """No silent fallback: compiled kernels need CUDA tensors, the interpreter CPU ones.
    B·H is a grid dimension, so it is bounded by CUDA's grid limit on every backend."""
    batch_heads = q.shape[0] * q.shape[1]
    if batch_heads > MAX_GRID_YZ:
        raise ValueError(
            f"B·H={batch_heads} (q.shape[0]·q.shape[1]): the Triton kernels allow at most {MAX_GRID_YZ}"
        )
    if INTERPRET and q.device.type != "cpu":
        raise ValueError(
            f"q.device={q.device}: {SWITCH}=1 runs Triton through its CPU interpreter, "
            "which takes CPU tensors; unset it to compile for the GPU"
        )
    if not INTERPRET and q.device.type != "cuda":
        raise ValueError(
            f"q.device={q.device}: compiled Triton kernels take CUDA tensors; "
            f"set {SWITCH}=1 (or leave it unset on a machine without a GPU) to run them on the "
            "CPU interpreter"
        )


def dot_in_float32(*dtypes: torch.dtype) -> bool:
    """Whether tile products must run on float32 operands.

    float32 inputs: yes, with IEEE precision (the GPU default would be TF32, far less exact
    than the float32 baseline). bfloat16 under the interpreter: yes, because the interpreter
    multiplies bfloat16 bit patterns as integers; widening bfloat16 to float32 is exact, so
    the result is what a float32-accumulating tensor core gives. Operands of two dtypes
    (a float16 P against bfloat16 V, with sp_dtype): yes, since tl.dot takes one dtype.
    """
    if torch.float32 in dtypes or len(set(dtypes)) > 1:
        return True
    return INTERPRET and torch.bfloat16 in dtypes


def sm_scale(head_dim: int) -> float:
    return 1.0 / math.sqrt(head_dim)


def warps_for(rows: int, columns: int) -> int:
    """Warps for a program whose largest float32 tile in registers is rows × columns: 8 from
    128 × 128 on, where 4 warps run out of registers (the fused kernel at d = 128 with
    128-row blocks spills with 4 warps on sm_90, not with 8)."""
    return 8 if rows * columns >= 128 * 128 else 4


# Under the interpreter, float32 → bfloat16 truncates (and mishandles subnormals) instead of
# rounding to nearest even as the GPU does; ``cast`` rounds the bits itself there, so both
# paths store the same bfloat16 values.
_INTERPRETED: tl.constexpr = tl.constexpr(INTERPRET)


@triton.jit
def cast(x, DTYPE: tl.constexpr):
    """x.to(DTYPE), rounding to nearest even on every backend."""
    if _INTERPRETED and tl.bfloat16 == DTYPE:
        bits = x.to(tl.float32).to(tl.uint32, bitcast=True)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
        return bits.to(tl.uint16).to(tl.bfloat16, bitcast=True)
    else:
        return x.to(DTYPE)


@triton.jit
def mma(a, b, acc, DOT_F32: tl.constexpr):
    """acc + a·b with a float32 accumulator (see ``dot_in_float32`` for DOT_F32)."""
    if DOT_F32:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")
    else:
        return tl.dot(a, b, acc)


PIPELINE_DEPTHS = (3, 2, 1)  # num_stages tried for the default launch, deepest first


@triton.jit
def bounded_keys(BOUNDS, offs_m, Tq, T, BLOCK_N: tl.constexpr):
    """[lo, hi): the keys a query block's runs span (kernels.masks), lo at a tile's start:
    from its first row's run start to its last row's run end."""
    live = offs_m < Tq
    row_lo = tl.load(BOUNDS + 2 * offs_m, mask=live, other=0)
    lo = (tl.min(tl.where(live, row_lo, T)) // BLOCK_N) * BLOCK_N
    hi = tl.max(tl.where(live, tl.load(BOUNDS + 2 * offs_m + 1, mask=live, other=0), 0))
    return lo, hi


@triton.jit
def unseen_tile(BOUNDS, offs_m, first_key, Tq, T, BLOCK_N: tl.constexpr):
    """The rows' runs of keys (kernels.masks) and whether none of them reaches the key tile
    starting at first_key: the tile a score (or dP) kernel stores without loading a thing."""
    live = offs_m < Tq
    row_lo = tl.load(BOUNDS + 2 * offs_m, mask=live, other=0)
    row_hi = tl.load(BOUNDS + 2 * offs_m + 1, mask=live, other=0)
    unseen = tl.max(tl.where(live, row_hi, 0)) <= first_key
    unseen = unseen | (tl.min(tl.where(live, row_lo, T)) >= first_key + BLOCK_N)
    return row_lo, row_hi, unseen


def shared_estimate(stages: int, block_m: int, block_n: int, head_dim: int, element_bytes: int) -> int:
    """Shared memory a kernel streaming K and V tiles (the fused forward, the split-KV
    partials) asks for with ``stages`` buffers of them, its Q tile and 1 KiB of scratch: what
    Triton 3.6/3.7 allocate on sm_90 (measured by the build: d = 256, 64 × 64, bf16, 2 stages:
    164,864 B), and at least what they allocate on sm_80/86/89, where one buffer is saved."""
    tile_kv = 2 * block_n * head_dim * element_bytes
    tile_q = block_m * head_dim * element_bytes
    return stages * tile_kv + tile_q + 1024


def default_stages(block_m: int, block_n: int, head_dim: int, element_bytes: int) -> int:
    """The deepest pipelining whose shared memory fits every known target; where none does
    (large tiles at d = 256, float32 at d ≥ 128), the deepest that fits the largest; else 1.
    Triton's own default (3) asks for more than sm_90 allows at d = 256 with 128 × 64 blocks."""
    need = {s: shared_estimate(s, block_m, block_n, head_dim, element_bytes) for s in PIPELINE_DEPTHS}
    for limit in (min(MAX_SHARED_PER_BLOCK.values()), max(MAX_SHARED_PER_BLOCK.values())):
        fitting = [s for s in PIPELINE_DEPTHS if need[s] <= limit]
        if fitting:
            return fitting[0]
    return PIPELINE_DEPTHS[-1]


def key_runs(mask, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor | None:
    """The mask's Triton form: each query row's run of keys [lo, hi) as a contiguous int32
    (Tq, 2) on q's device (8 bytes a row, read once per program); None for causal and full,
    which the kernel masks by index."""
    if mask is None or not masks.beyond_causal(mask):
        return None
    T, Tq = k.shape[2], q.shape[2]
    positions = torch.arange(Tq, device=q.device) + (T - Tq)
    lo, hi = mask.bounds(positions, T)
    return torch.stack([lo, hi], dim=1).to(torch.int32).contiguous()


def key_tile_rows(mask, q: torch.Tensor, block_m: int, block_n: int) -> torch.Tensor | None:
    """The mask's tile map read by key tile (``kernels.masks.tiles.key_tile_rows``): each
    BLOCK_N-key tile's query rows [first, stop) in BLOCK_M-row blocks, as a contiguous int32
    (key tiles, 2) on q's device (8 bytes a program); None for causal and full."""
    if mask is None or not masks.beyond_causal(mask):
        return None
    rows = tiles.key_tile_rows(mask, q.shape[2], block_m, block_n)
    return torch.tensor(rows, dtype=torch.int32, device=q.device).reshape(-1, 2)
