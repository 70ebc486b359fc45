# The study's leaves, every file it keeps (`all` asks for each): a deleted one is made again,
# and so is a damaged one. Damage is looked for as the DAG is built (kernels.planning.leaves
# says what each file should hold and which are damaged); only a real run sets it aside.
import os

from snakemake.logging import logger

import snakemake_internals
from kernels.planning.leaves import (
    build_points_of,
    damaged_leaves,
    record_fields,
    table_kind,
    verdict_fields,
)
from kernels.planning.point import Point


def leaves():
    """Every file the study keeps, as {path: (kind, what its file name says it holds)}: the
    records, verdicts and build results; the ceilings, provenance and model tables; the
    collected tables; the reports' outcomes, the index and its packed copy (the reports and
    their executed notebooks are checked with them: published_pages).
    `all` asks for each, so a deleted one is made again although what was built from it is
    newer than it, and so is a damaged one (set_aside_damaged)."""
    found = {}
    for p in POINTS:
        found[output_of(rules.measure.output[0], p)] = ("record", record_fields(p))
        found[output_of(rules.validate.output[0], p)] = ("validation", verdict_fields(p))
    for job, names in BUILD_JOBS.items():
        build = output_of(rules.build.output.json, Point.from_name(names[0]))
        found[build] = ("build", build_points_of(job))
    found |= {table: (table_kind(table), None) for table in TABLES}
    # every page's outcome (rendered or failed: report_outcome); the pages themselves are the
    # index's inputs once their outcome says they rendered (published_pages)
    found |= {report_outcome(report): (None, None) for report in REPORTS}
    found[rules.index.output[0]] = ("page", None)
    found[rules.pack.output[0]] = (None, None)
    return found


def published_pages():
    """Every report's HTML and executed notebook as {path: (kind, None)}: looked at for
    damage where they are, made (or not, for a page that failed) through the index."""
    return {path: ("page", None) for path in expand(rules.report_html.output, report=REPORTS)}


LOOKED_FOR_DAMAGE = []  # set_aside_damaged looks once per run


def set_aside_damaged(files):
    """A damaged leaf (damaged_leaves) is named with the reason on the console and in
    Snakemake's log. A real run renames it to <name>.damaged, so that, missing, it is made
    again like a deleted one; a dry run (or --touch, --report, --summary) changes nothing,
    and a dry run plans the remaking as the real run will. Called while Snakemake builds the
    DAG (from `all`'s input), when it knows which kind of run this is, before it has looked
    at any file; only the main process looks, a cluster job's own Snakemake does not."""
    if not snakemake_internals.is_main_process(workflow) or LOOKED_FOR_DAMAGE:
        return
    LOOKED_FOR_DAMAGE.append(True)
    damaged = damaged_leaves(files)
    real = snakemake_internals.is_real_run(workflow)
    for path, why in damaged.items():
        if real:
            os.replace(path, f"{path}.damaged")
            logger.warning(f"Damaged, set aside as {path}.damaged to be made again: {why}")
        else:
            logger.warning(
                f"Damaged: {why} (a real run sets it aside as {path}.damaged and remakes it)"
            )
    if damaged and snakemake_internals.is_dry_run(workflow):
        # the plan the real run will follow: the jobs that make them again, and what follows
        snakemake_internals.force_remake(workflow, damaged)


def study_targets(wildcards):
    """`all`'s input: every leaf of the study, each checked for damage first."""
    files = leaves()
    set_aside_damaged(files | published_pages())
    return sorted(files)
