"""Thin entry point: check a group of point records and write them as JSON lines."""

import sys

from kernels.io.tables import gather

smk = snakemake  # noqa: F821 (injected by Snakemake)
with open(smk.log[0], "w") as log:
    sys.stderr = sys.stdout = log
    print(f"{gather(smk.input, smk.output[0])} records")
