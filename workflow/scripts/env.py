"""Thin entry point: write results/env.json (provenance) with kernels.measure.provenance."""

from kernels.io.script_log import logged_to
from kernels.measure import provenance

smk = snakemake  # noqa: F821 (injected by Snakemake)
with logged_to(smk.log[0]):
    provenance.write(
        smk.params.config, smk.params.device, smk.output[0], root=".", threads=smk.params.threads
    )
