"""Thin entry point: results/index.html with reports.pages.index."""

import sys

from reports.pages import index

smk = snakemake  # noqa: F821 (injected by Snakemake)
with open(smk.log[0], "w") as log:
    sys.stderr = sys.stdout = log
    index.write(
        smk.input.env[0],
        smk.input.metrics,
        smk.input.validation,
        list(smk.input.notebooks),
        smk.input.builds,
        smk.output[0],
    )
