"""Thin entry point: results/index.html with kernels.index_page."""

import sys

from kernels import index_page

smk = snakemake  # noqa: F821 (injected by Snakemake)
with open(smk.log[0], "w") as log:
    sys.stderr = sys.stdout = log
    index_page.write(smk.input.env[0], smk.input.metrics, smk.input.validation,
                     list(smk.params.reports), smk.input.builds, smk.output[0])
