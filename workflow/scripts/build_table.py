"""Thin entry point: every build record into results/build.csv with kernels.build.table."""

import sys

from kernels.build.table import write_build_table

smk = snakemake  # noqa: F821 (injected by Snakemake)
with open(smk.log[0], "w") as log:
    sys.stderr = sys.stdout = log
    table = write_build_table(smk.input, smk.output[0])
    print(table.groupby(["target", "status"]).size().to_string() if len(table) else "no builds")
