"""Many point records → one tidy table (a row per point, with the derived figures of
kernels.io.derived), a long table of transfers (``stages.csv``: a row per point, kernel,
tensor and load/store) and a long table of timed stages (``stage_times.csv``: a row per point
and stage of a materialized path, warm and cold, and the call's rest beyond its stages).
Every record is checked against the schema."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from kernels.io.atomic import write_atomic, write_text_atomic
from kernels.io.derived import derive, stage_rates
from kernels.io.records import SCHEMA, DamagedRecordError, read_record, said, validate_record

POINT_KEY = [
    "impl",
    "batch",
    "heads",
    "kv_heads",
    "query_tokens",
    "tokens",
    "head_dim",
    "dtype",
    "causal",
    "mask",
    "inputs",
    "block_m",
    "block_n",
    "num_splits",
    "device",
]


def point_key(record: dict) -> dict:
    """The record's POINT_KEY fields; a record written before the inference dimensions reads
    as the square problem (kernels.io.records.ABSENT_MEANS)."""
    return {k: said(record, k) for k in POINT_KEY}


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
NESTED = ("ncu_kernels", "launch_candidates", "ops_run")


REFERENCE_RATES = ("copy_gbps", "product_gflops")  # of a record's reference pass
REST = "rest"  # the timed-stage row for what the whole call spends beyond its stages
REST_DOES = "the call beyond its stages: its own fresh T×T allocations (and their page faults)"


def timed_stage_rows(record: dict) -> list[dict]:
    """A row per timed stage of the record, then the rest of the call (its time less the
    stages' warm medians; negative when the call ran faster than its stages one by one)."""
    stages = record.get("stage_times") or []
    if not stages:
        return []
    key = point_key(record) | {
        "status": record["status"],
        "bytes_S": record["bytes_S"],
        "bytes_P": record["bytes_P"],
        "last_cache_bytes": record.get("last_cache_bytes"),
        "call_time_ms": record["time_ms"],
        # quiet or busy while timed (kernels.measure.contention): the pages mark busy points
        "contention_verdict": (record.get("contention") or {}).get("verdict"),
        # the reference pass timed beside the stages (kernels.measure.reference_pass)
        **{f"reference_{k}": (record.get("reference_pass") or {}).get(k) for k in REFERENCE_RATES},
    }
    rows = [key | {"order": i} | stage for i, stage in enumerate(stages)]
    if record["time_ms"] is not None:
        rest = record["time_ms"] - sum(s["time_ms"] for s in stages)
        rows.append(key | {"order": len(stages), "stage": REST, "does": REST_DOES, "time_ms": rest})
    return rows


def timed_stage_table(records: list[dict]) -> pd.DataFrame:
    rows = [row for record in records for row in timed_stage_rows(record)]
    if not rows:
        return empty_tables()[2]
    table = pd.DataFrame(rows).convert_dtypes(dtype_backend="numpy_nullable")
    return stage_rates(table).sort_values(POINT_KEY + ["order"], ignore_index=True, na_position="first")


# record fields that are not one column each: flattened (versions, process, contention) or
# tables of their own (stages, stage_times)
NOT_COLUMNS = ("stages", "stage_times", "versions", "process", "contention")


def _record_schema() -> dict:
    return json.loads(SCHEMA.read_text(encoding="utf-8"))


def empty_tables() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The points, transfers and timed-stage tables of no record, each with the columns the
    record schema gives it: a pass the sweep has no point of reads as no rows, and every
    column a reader asks for is there."""
    schema = _record_schema()
    fields = [k for k in schema["properties"] if k not in NOT_COLUMNS]
    metrics = derive(pd.DataFrame(columns=list(dict.fromkeys([*fields, *POINT_KEY]))))
    stage = list(schema["$defs"]["stage"]["properties"])
    stages = pd.DataFrame(columns=[*POINT_KEY, "status", *stage])
    timed_key = ["status", "bytes_S", "bytes_P", "last_cache_bytes", "call_time_ms", "contention_verdict"]
    timed_key += [f"reference_{k}" for k in REFERENCE_RATES]
    timed_stage = list(schema["$defs"]["timed_stage"]["properties"])
    timed = stage_rates(pd.DataFrame(columns=[*POINT_KEY, *timed_key, "order", *timed_stage]))
    return metrics, stages, timed


def tables(records: list[dict]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The points and transfers tables of the records (of no record: empty_tables')."""
    if not records:
        return empty_tables()[:2]
    rows, stages = [], []
    for record in records:
        skip = (*NOT_COLUMNS, *NESTED)
        row = {k: v for k, v in record.items() if k not in skip} | point_key(record)
        row |= {f"version_{k}": v for k, v in record["versions"].items()}
        row |= {f"process_{k}": v for k, v in (record.get("process") or {}).items()}
        row |= {f"contention_{k}": v for k, v in (record.get("contention") or {}).items()}
        row |= {k: json.dumps(record[k]) if record.get(k) else None for k in NESTED}
        rows.append(row)
        key = point_key(record)
        stages += [key | {"status": record["status"]} | stage for stage in record["stages"]]
    metrics = derive(pd.DataFrame(rows).convert_dtypes(dtype_backend="numpy_nullable"))
    stage_table = pd.DataFrame(stages).convert_dtypes(dtype_backend="numpy_nullable")
    order = [c for c in POINT_KEY if c in metrics]
    return (
        metrics.sort_values(order, ignore_index=True, na_position="first"),
        stage_table.sort_values(order + ["kernel", "tensor", "op"], ignore_index=True, na_position="first"),
    )


def of_pass(records: list[dict], direction: str) -> list[dict]:
    """The records of one pass (a record written before passes existed is a forward's)."""
    return [r for r in records if r.get("pass", "forward") == direction]


def _csv(table: pd.DataFrame, path) -> None:
    write_atomic(path, lambda p: table.to_csv(p, index=False), sealed=True)


def write_tables(
    records: list[dict],
    metrics_parquet,
    metrics_csv,
    stages_csv,
    stage_times_csv,
    backward: tuple | None = None,
) -> pd.DataFrame:
    """The forward records' tables; with ``backward`` (three paths: points, transfers, timed
    stages), the backward records' in the same three forms (each empty but for its header
    where the sweep has no backward point)."""
    forward = of_pass(records, "forward")
    metrics, stage_table = tables(forward)
    timed = timed_stage_table(forward)
    write_atomic(metrics_parquet, lambda p: metrics.to_parquet(p, index=False), sealed=True)
    _csv(metrics, metrics_csv)
    _csv(stage_table, stages_csv)
    _csv(timed, stage_times_csv)
    if backward:
        back = of_pass(records, "backward")
        points, transfers = tables(back)
        for table, path in zip((points, transfers, timed_stage_table(back)), backward, strict=True):
            _csv(table, path)
    return metrics
