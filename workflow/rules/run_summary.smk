# The last lines a run prints (the Snakefile's onsuccess and onerror): the points counted by
# their records, where the reports are (stale_index.smk), a full disk on a failed run, and the
# pages that failed (failed_pages.smk). kernels.io.run_summary counts and words them.
from pathlib import Path

from snakemake.logging import logger

import kernels.io.run_summary as run_summary
from kernels.planning.leaves import record_fields


def print_run_summary(failed=False):
    """The last lines a run prints: the configured points counted by the records on disk
    (ok, skipped, failed; missing: no record; damaged: one that cannot be used), and where
    to look; ``failed``: a run that ended in an error, also whether results/ is out of room."""
    records = [(output_of(rules.measure.output[0], p), record_fields(p)) for p in POINTS]
    found = run_summary.tally(records)
    table = Path(RESULTS, "metrics.csv")
    tables = [table] + [Path(RESULTS, "backward.csv")] * any(p.backward for p in POINTS)
    for level, line in run_summary.point_lines(found, tables, RESULTS):
        getattr(logger, level)(line)
    said = index_line(found.newest)
    if said:
        logger.info(said)
    said = run_summary.disk_full_line(RESULTS) if failed else None
    if said:
        logger.error(said)
    failed_pages_end_the_run()
