"""Fresh random inputs for a case: never zeros, a seed per case, an optional strided layout,
and the large case whose scores overflow a 2-byte S (kernels.spec.INPUTS)."""

from __future__ import annotations

import torch

from kernels.spec import DEFAULT_INPUTS, INPUTS, LARGE_INPUT

LAYOUTS = ("contiguous", "bthd")


def make_qkv(
    batch: int,
    heads: int,
    tokens: int,
    head_dim: int,
    dtype: torch.dtype,
    device: str | torch.device,
    seed: int,
    layout: str = "contiguous",
    inputs: str = DEFAULT_INPUTS,
    query_tokens: int | None = None,
    kv_heads: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Standard-normal q of shape (B, H, query_tokens, d), k and v of (B, kv_heads, T, d)
    (query_tokens and kv_heads default to T and H). ``bthd`` stores them as (B, T, H, d) and
    returns transposed views, the layout a projection followed by a reshape yields.
    ``inputs="large"`` fills q and k with LARGE_INPUT (v stays random)."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout={layout!r}: allowed values are {', '.join(LAYOUTS)}")
    if inputs not in INPUTS:
        raise ValueError(f"inputs={inputs!r}: allowed values are {', '.join(INPUTS)}")
    gen = torch.Generator(device="cpu").manual_seed(seed)
    sizes = [(heads, query_tokens or tokens), (kv_heads or heads, tokens), (kv_heads or heads, tokens)]
    tensors = []
    for index, (h, t) in enumerate(sizes):
        shape = (batch, t, h, head_dim) if layout == "bthd" else (batch, h, t, head_dim)
        x = torch.randn(shape, generator=gen, dtype=torch.float32)
        if inputs == "large" and index < 2:
            x.fill_(LARGE_INPUT)
        x = x.to(dtype=dtype, device=device)
        tensors.append(x.transpose(1, 2) if layout == "bthd" else x)
    return tensors[0], tensors[1], tensors[2]
