"""FlexAttention run as a user runs it: ``create_block_mask`` from the mask's own runs of keys
(kernels.masks: query position p sees keys lo(p) ≤ j < hi(p)), then ``flex_attention`` under
``torch.compile``, a fused kernel that visits only the key tiles the BlockMask lists and
applies the element mask on the partial ones.

Compiled once per shape and mask: the compiled function stays with the process (a warm worker
keeps it between jobs), each (shape, mask) one of its specializations, each BlockMask built
once. A new shape or mask compiles on its first call, which the harness times apart
(the registration's ``compiles``); Inductor's cache (TORCHINDUCTOR_CACHE_DIR) keeps the
compiled pieces for the next process and the next run.

Uncompiled, flex_attention runs an unfused form that materializes every score: never here.
Where this process cannot compile (Dynamo disabled or unsupported, no C++ compiler for a CPU)
the path refuses, saying why (``unavailable``), and past the specializations it holds Dynamo
raises instead of falling back to that form. A gradient on a CPU is refused with torch's own
reason (FlexAttention has no CPU backward in torch 2.13)."""

from __future__ import annotations

import os
import shutil
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache

import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from kernels import _compat, masks
from kernels.impl.checks import UnavailableError
from kernels.paths.flex.model import BLOCK

SPECIALIZATIONS = 256  # shapes and masks one process compiles before Dynamo refuses another
UNCOMPILED = (
    "FlexAttention uncompiled runs an unfused form that materializes all B·H·query_tokens·T "
    "scores; attnio runs only its compiled kernel"
)


def mask_mod_of(mask: masks.Mask, queries: int, tokens: int):
    """FlexAttention's mask_mod for ``mask``: query row i (at position i + T − queries, the
    sequence's last positions) sees key j where the mask's run holds it."""
    shift = tokens - queries

    def mask_mod(batch, head, query, key):
        lo, hi = mask.bounds(query + shift, tokens)
        return (key >= lo) & (key < hi)

    return mask_mod


@cache
def block_mask_of(mask: masks.Mask, queries: int, tokens: int, device: str):
    """The mask's BlockMask for one (queries, T) on ``device``, built once: the same for every
    batch and head (B and H broadcast), BLOCK × BLOCK tiles. Kept as long as the compiled
    specialization that guards on its mask_mod (never evicted: a rebuilt one would recompile
    outside ``flex``'s compiling settings, where ``_seen`` says nothing compiles)."""
    mod = mask_mod_of(mask, queries, tokens)
    return create_block_mask(mod, None, None, queries, tokens, device=device, BLOCK_SIZE=BLOCK)


@cache
def compiled():
    """flex_attention compiled for static shapes, whole (a graph break would be an error)."""
    return torch.compile(flex_attention, dynamic=False, fullgraph=True)


@cache
def why_not_compiled(device: str) -> str | None:
    """Why this process cannot compile flex_attention for ``device``, or None."""
    if not torch._dynamo.is_dynamo_supported():
        return f"{UNCOMPILED}, and torch.compile is not supported here (Python or platform)"
    if os.environ.get("TORCHDYNAMO_DISABLE", "0") not in ("", "0"):
        return f"{UNCOMPILED}, and torch.compile is disabled here (TORCHDYNAMO_DISABLE is set)"
    compiler = os.environ.get("CXX", "g++")
    if device == "cpu" and shutil.which(compiler) is None:
        return f"{UNCOMPILED}, and Inductor finds no C++ compiler ({compiler}, or CXX) to build it for a CPU"
    return None


@cache
def backward_refusal(device: str) -> str | None:
    """torch's own reason FlexAttention has no backward on ``device``, or None: the eager
    function checks its inputs' device before anything else, so a one-element call asks it."""
    q = torch.ones(1, 1, 1, 16, device=device, requires_grad=True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the eager form's warning: this call is only a question
            flex_attention(q, q, q)
    except NotImplementedError as err:
        return str(err)
    return None


def unavailable(point, device: str) -> str | None:
    """Why ``device`` cannot run the point (kernels.catalog's ``unavailable``), or None."""
    return (backward_refusal(device) if point.backward else None) or why_not_compiled(device)


def flex(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, mask: masks.Mask | None = None
) -> torch.Tensor:
    """Attention under ``mask`` (else causal or full) by compiled FlexAttention."""
    device = q.device.type
    grad = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
    why = (backward_refusal(device) if grad else None) or why_not_compiled(device)
    if why:
        raise UnavailableError(why)
    mask = mask or masks.from_causal(causal)
    block_mask = block_mask_of(mask, q.shape[-2], k.shape[-2], str(q.device))
    run = lambda: compiled()(q, k, v, block_mask=block_mask, enable_gqa=k.shape[1] != q.shape[1])  # noqa: E731
    key = (mask, grad, *((t.shape, t.stride(), t.dtype, t.device) for t in (q, k, v)))
    if key in _seen:
        return run()  # compiled already: Dynamo's guards pass, nothing compiles
    with _compat.compiling(SPECIALIZATIONS), _no_progress_monitor():
        out = run()
    _seen.add(key)
    return out


_seen: set[tuple] = set()  # the (mask, inputs' shapes, strides, dtypes, devices) compiled in this process


@contextmanager
def _no_progress_monitor() -> Iterator[None]:
    """tqdm's monitor thread off while compiling: torch.fx's interpreter makes a (disabled)
    progress bar, whose first one would start a thread that outlives the point."""
    try:
        from tqdm import tqdm
    except ImportError:
        yield
        return
    interval, tqdm.monitor_interval = tqdm.monitor_interval, 0
    try:
        yield
    finally:
        tqdm.monitor_interval = interval
