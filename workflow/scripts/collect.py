"""Thin entry point: every gathered record into results/metrics.{parquet,csv} and
results/stages.csv with kernels.io.tables."""

from kernels.io.script_log import logged_to
from kernels.io.tables import read_gathered, write_tables

smk = snakemake  # noqa: F821 (injected by Snakemake)
with logged_to(smk.log[0]):
    table = write_tables(
        read_gathered(smk.input.records), smk.output.parquet, smk.output.csv, smk.output.stages
    )
    print(table["status"].value_counts().to_string())
