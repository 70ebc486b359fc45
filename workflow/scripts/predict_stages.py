"""Thin entry point: the per-stage predictions with kernels.study.stage_predictions."""

from kernels.io.records import load_json
from kernels.io.script_log import logged_to
from kernels.study import stage_predictions

smk = snakemake  # noqa: F821 (injected by Snakemake)
with logged_to(smk.log[0]):
    ceilings = load_json(smk.input[0], strict=False)
    rows, left_out = stage_predictions.write(smk.params.sweep, ceilings, smk.output[0])
    print(f"{rows} stage predictions")
    if left_out:
        print(f"this machine left out: {left_out}")
