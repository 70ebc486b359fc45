"""Thin entry point: every gathered record into results/metrics.{parquet,csv} and
results/stages.csv with kernels.io.tables."""

import sys

from kernels.io.tables import read_gathered, write_tables

smk = snakemake  # noqa: F821 (injected by Snakemake)
with open(smk.log[0], "w") as log:
    sys.stderr = sys.stdout = log
    table = write_tables(
        read_gathered(smk.input.records), smk.output.parquet, smk.output.csv, smk.output.stages
    )
    print(table["status"].value_counts().to_string())
