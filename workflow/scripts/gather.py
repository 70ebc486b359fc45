"""Thin entry point: check a group of point records (each against the schema and against
what its file name says) and write them as JSON lines."""

from pathlib import Path

from kernels.io.script_log import logged_to
from kernels.io.tables import gather
from kernels.planning.leaves import record_fields
from kernels.planning.point import Point

smk = snakemake  # noqa: F821 (injected by Snakemake)
with logged_to(smk.log[0]):
    # a record's name is its last three path parts: <impl>/<dtype>/<shape>.json
    points = [Point.from_name("/".join(Path(path).parts[-3:])) for path in smk.input]
    expect = [record_fields(p) for p in points]  # the pass among them
    print(f"{gather(smk.input, smk.output[0], expect)} records")
