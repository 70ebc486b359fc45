"""The suite runs on CPU: Triton kernels go through the interpreter. The switch must be set
before any kernel module imports triton, so it is set here, first."""

import os

os.environ.setdefault("ATTNIO_INTERPRET", "1")
