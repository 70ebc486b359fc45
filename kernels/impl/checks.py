"""Argument checks shared by every implementation: a bad call raises ValueError naming the
argument and what is allowed, never a silent wrong answer."""

from __future__ import annotations

import torch

from kernels import catalog
from kernels.spec import BLOCK_SIZES, HEAD_DIMS
from kernels.spec import DTYPES as DTYPE_NAMES

DTYPES: dict[str, torch.dtype] = {name: getattr(torch, name) for name in DTYPE_NAMES}


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def parse_dtype(name: str | torch.dtype, field: str = "dtype") -> torch.dtype:
    if isinstance(name, torch.dtype):
        if name in DTYPES.values():
            return name
        name = dtype_name(name)
    if name not in DTYPES:
        raise ValueError(f"{field}={name!r}: allowed dtypes are {', '.join(DTYPES)}")
    return DTYPES[name]


def check_qkv(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False
) -> tuple[int, int, int, int]:
    """Return (B, H, T, d) after checking the three inputs agree and are supported: q is
    (B, H, query_tokens, d), k and v are (B, kv_heads, T, d) with kv_heads dividing H (grouped
    heads) and, where causal (or under any mask but full: each aligns the queries to the end of
    the keys), at most T queries."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 4:
            raise ValueError(f"{name} must have 4 dimensions (B, H, T, d), got shape {tuple(t.shape)}")
        if t.dtype not in DTYPES.values():
            raise ValueError(f"{name}.dtype={dtype_name(t.dtype)}: allowed dtypes are {', '.join(DTYPES)}")
    B, H, Tq, d = q.shape
    if v.shape != k.shape:
        raise ValueError(f"v.shape={tuple(v.shape)} must equal k.shape={tuple(k.shape)}")
    for name, t in (("k", k), ("v", v)):
        Bk, Hk, _, dk = t.shape
        if Bk != B or dk != d or Hk < 1 or H % Hk:
            raise ValueError(
                f"{name}.shape={tuple(t.shape)} must be (B, kv_heads, T, d) with q's B={B} and d={d} "
                f"and kv_heads dividing q's H={H} (q.shape={tuple(q.shape)})"
            )
        if t.dtype != q.dtype:
            raise ValueError(f"{name}.dtype={dtype_name(t.dtype)} must equal q.dtype={dtype_name(q.dtype)}")
        if t.device != q.device:
            raise ValueError(f"{name}.device={t.device} must equal q.device={q.device}")
    T = k.shape[2]
    if min(B, H, Tq, T) < 1:
        raise ValueError(
            f"q.shape={tuple(q.shape)}, k.shape={tuple(k.shape)}: B, H and T must each be at least 1"
        )
    if causal and Tq > T:
        raise ValueError(
            f"causal (or masked) with {Tq} queries (q.shape[2]) against {T} keys (k.shape[2]): at most "
            "as many queries as keys (the queries are the sequence's last positions)"
        )
    if d not in HEAD_DIMS:
        raise ValueError(f"head dim d={d} (q.shape[-1]): allowed values are {HEAD_DIMS}")
    return B, H, T, d


def check_block(name: str, value: int | None, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value not in BLOCK_SIZES:
        raise ValueError(f"{name}={value!r}: allowed values are {BLOCK_SIZES} (powers of two)")
    return value


def check_out(out: torch.Tensor | None, q: torch.Tensor) -> None:
    if out is None:
        return
    if out.shape != q.shape or out.dtype != q.dtype or out.device != q.device:
        raise ValueError(
            f"out must match q in shape, dtype and device: got {tuple(out.shape)}, "
            f"{dtype_name(out.dtype)}, {out.device}; expected {tuple(q.shape)}, "
            f"{dtype_name(q.dtype)}, {q.device}"
        )


class UnavailableError(ValueError):
    """A path that cannot run these inputs on this device (a backend, a backward or a compiler
    it lacks here): validation's verdict ``unavailable``, a point's skip, never a failure."""


class NoBackwardError(ValueError):
    """A gradient asked of a path that has none (the message says why, and which have one)."""


def check_gradient(entry: catalog.Implementation, q, k, v, o: torch.Tensor | None = None) -> None:
    """A gradient asked of a path that cannot give one is refused, naming why and which can,
    rather than answered with an output that has no graph. With ``o``: the output of a path
    said to differentiate through PyTorch's autograd must carry the graph."""
    named = (("q", q), ("k", k), ("v", v))
    wanting = ", ".join(f"{name}.requires_grad=True" for name, t in named if t.requires_grad)
    able = ", ".join(catalog.backward_names())
    reason = entry.backward_reason()
    if reason is None and o is not None and o.grad_fn is None:
        reason = "it returned an O without autograd's graph (detached, or computed outside PyTorch)"
    if reason is not None:
        raise NoBackwardError(
            f"{wanting}: impl={entry.name!r} has no backward: {reason}; implementations with one: "
            f"{able} (or call it under torch.no_grad(), or pass detached tensors)"
        )
