"""Thin entry point: results/index.html with reports.pages.index (every page that rendered
linked, each that failed named from its outcome), and first the tables of where the run's
time went (kernels.io.benchmarks: every job's benchmark record but the index's and the
pack's, a row per job and one per rule)."""

from kernels.io import benchmarks
from kernels.io.script_log import logged_to
from reports.pages import index

smk = snakemake  # noqa: F821 (injected by Snakemake)
with logged_to(smk.log[0]):
    benchmarks.write_tables(
        smk.params.benchmarks,
        smk.params.logs,
        smk.output.benchmarks,
        smk.output.benchmarks_by_rule,
        leave_out=smk.params.not_yet,
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
        (smk.output.benchmarks, smk.output.benchmarks_by_rule),
    )
