"""Thin entry point: the cost model's tables for the reports (kernels.models.model_tables)."""

from kernels.io.script_log import logged_to
from kernels.models import decode, mask_tiles, model_tables

smk = snakemake  # noqa: F821 (injected by Snakemake)
with logged_to(smk.log[0]):
    out = smk.output
    model_tables.write(smk.params.sweep, out.sizes, out.block_traffic, out.example)
    decode.write(smk.params.sweep, out.decode)
    mask_tiles.write(smk.params.sweep, out.mask_tiles)
