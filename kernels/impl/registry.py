"""Every implementation behind one call: argument checks happen here, once, for all."""

from __future__ import annotations

import torch

from kernels.impl.checks import check_block, check_no_grad, check_out, check_qkv
from kernels.impl.reference import reference, torch_naive
from kernels.impl.sdpa import sdpa
from kernels.spec import DEFAULT_BLOCK, IMPLEMENTATIONS, SDPA_IMPLEMENTATIONS, TRITON_IMPLEMENTATIONS

# options each implementation accepts beyond the common arguments
OPTIONS: dict[str, frozenset[str]] = {
    "reference": frozenset(),
    "torch_naive": frozenset(),
    "sdpa": frozenset({"backend"}),
    **{name: frozenset() for name in SDPA_IMPLEMENTATIONS if name != "sdpa"},  # backend by name
    "triton_naive": frozenset({"sp_dtype", "return_intermediates", "max_row_block"}),
    "triton_tile_softmax": frozenset(),
    "triton_flash": frozenset({"num_warps", "num_stages"}),
}


def _triton(impl: str):
    """Import Triton implementations on first use: importing triton fixes the mode."""
    if impl == "triton_naive":
        from kernels.impl.triton.naive import triton_naive as fn
    elif impl == "triton_tile_softmax":
        from kernels.impl.triton.tile_softmax import triton_tile_softmax as fn
    else:
        from kernels.impl.triton.flash import triton_flash as fn
    return fn


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    impl: str,
    causal: bool,
    block_m: int | None = None,
    block_n: int | None = None,
    out: torch.Tensor | None = None,
    **options,
):
    """Scale 1/√d; causal: key j visible to query i iff j ≤ i. ``out`` receives the result
    when given (the validator poisons it first to prove every element is written)."""
    if impl not in IMPLEMENTATIONS:
        raise ValueError(f"impl={impl!r}: allowed values are {', '.join(IMPLEMENTATIONS)}")
    if not isinstance(causal, bool):
        raise ValueError(f"causal={causal!r}: must be True or False")
    unknown = set(options) - OPTIONS[impl]
    if unknown:
        allowed = ", ".join(sorted(OPTIONS[impl])) or "none"
        raise ValueError(
            f"option(s) {', '.join(sorted(unknown))} not accepted by impl={impl!r}; "
            f"allowed options: {allowed}"
        )
    check_qkv(q, k, v)
    check_out(out, q)
    bm = check_block("block_m", block_m, DEFAULT_BLOCK)
    bn = check_block("block_n", block_n, DEFAULT_BLOCK)
    if impl in TRITON_IMPLEMENTATIONS:
        check_no_grad(impl, q, k, v)
        return _triton(impl)(q, k, v, causal, bm, bn, out=out, **options)
    if block_m is not None or block_n is not None:
        raise ValueError(f"block_m/block_n apply to Triton implementations only, not impl={impl!r}")
    if impl == "reference":
        result = reference(q, k, v, causal)
    elif impl == "torch_naive":
        result = torch_naive(q, k, v, causal)
    else:
        forced = SDPA_IMPLEMENTATIONS[impl]
        result = sdpa(q, k, v, causal, **({"backend": forced} if forced else options))
    if out is None:
        return result
    return out.copy_(result)
