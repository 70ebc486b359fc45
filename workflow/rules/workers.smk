# One warm worker per lane for the jobs' commands (kernels.warm): started by the first job
# that needs it, ended with the run (the Snakefile's onstart, onsuccess and onerror); a
# cluster's jobs run on other hosts and start their own processes.
from snakemake.logging import logger

import kernels.warm.session as attnio_warm
import kernels.warm.stop as attnio_stop
import snakemake_internals

WARM_RUN = {}


def start_workers():
    """The run's worker folder (results/logs/worker/run-<pid>-<start>), named to every job;
    where it cannot be made, every job runs in its own process. A SIGTERM to the run ends
    its running jobs too (kernels.warm.stop)."""
    if snakemake_internals.runs_jobs_here(workflow):
        attnio_stop.end_jobs_on_sigterm()
        try:
            WARM_RUN["run"] = attnio_warm.begin(RESULTS, config["limits"]["worker_leak_mb"])
        except OSError as err:
            logger.warning(f"attnio: no warm workers ({err}); every job starts its own process")


def end_workers():
    attnio_warm.end(WARM_RUN.pop("run", None))
