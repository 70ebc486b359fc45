"""PyTorch's fused attention, ``scaled_dot_product_attention``, with a selectable backend.

Grouped heads (k and v with fewer heads than q) go to PyTorch's own ``enable_gqa=True``
(torch 2.5+), which indexes the shared head rather than the caller repeating K and V. Causal
with fewer queries than keys needs the mask aligned to the end of the keys; ``is_causal``
aligns it to the start when the lengths differ, so that case goes through PyTorch's
lower-right causal bias (torch.nn.attention.bias.causal_lower_right), which runs the flash
or the efficient kernel where one takes it and otherwise a materialized boolean mask."""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from kernels import masks
from kernels.impl.checks import UnavailableError
from kernels.impl.reference import visible
from kernels.spec import SDPA_BACKENDS

_ENUM_NAMES = {
    "math": "MATH",
    "flash": "FLASH_ATTENTION",
    "efficient": "EFFICIENT_ATTENTION",
    "cudnn": "CUDNN_ATTENTION",
}
BACKENDS = {name: getattr(SDPBackend, _ENUM_NAMES[name]) for name in SDPA_BACKENDS}
# what PyTorch says when a forced backend cannot run these inputs
_NO_KERNEL = ("No available kernel", "No viable backend")


class BackendUnavailableError(UnavailableError):
    """A forced backend that this device, dtype or shape does not have."""


def _why_not(err: RuntimeError, caught: list[warnings.WarningMessage]) -> str:
    """PyTorch's first sentence, and the reasons it warned about (on a GPU it says why each
    backend declined: head dim, dtype, architecture)."""
    reasons = [str(w.message).splitlines()[0] for w in caught if "not used because" in str(w.message)]
    first = str(err).splitlines()[0].split(". ")[0].rstrip(".")
    return "; ".join([first, *reasons])


def shape_options(q: torch.Tensor, k: torch.Tensor, causal: bool, mask: masks.Mask | None = None) -> dict:
    """scaled_dot_product_attention's keywords for this shape: the square problem exactly as
    before (is_causal); grouped heads add enable_gqa; causal with fewer queries than keys
    takes the lower-right causal bias instead of is_causal; a mask beyond causal, the dense
    boolean attn_mask (True: the query sees the key), the one way SDPA takes a mask."""
    Tq, T = q.shape[-2], k.shape[-2]
    found = {"enable_gqa": True} if k.shape[1] != q.shape[1] else {}
    if mask is not None and mask not in (masks.from_causal(True), masks.from_causal(False)):
        return found | {"attn_mask": visible(mask, T, q.device, Tq)}
    if causal and Tq != T:
        # imported here: the module imports triton.language, which must follow the Triton mode
        from torch.nn.attention.bias import causal_lower_right

        return found | {"attn_mask": causal_lower_right(Tq, T)}
    return found | {"is_causal": causal}


def sdpa(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool,
    backend: str | None = None,
    mask: masks.Mask | None = None,
) -> torch.Tensor:
    """``backend=None`` lets PyTorch choose; a named backend is forced, and one the device
    lacks (or that refuses this shape or mask: grouped heads, the causal bias, a dense mask)
    raises BackendUnavailableError rather than falling back to another."""
    options = shape_options(q, k, causal, mask)
    if backend is None:
        return F.scaled_dot_product_attention(q, k, v, **options)
    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r}: allowed values are {', '.join(BACKENDS)} or None")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with sdpa_kernel(BACKENDS[backend]):
                return F.scaled_dot_product_attention(q, k, v, **options)
        except RuntimeError as err:
            if not any(m in str(err) for m in _NO_KERNEL):
                raise
            raise BackendUnavailableError(
                f"PyTorch's {backend} backend (backend={backend!r}) is not available for "
                f"{str(q.dtype).removeprefix('torch.')} on {q.device}{_shape_words(q, k, causal, options)}: "
                f"{_why_not(err, caught)}"
            ) from err


def _shape_words(q: torch.Tensor, k: torch.Tensor, causal: bool, options: dict) -> str:
    """The kind of inference shape or mask a backend refused, in words ('' for the square
    problem); kinds, not sizes, since ``unavailable`` asks with a small input of the point's kind."""
    words = ["a dense boolean mask (attn_mask)"] if isinstance(options.get("attn_mask"), torch.Tensor) else []
    if k.shape[1] != q.shape[1]:
        words.append("grouped K/V heads (enable_gqa)")
    if q.shape[-2] != k.shape[-2]:
        words.append("fewer queries than keys" + (" (the lower-right causal bias)" if causal else ""))
    return f" with {' and '.join(words)}" if words else ""


PROBE_KEYS = 16  # keys of the small call ``unavailable`` makes
PROBE_GROUP = 2  # query heads sharing its one K/V head, where the point groups its heads


def unavailable(
    backend: str,
    dtype: torch.dtype,
    device: str,
    head_dim: int,
    causal: bool,
    query_tokens: int | None = None,
    kv_heads: int | None = None,
    mask: masks.Mask | None = None,
) -> str | None:
    """Why the forced ``backend`` cannot run inputs of this dtype, head dim and shape here, or
    None when it can: a call on a small input of the same kind tells. ``query_tokens`` and
    ``kv_heads`` as a Point holds them (None: the square problem): given, the call has fewer
    queries than keys, or query heads sharing a K/V head. ``mask``: the point's, where it is
    beyond causal (the call then passes a dense mask, whatever the mask keeps of the probe)."""
    group = PROBE_GROUP if kv_heads is not None else 1
    queries = min(query_tokens, PROBE_KEYS - 1) if query_tokens is not None else PROBE_KEYS
    q = torch.randn(1, group, queries, head_dim, device=device).to(dtype)
    kv = torch.randn(1, 1, PROBE_KEYS, head_dim, device=device).to(dtype)
    try:
        sdpa(q, kv, kv, causal, backend, mask if mask is not None and masks.beyond_causal(mask) else None)
    except BackendUnavailableError as err:
        return str(err)
    return None


def point_unavailable(backend: str, point, device: str) -> str | None:
    """``unavailable`` asked for a sweep point (kernels.planning.point.Point)."""
    shape = {"query_tokens": point.query_tokens, "kv_heads": point.kv_heads}
    dtype = getattr(torch, point.dtype)
    return unavailable(backend, dtype, device, point.head_dim, point.causal, **shape, mask=point.mask_kind)
