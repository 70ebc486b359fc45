"""Thin entry point: check a group of point records and write them as JSON lines."""

from kernels.io.script_log import logged_to
from kernels.io.tables import gather

smk = snakemake  # noqa: F821 (injected by Snakemake)
with logged_to(smk.log[0]):
    print(f"{gather(smk.input, smk.output[0])} records")
