"""Thin entry point: the cost model's tables for the reports (kernels.study.model_tables)."""

import sys

from kernels.study import model_tables

smk = snakemake  # noqa: F821 (injected by Snakemake)
with open(smk.log[0], "w") as log:
    sys.stderr = sys.stdout = log
    out = smk.output
    model_tables.write(smk.params.sweep, out.sizes, out.block_traffic, out.example)
