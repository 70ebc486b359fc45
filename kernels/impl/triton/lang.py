"""Import point for triton: fixes the interpreter switch first (see ``kernels.impl.mode``)."""

from kernels.impl import mode

INTERPRET: bool = mode.interpret()  # must precede the first @triton.jit of attnio

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

if INTERPRET:
    from kernels.impl.triton import quicker_interpreter

    quicker_interpreter.install()

__all__ = ["INTERPRET", "tl", "triton"]
