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
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Standard-normal q, k, v of shape (B, H, T, d). ``bthd`` stores them as (B, T, H, d)
    and returns transposed views, the layout a projection followed by a reshape yields.
    ``inputs="large"`` fills q and k with LARGE_INPUT (v stays random)."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout={layout!r}: allowed values are {', '.join(LAYOUTS)}")
    if inputs not in INPUTS:
        raise ValueError(f"inputs={inputs!r}: allowed values are {', '.join(INPUTS)}")
    gen = torch.Generator(device="cpu").manual_seed(seed)
    shape = (batch, tokens, heads, head_dim) if layout == "bthd" else (batch, heads, tokens, head_dim)
    tensors = []
    for index in range(3):
        x = torch.randn(shape, generator=gen, dtype=torch.float32)
        if inputs == "large" and index < 2:
            x.fill_(LARGE_INPUT)
        x = x.to(dtype=dtype, device=device)
        tensors.append(x.transpose(1, 2) if layout == "bthd" else x)
    return tensors[0], tensors[1], tensors[2]
