# A page whose notebook failed (its outcome says so: reports.pages.outcome) ends the run
# non-zero naming it, and the next run renders it again although its inputs are unchanged.
import os

from snakemake.logging import logger

import snakemake_internals
from reports.pages.outcome import OutcomeError, failed, failed_pages_line, failure_line, read

RETRIED = []  # retry_failed_pages looks once per run


def retry_failed_pages():
    """A failed page is no finished output: the next run renders it again, changed inputs
    or not (its outcome is forced, as --forcerun would; an unreadable one too). Called while
    Snakemake builds the DAG (from the index's input), before it decides what to run; a dry
    run plans it the same way; --report, --summary and the like change nothing."""
    if not snakemake_internals.is_main_process(workflow) or RETRIED:
        return
    RETRIED.append(True)
    if not snakemake_internals.plans_jobs(workflow):
        return
    for report in REPORTS:
        path = report_outcome(report)
        if not os.path.exists(path):
            continue
        try:
            result = read(path)
        except OutcomeError as err:
            logger.warning(f"attnio: {err}; the page is rendered again")
            snakemake_internals.force_remake(workflow, [path])
            continue
        if not result["ok"]:
            logger.warning(f"attnio: the page {report} failed last time; it is rendered again")
            snakemake_internals.force_remake(workflow, [path])


def failed_pages_end_the_run():
    """A page that did not render (its outcome) is named with its first error line and its
    log, and, when this run's plan held the pages, ends the run non-zero (the others rendered
    and the index names it): its closing line names each such page. The next run renders it
    again (retry_failed_pages)."""
    pages = failed(report_outcome(report) for report in REPORTS)
    if not pages:
        return
    for page in pages:
        logger.error(f"attnio: page failed: {failure_line(page)}")
    if "report_notebook" in snakemake_internals.rules_in_dag(workflow):
        # the closing line, and the run's exit status (a raised error would add its traceback)
        logger.error(failed_pages_line(pages))
        raise SystemExit(1)
