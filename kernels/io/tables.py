"""Many point records → one tidy table (a row per point, with the derived figures of
kernels.io.derived) and a long table of stages (a row per point, kernel, tensor and
load/store). Every record is checked against the schema."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from kernels.io.atomic import write_atomic, write_text_atomic
from kernels.io.derived import derive
from kernels.io.records import DamagedRecordError, read_record, validate_record

POINT_KEY = [
    "impl",
    "batch",
    "heads",
    "tokens",
    "head_dim",
    "dtype",
    "causal",
    "inputs",
    "block_m",
    "block_n",
    "device",
]


def load_records(paths: Iterable[str | os.PathLike], expect: Iterable[dict] | None = None) -> list[dict]:
    """Every record, checked (and against what its file name says, ``expect``, one dict per
    path, when given); the first damaged one stops it with its path and the reason."""
    paths = list(paths)
    expect = list(expect) if expect is not None else [None] * len(paths)
    if len(expect) != len(paths):
        raise ValueError(f"{len(paths)} records but {len(expect)} expectations")
    return [read_record(path, fields) for path, fields in zip(paths, expect, strict=True)]


def gather(
    paths: Iterable[str | os.PathLike], out: str | os.PathLike, expect: Iterable[dict] | None = None
) -> int:
    """Check records against the schema (and their file names, ``expect``) and write them
    as JSON lines (atomically)."""
    records = load_records(paths, expect)
    write_text_atomic(out, "".join(json.dumps(r, allow_nan=False) + "\n" for r in records))
    return len(records)


def read_gathered(paths: Iterable[str | os.PathLike]) -> list[dict]:
    """The records of gathered JSON-lines files; a damaged line is named by file and line."""
    records = []
    for path in paths:
        for number, line in enumerate(Path(path).read_text().splitlines(), start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                validate_record(record)
            except ValueError as err:
                raise DamagedRecordError(f"{path}, line {number}: {err}") from None
            records.append(record)
    return records


# record fields holding lists: one JSON string per cell in the tables
NESTED = ("ncu_kernels", "launch_candidates")


def tables(records: list[dict]) -> tuple[pd.DataFrame, pd.DataFrame]:
    rows, stages = [], []
    for record in records:
        row = {k: v for k, v in record.items() if k not in ("stages", "versions", *NESTED)}
        row |= {f"version_{k}": v for k, v in record["versions"].items()}
        row |= {k: json.dumps(record[k]) if record.get(k) else None for k in NESTED}
        rows.append(row)
        key = {k: record[k] for k in POINT_KEY}
        stages += [key | {"status": record["status"]} | stage for stage in record["stages"]]
    metrics = derive(pd.DataFrame(rows).convert_dtypes(dtype_backend="numpy_nullable"))
    stage_table = pd.DataFrame(stages).convert_dtypes(dtype_backend="numpy_nullable")
    order = [c for c in POINT_KEY if c in metrics]
    return (
        metrics.sort_values(order, ignore_index=True, na_position="first"),
        stage_table.sort_values(order + ["kernel", "tensor", "op"], ignore_index=True, na_position="first"),
    )


def write_tables(records: list[dict], metrics_parquet, metrics_csv, stages_csv) -> pd.DataFrame:
    metrics, stage_table = tables(records)
    write_atomic(metrics_parquet, lambda p: metrics.to_parquet(p, index=False))
    write_atomic(metrics_csv, lambda p: metrics.to_csv(p, index=False))
    write_atomic(stages_csv, lambda p: stage_table.to_csv(p, index=False))
    return metrics
