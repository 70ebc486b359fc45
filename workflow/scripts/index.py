"""Thin entry point: results/index.html with reports.pages.index (every page that rendered
linked, each that failed named from its outcome), and first the tables of where the run's
time went (kernels.io.benchmarks: the benchmark record of every job of the study but the
index's and the pack's, a row per job and one per rule, and those left out: stale or damaged)."""

from kernels.io import benchmarks
from kernels.io.script_log import logged_to
from reports.pages import index

smk = snakemake  # noqa: F821 (injected by Snakemake)
with logged_to(smk.log[0]):
    tables = (smk.output.benchmarks, smk.output.benchmarks_by_rule, smk.output.benchmarks_left_out)
    benchmarks.write_tables(
        smk.params.benchmarks, smk.params.logs, tables, smk.params.not_yet, smk.params.planned
    )
    index.write(
        smk.input.env[0],
        smk.input.metrics,
        smk.input.validation,
        list(smk.input.notebooks),
        smk.input.builds,
        smk.output[0],
        smk.params.files,
        smk.input.predictions,
        smk.params.tables,
        smk.input.stage_times,
        list(smk.input.outcomes),
        (smk.input.backward, smk.input.training, smk.input.crossing),
        tables,
        smk.input.mask_tiles,
    )
