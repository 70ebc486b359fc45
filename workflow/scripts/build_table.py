"""Thin entry point: every build record into results/build.csv with kernels.build.table."""

from kernels.build.table import write_build_table
from kernels.io.script_log import logged_to

smk = snakemake  # noqa: F821 (injected by Snakemake)
with logged_to(smk.log[0]):
    table = write_build_table(smk.input, smk.output[0])
    print(table.groupby(["target", "status"]).size().to_string() if len(table) else "no builds")
