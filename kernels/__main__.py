"""``python -m kernels``: the command line (``kernels.cli``), handed to the run's warm worker
when a workflow run has one (``kernels.warm.client``; without it the command runs here)."""

import sys

from kernels.warm.client import handed_over

status = handed_over(sys.argv[1:])
if status is None:
    from kernels.cli import main

    status = main()
sys.exit(status)
