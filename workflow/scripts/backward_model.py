"""Thin entry point: the backward's predictions with kernels.models.backward_predictions."""

from kernels.io.records import read_leaf
from kernels.io.script_log import logged_to
from kernels.models import backward_predictions

smk = snakemake  # noqa: F821 (injected by Snakemake)
with logged_to(smk.log[0]):
    ceilings = read_leaf(smk.input[0], "ceilings")
    out = smk.output
    p = smk.params
    left_out = backward_predictions.write(
        p.sweep, p.training, ceilings, out.predictions, out.crossing, out.training
    )
    if left_out:
        print(f"this machine left out: {left_out}")
