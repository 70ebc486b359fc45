"""``python -m kernels``: the command line (``kernels.cli``), handed to the run's warm worker
when a workflow run has one (``kernels.warm.client``); without one, a measure or validate job
runs in a watched process of its own (``kernels.warm.watched``), any other command here."""

import os
import sys
import threading

from kernels.warm.client import handed_over
from kernels.warm.watched import watched

argv = sys.argv[1:]
status = handed_over(argv)
if status is None:
    status = watched(argv)
if status is None:
    from kernels.cli import main

    status = main()
if any(not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
    # threads a command's code left running (its record says so) do not hold the job open
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status if isinstance(status, int) else 1)
sys.exit(status)
