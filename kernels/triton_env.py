"""Import point for triton: fixes the interpreter switch first (see ``kernels.runtime``)."""

from kernels.runtime import INTERPRET  # noqa: I001  (must precede the triton import)

import triton
import triton.language as tl

__all__ = ["INTERPRET", "triton", "tl"]
