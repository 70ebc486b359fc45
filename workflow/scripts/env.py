"""Thin entry point: write results/env.json (provenance) with kernels.measure.provenance."""

import sys

from kernels.measure import provenance

smk = snakemake  # noqa: F821 (injected by Snakemake)
with open(smk.log[0], "w") as log:
    sys.stderr = sys.stdout = log
    provenance.write(smk.params.config, smk.params.device, smk.output[0], root=".")
