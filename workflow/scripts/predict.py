"""Thin entry point: the predictions' tables with kernels.models.prediction_tables."""

from kernels.io.script_log import logged_to
from kernels.models import prediction_tables

smk = snakemake  # noqa: F821 (injected by Snakemake)
with logged_to(smk.log[0]):
    out = smk.output
    rows = prediction_tables.write(smk.params.sweep, smk.input.builds, out.gpus, out.predictions, out.kernels)
    print(f"{rows} predictions")
