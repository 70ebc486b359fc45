"""Thin entry point: every gathered record into results/metrics.{parquet,csv},
results/stages.csv and results/stage_times.csv with kernels.io.tables; the backward points'
into results/backward.csv, backward_stages.csv and backward_stage_times.csv."""

from collections import Counter

from kernels.io.script_log import logged_to
from kernels.io.tables import read_gathered, write_tables

smk = snakemake  # noqa: F821 (injected by Snakemake)
with logged_to(smk.log[0]):
    out = smk.output
    records = read_gathered(smk.input.records)
    backward = (out.backward, out.backward_stages, out.backward_stage_times)
    write_tables(records, out.parquet, out.csv, out.stages, out.stage_times, backward)
    counts = Counter((r.get("pass", "forward"), r["status"]) for r in records)
    print("\n".join(f"{direction} {status}: {n}" for (direction, status), n in sorted(counts.items())))
