"""``python -m kernels``: the command line (``kernels.cli``)."""

import sys

from kernels.cli import main

sys.exit(main())
