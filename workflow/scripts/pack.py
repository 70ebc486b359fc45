"""Thin entry point: the index and what it links to in one folder (reports.pack)."""

from kernels.io.script_log import logged_to
from reports.pack import pack

smk = snakemake  # noqa: F821 (injected by Snakemake)
with logged_to(smk.log[0]):
    pack(smk.input.index, smk.output[0])
