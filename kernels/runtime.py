"""The one switch between compiled Triton (CUDA) and Triton's CPU interpreter.

Triton decides at decoration time whether ``@triton.jit`` compiles or interprets, from
``TRITON_INTERPRET``. attnio therefore reads its own switch, ``ATTNIO_INTERPRET``, exactly
once, when this module is first imported, and mirrors it into ``TRITON_INTERPRET`` before
any kernel module imports triton. Every kernel module imports ``kernels.triton_env`` (which
imports this first), so the mode cannot differ between kernels, and there is no silent
fallback: compiled mode refuses CPU tensors, interpreter mode refuses CUDA tensors.
"""

from __future__ import annotations

import os
import sys

SWITCH = "ATTNIO_INTERPRET"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}


def _read_switch() -> bool:
    raw = os.environ.get(SWITCH, "").strip().lower()
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise ValueError(f"{SWITCH}={raw!r}: allowed values are 1/true/yes/on or 0/false/no/off")


def _sync_triton(interpret: bool) -> None:
    wanted = "1" if interpret else "0"
    current = os.environ.get("TRITON_INTERPRET", "0").strip() or "0"
    if "triton" in sys.modules and current != wanted:
        raise RuntimeError(
            f"triton was imported with TRITON_INTERPRET={current} but {SWITCH} asks for "
            f"{wanted}: set {SWITCH} before importing triton or kernels' Triton modules"
        )
    os.environ["TRITON_INTERPRET"] = wanted


INTERPRET: bool = _read_switch()
_sync_triton(INTERPRET)


def set_interpret(flag: bool) -> None:
    """Choose the mode from a program (the CLI) before any Triton module is imported."""
    if "kernels.triton_env" in sys.modules and flag != INTERPRET:
        raise RuntimeError(
            f"the Triton mode is already fixed (interpret={INTERPRET}); "
            f"set {SWITCH} before the first kernel runs"
        )
    os.environ[SWITCH] = "1" if flag else "0"
    globals()["INTERPRET"] = flag
    _sync_triton(flag)


def describe() -> str:
    """A short label for tables and records."""
    return "triton-interpreter" if INTERPRET else "triton-compiled"
