"""Every implementation behind one call: argument checks happen here, once, for all, ours
and plugins' alike (``kernels.catalog`` knows them)."""

from __future__ import annotations

import torch

from kernels import catalog, masks
from kernels.impl.autograd import differentiable, wants_gradient
from kernels.impl.checks import check_block, check_gradient, check_out, check_qkv, dtype_name
from kernels.spec import DEFAULT_BLOCK


def _checked_result(entry: catalog.Implementation, result, q: torch.Tensor) -> torch.Tensor:
    """The answer must be O: a tensor of q's shape, dtype and device (a plugin's is checked
    as ours are)."""
    if (
        isinstance(result, torch.Tensor)
        and result.shape == q.shape
        and result.dtype == q.dtype
        and result.device == q.device
    ):
        return result
    got = (
        f"a tensor of shape {tuple(result.shape)}, {dtype_name(result.dtype)}, on {result.device}"
        if isinstance(result, torch.Tensor)
        else type(result).__name__
    )
    raise ValueError(
        f"impl={entry.name!r} (from {entry.origin}) returned {got}; expected a tensor like q: "
        f"shape {tuple(q.shape)}, {dtype_name(q.dtype)}, on {q.device}"
    )


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    impl: str,
    causal: bool | None = None,
    mask: str | masks.Mask | None = None,
    block_m: int | None = None,
    block_n: int | None = None,
    out: torch.Tensor | None = None,
    **options,
):
    """Scale 1/√d; causal: key j visible to query i iff j ≤ i + T − query_tokens (the queries
    are the sequence's last positions); or ``mask`` instead, any mask kernels.masks knows
    (``"window:256"``, or the Mask itself), aligned to the end likewise; k and v may have fewer
    heads than q, each shared by a group of query heads (kernels.impl.checks.check_qkv).
    ``out`` receives the result when given (the validator poisons it first to prove every
    element is written)."""
    entry = catalog.get(impl)
    mask, causal = _mask_of(causal, mask, k.shape[-2])
    unknown = set(options) - entry.options
    if unknown:
        allowed = ", ".join(sorted(entry.options)) or "none"
        raise ValueError(
            f"option(s) {', '.join(sorted(unknown))} not accepted by impl={impl!r}; "
            f"allowed options: {allowed}"
        )
    check_qkv(q, k, v, mask != masks.from_causal(False))
    refusal = entry.shape_refusal(q.shape[2] != k.shape[2], q.shape[1] != k.shape[1])
    if refusal:
        raise ValueError(f"q.shape={tuple(q.shape)}, k.shape={tuple(k.shape)}: {refusal}")
    refusal = entry.mask_refusal(mask)
    if refusal:
        raise ValueError(refusal)
    if entry.takes_masks:
        options = options | {"mask": mask}
    check_out(out, q)
    bm = check_block("block_m", block_m, DEFAULT_BLOCK)
    bn = check_block("block_n", block_n, DEFAULT_BLOCK)
    if entry.triton:
        options |= {"block_m": bm, "block_n": bn}
    elif block_m is not None or block_n is not None:
        raise ValueError(f"block_m/block_n apply to Triton implementations only, not impl={impl!r}")
    if options.get("return_intermediates"):
        return entry.run(q, k, v, causal=causal, **options)  # (S, P, O), triton_naive's view
    if wants_gradient(q, k, v):
        return _with_gradient(entry, q, k, v, causal, out, options)
    if entry.takes_out:
        return _checked_result(entry, entry.run(q, k, v, causal=causal, out=out, **options), q)
    result = _checked_result(entry, entry.run(q, k, v, causal=causal, **options), q)
    return result if out is None else out.copy_(result)


def _mask_of(causal, mask, tokens: int) -> tuple[masks.Mask, bool]:
    """(the mask, whether it is the causal one) from ``causal=`` or ``mask=``, one of them
    given; ValueError naming the argument and what it takes."""
    if mask is None:
        if not isinstance(causal, bool):
            raise ValueError(f"causal={causal!r}: must be True or False (or give mask=)")
        return masks.from_causal(causal), causal
    if causal is not None:
        raise ValueError(f"causal={causal!r} and mask={mask!r}: give one (mask='causal' is causal=True)")
    chosen = masks.parse(mask) if isinstance(mask, str) else mask
    if not isinstance(chosen, tuple(masks.KINDS.values())):
        raise ValueError(
            f"mask={mask!r}: give a mask as a string ({masks.spellings()}) or a kernels.masks kind"
        )
    refusal = chosen.refusal(tokens)
    if refusal:
        raise ValueError(refusal)
    return chosen, chosen == masks.from_causal(True)


def _with_gradient(entry: catalog.Implementation, q, k, v, causal: bool, out, options: dict):
    """O with a graph: the path's backward module behind one autograd Function, or PyTorch's
    own autograd for a path whose O carries it (checked: an O without a graph is refused)."""
    check_gradient(entry, q, k, v)
    mask = options.pop("mask", None)
    if mask is not None:
        refusal = entry.backward_mask_refusal(mask)
        if refusal:
            raise ValueError(refusal)
    module = entry.backward_module()
    if mask is not None and (module is None or masks.beyond_causal(mask)):  # a module's: causal says it
        options["mask"] = mask
    if module is not None:
        # a PyTorch path's backward module is called with no block shape (None, None)
        bm, bn = options.pop("block_m", None), options.pop("block_n", None)
        o = differentiable(module, q, k, v, causal, bm, bn, options)
    else:
        o = _checked_result(entry, entry.run(q, k, v, causal=causal, **options), q)
        check_gradient(entry, q, k, v, o)
    return o if out is None else out.copy_(o)
