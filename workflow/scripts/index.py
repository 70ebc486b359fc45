"""Thin entry point: results/index.html with reports.pages.index (every page that rendered
linked, each that failed named from its outcome)."""

from kernels.io.script_log import logged_to
from reports.pages import index

smk = snakemake  # noqa: F821 (injected by Snakemake)
with logged_to(smk.log[0]):
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
    )
