"""The plugin's tests run on the CPU from a checkout of attnio: the package's own folder goes on
sys.path (it need not be installed) and Triton's mode is the interpreter, set before anything
imports kernels."""

import os
import sys
from pathlib import Path

os.environ.setdefault("ATTNIO_INTERPRET", "1")
PACKAGE_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PACKAGE_ROOT))
