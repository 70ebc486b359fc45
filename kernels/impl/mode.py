"""The one switch between compiled Triton (CUDA) and Triton's CPU interpreter.

Triton decides when a kernel is decorated, that is when its module is imported, whether
``@triton.jit`` compiles or interprets, from ``TRITON_INTERPRET``. attnio fixes the mode once,
just before its first Triton module is imported, in this order:

1. ``ATTNIO_INTERPRET`` when it is set (or ``set_interpret`` called by a program, the CLI);
2. Triton's own ``TRITON_INTERPRET`` when it is set;
3. otherwise the interpreter when torch sees no CUDA GPU, compiled kernels when it does.

The choice is mirrored into ``TRITON_INTERPRET``. There is no silent fallback: compiled mode
refuses CPU tensors, interpreter mode refuses CUDA tensors.
"""

from __future__ import annotations

import os
import sys

SWITCH = "ATTNIO_INTERPRET"
TRITON_SWITCH = "TRITON_INTERPRET"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _read(name: str) -> bool | None:
    """The switch's value, None when unset or empty; a bad value is an error naming it."""
    raw = os.environ.get(name, "").strip().lower()
    if not raw:
        return None
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise ValueError(f"{name}={raw!r}: allowed values are 1/true/yes/on or 0/false/no/off")


_chosen: bool | None = _read(SWITCH)  # read now, so that a bad value fails at import
_read(TRITON_SWITCH)
_fixed: bool | None = None


def _decide() -> bool:
    if _chosen is not None:
        return _chosen
    triton_value = _read(TRITON_SWITCH)
    if triton_value is not None:
        return triton_value
    import torch

    return not torch.cuda.is_available()


def interpret() -> bool:
    """Whether Triton kernels run in the interpreter: decided once, on first use, and mirrored
    into TRITON_INTERPRET."""
    global _fixed
    if _fixed is None:
        decided = _decide()
        imported_with = _read(TRITON_SWITCH) or False
        if "triton" in sys.modules and imported_with != decided:
            raise RuntimeError(
                f"triton was imported with {TRITON_SWITCH}={int(imported_with)}, but attnio's "
                f"mode is interpret={decided}: set {SWITCH} (or {TRITON_SWITCH}) before importing "
                "triton"
            )
        _fixed = decided
        _mirror(decided)
    return _fixed


def for_decoration() -> bool:
    """The mode, fixed, and mirrored into TRITON_INTERPRET again before a plugin's module is
    imported (its kernels are decorated then, reading the variable): a warm worker hands each
    job the job's own environment, which need not carry the mirror."""
    decided = interpret()
    _mirror(decided)
    return decided


def _mirror(interpret: bool) -> None:
    os.environ[TRITON_SWITCH] = "1" if interpret else "0"


def set_interpret(flag: bool) -> None:
    """Choose the mode from a program (the CLI) before any Triton module is imported."""
    global _chosen
    if _fixed is not None and flag != _fixed:
        raise RuntimeError(
            f"the Triton mode is already fixed (interpret={_fixed}); "
            f"set {SWITCH} before the first Triton kernel is imported"
        )
    _chosen = flag
    os.environ[SWITCH] = "1" if flag else "0"
    _mirror(flag)


def describe() -> str:
    """A short label for tables and records."""
    return "triton-interpreter" if interpret() else "triton-compiled"


if _chosen is not None:  # an explicit choice is mirrored at once, before anything imports triton
    _mirror(_chosen)
