# Whether results/index.html, which the run's closing lines point to, is this run's: one an
# earlier run made is named stale, with when (kernels.io.run_summary words it).
import time
from pathlib import Path

import snakemake_internals
import kernels.io.run_summary as run_summary

# When this run read the workflow: an index older than this, which the run's plan was to make
# again, is the last run's.
RUN_STARTED = time.time()


def index_line(newest_record):
    """Where the reports are; or that the index there is an earlier run's: this run was to
    make it again and stopped first (a failed job, Ctrl-C), or a record (the newest written
    at ``newest_record``) is newer than it (a run that left the index out, --until,
    --omit-from). None where there is no index."""
    index = Path(RESULTS, "index.html")
    planned = index.exists() and "index" in snakemake_internals.rules_to_run(workflow)
    return run_summary.index_line(index, newest_record, planned, RUN_STARTED)
