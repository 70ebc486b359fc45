"""The study's leaves, every file it keeps: what each one's name says it holds, and which of
them are damaged (there, but not usable as they are), so that the workflow makes them again.

Plain Python with the record schemas only (no Snakemake, no torch): the workflow calls it while
Snakemake builds the DAG (workflow/rules/damage.smk).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

from kernels.io.records import DamagedRecordError, read_leaf, table_schemas
from kernels.planning.point import Point

# a leaf's kind (kernels.io.records.read_leaf; None: looked at by nobody) and what its file name
# says it holds (None, a dict of fields, or a check of the content that names what disagrees)
Leaf = tuple[str | None, object]


def record_fields(point: Point) -> dict:
    """What a point's file name says its record holds: a record that says another pass than
    its name (a backward's numbers in a forward's place) is as damaged as one of another shape."""
    return {"impl": point.impl, **point.shape(), "inputs": point.inputs, "pass": point.direction}


def verdict_fields(point: Point) -> dict:
    """What a validation result's file name says each of its rows is about."""
    return {name: getattr(point, name) for name in ("impl", "dtype", "block_m", "block_n")}


def build_points_of(job: str) -> Callable[[dict], str | None]:
    """A build result names only points its own build job (its file name) compiles."""

    def elsewhere(name: str) -> bool:
        try:
            return Point.from_name(name).build_name != job
        except ValueError:
            return True

    def strays(result: dict) -> str | None:
        found = [name for name in result["points"] if elsewhere(name)]
        return f"names the point {found[0]}, which is not built by {job}" if found else None

    return strays


def table_kind(path: str | os.PathLike) -> str | None:
    """The leaf kind (kernels.io.records.read_leaf) of a file the reports read: a table of
    tables.schema.json is held to its schema and its seal; one collected from the other
    leaves (metrics, stages, stage_times, build.csv) to its seal (kernels.io.seal), so one
    cut short at a row's end is made again too."""
    name = Path(path).name
    json_kinds = {"env": "env", "ceilings": "ceilings", "softmax_example": "softmax_example"}
    if name.endswith(".json"):
        return json_kinds.get(name.removesuffix(".json"))
    if name in table_schemas()["tables"]:
        return "table"
    return "sealed" if name.endswith((".csv", ".parquet")) else None


def damaged_leaves(files: Mapping[str, Leaf]) -> dict[str, str]:
    """{path: why} for each leaf of ``files`` ({path: (kind, expect)}) that is there but cannot
    be used as it is: unreadable, empty, cut short, not JSON, off the schema of its kind, or
    saying something else than its file name (kernels.io.records.read_leaf). A missing one,
    or one of no kind, is no damage."""
    found = {}
    for path, (kind, expect) in files.items():
        if kind is None or not os.path.isfile(path):
            continue
        try:
            read_leaf(path, kind, expect)
        except DamagedRecordError as err:
            found[path] = str(err)
    return found
