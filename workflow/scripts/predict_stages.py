"""Thin entry point: the per-stage predictions with kernels.models.stage_predictions."""

from kernels.io.records import read_leaf
from kernels.io.script_log import logged_to
from kernels.models import stage_predictions

smk = snakemake  # noqa: F821 (injected by Snakemake)
with logged_to(smk.log[0]):
    ceilings = read_leaf(smk.input[0], "ceilings")  # held to its schema, as every reader does
    rows, left_out = stage_predictions.write(smk.params.sweep, ceilings, smk.output[0])
    print(f"{rows} stage predictions")
    if left_out:
        print(f"this machine left out: {left_out}")
    for note in stage_predictions.assumptions(smk.params.sweep, ceilings):
        print(f"note: {note}")
