"""The one way the reports read their inputs (results/env.json, the model's tables, the
metrics, build.csv, ...): each file by the name a page gives it, checked for the shape the
pages read, and on failure one line that names the file, what it should hold and what is
wrong with it (no traceback in the notebook, so none on the console)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from kernels.io.benchmarks import LEFT_OUT_COLUMNS, RULE_COLUMNS
from kernels.io.tables import POINT_KEY as RECORD_KEY
from kernels.spec import INFERENCE_DIMS


class InputError(ValueError):
    """An input of a report that cannot be used: the message names the file and why."""

    def _render_traceback_(self) -> list[str]:
        # IPython (and so papermill) shows these lines instead of a traceback: the reader
        # needs the file and the reason, not the loader's call stack
        return [f"{type(self).__name__}: {self}"]


@dataclass(frozen=True)
class Input:
    """What a page reads under one name: a table (CSV or Parquet) with the columns the pages
    use, or JSON of one type with the keys they use."""

    what: str
    kind: str  # "table" or "json"
    fields: tuple[str, ...] = ()
    numeric: tuple[str, ...] = ()  # columns (of fields) that hold numbers or nothing
    json_type: type = dict
    # a table that is legitimately blank when the study has nothing for it (stages.csv of a
    # study whose points were all skipped): read as no rows
    may_be_blank: bool = False
    # JSON the workflow holds to a schema of its own (kernels.io.records.JSON_LEAVES): the
    # pages hold it to the same one
    leaf: str | None = None


# the key columns a page needs (the inference dimensions, num_splits and mask are read where a
# table has them: one written before them lacks them)
POINT_KEY = [k for k in RECORD_KEY if k not in (*INFERENCE_DIMS, "num_splits", "mask")]

METRICS = (
    *[k for k in POINT_KEY if k != "device"],
    "status",
    "reason",
    "bytes_S",
    "bytes_P",
    "peak_alloc_bytes",
    "time_ms",
    "time_reason",
    "max_abs_error",
    "nonfinite_outputs",
    "traffic_model_bytes",
    "traffic_counted_bytes",
    "dram_bytes",
    "dram_reason",
    "intensity_flop_per_byte",
    "started_at",
    "finished_at",
    "twin",
    "speedup_vs_materialized",
    "tflops",
    "gbps",
)
PREDICTED = ("shape", "gpu", "target", "path", "impl", "batch", "heads", "tokens", "head_dim", "dtype")
PREDICTED += ("causal", "block_m", "block_n", "in_sweep")
STAGE_NUMBERS = ("tokens", "time_ms", "cold_time_ms", "bytes", "gbps", "cold_gbps", "warm_speedup")
STAGE_NUMBERS += ("share_of_call", "sp_over_cache", "call_time_ms")
GPU_NUMBERS = ("hbm_bytes_per_s", "l2_bytes", "sms", "resident_share", "tensor_flops_float16")
GPU_NUMBERS += ("tensor_flops_float32",)
DECODE_NUMBERS = ("batch", "heads", "kv_heads", "group_size", "query_tokens", "tokens", "head_dim")
DECODE_NUMBERS += ("rows_per_kv_head", "sp_bytes", "kv_bytes", "qo_bytes", "sp_share", "flops")
DECODE_NUMBERS += ("intensity_flop_per_byte", "ridge_flop_per_byte", "floor_s", "split_partial_bytes")
DECODE_NUMBERS += ("fused_s", "split_s")

INPUTS = {
    "metrics": Input(
        "the metrics table, a row per point",
        "table",
        METRICS,
        ("batch", "heads", "tokens", "head_dim", "bytes_S", "bytes_P", "time_ms", "peak_alloc_bytes"),
        may_be_blank=True,  # a study of backward points only has no forward row
    ),
    "stages": Input(
        "the traffic per point and stage",
        "table",
        ("impl", "tokens", "head_dim", "dtype", "causal", "block_m", "block_n", "tensor", "op")
        + ("compulsory_bytes", "model_bytes", "counted_bytes"),
        ("tokens", "head_dim", "compulsory_bytes", "model_bytes", "counted_bytes"),
        may_be_blank=True,
    ),
    "stage_times": Input(
        "the timed stages of the materialized paths, a row per point and stage",
        "table",
        (*POINT_KEY, "status", "bytes_S", "bytes_P", "last_cache_bytes", "call_time_ms", "order")
        + ("stage", "does", "time_ms", "cold_time_ms", "bytes", "flops", "exps", "gbps", "cold_gbps")
        + ("tflops", "exps_per_s", "warm_speedup", "share_of_call", "sp_over_cache"),
        STAGE_NUMBERS,
        may_be_blank=True,
    ),
    "stage_predictions": Input(
        "the roofline's prediction per staged point, target and stage",
        "table",
        (*[k for k in POINT_KEY if k != "device"], "target", "stage", "does", "bytes", "flops", "exps")
        + ("predicted_warm_low_ms", "predicted_warm_high_ms", "predicted_cold_ms", "bound_warm_low")
        + ("bound_warm_high", "bound_cold", "largest_cache_bytes"),
        ("tokens", "bytes", "predicted_warm_low_ms", "predicted_warm_high_ms", "predicted_cold_ms"),
    ),
    "backward": Input(
        "the backward points' table, a row per point",
        "table",
        (*[k for k in POINT_KEY if k != "device"], "pass", "status", "reason", "saved_bytes")
        + ("saved_model_bytes", "peak_alloc_bytes", "time_ms", "step_time_ms", "time_reason")
        + ("traffic_compulsory_bytes", "traffic_model_bytes", "traffic_counted_bytes", "flops")
        + ("forward_flops", "convention_flops", "max_abs_error", "nonfinite_outputs"),
        ("tokens", "head_dim", "saved_bytes", "saved_model_bytes", "peak_alloc_bytes", "time_ms")
        + ("step_time_ms", "traffic_compulsory_bytes", "traffic_model_bytes", "traffic_counted_bytes")
        + ("flops", "forward_flops", "convention_flops", "max_abs_error"),
        may_be_blank=True,
    ),
    "backward_stages": Input(
        "the backward's traffic per point, kernel and tensor",
        "table",
        ("impl", "tokens", "head_dim", "dtype", "causal", "block_m", "block_n", "status", "kernel")
        + ("tensor", "op", "compulsory_bytes", "model_bytes", "counted_bytes"),
        ("tokens", "head_dim", "compulsory_bytes", "model_bytes", "counted_bytes"),
        may_be_blank=True,
    ),
    "backward_stage_times": Input(
        "the materialized backward's stages timed warm and cold, a row per point and stage",
        "table",
        (*POINT_KEY, "status", "stage", "does", "time_ms", "cold_time_ms", "bytes", "flops", "gbps"),
        ("tokens", "time_ms", "cold_time_ms", "bytes", "flops", "gbps"),
        may_be_blank=True,
    ),
    "backward_predictions": Input(
        "the backward's roofline per point, target and kernel",
        "table",
        (*[k for k in POINT_KEY if k != "device"], "target", "kernel", "does", "bytes", "flops")
        + ("predicted_warm_low_ms", "predicted_warm_high_ms", "predicted_cold_ms", "bound_cold"),
        ("tokens", "bytes", "flops", "predicted_warm_low_ms", "predicted_warm_high_ms", "predicted_cold_ms"),
        may_be_blank=True,
    ),
    "crossing": Input(
        "the stored-P and recomputing backwards over T per target",
        "table",
        ("target", "head_dim", "dtype", "causal", "block_m", "block_n", "tokens", "case")
        + ("stored_ms", "recomputed_ms", "stored_flops", "recomputed_flops", "stored_bytes")
        + ("recomputed_bytes", "crossing_tokens"),
        ("tokens", "stored_ms", "recomputed_ms", "stored_flops", "recomputed_flops", "stored_bytes")
        + ("recomputed_bytes", "crossing_tokens"),
    ),
    "training": Input(
        "what each path keeps at the training shape, per target",
        "table",
        ("impl", "target", "batch", "heads", "tokens", "head_dim", "dtype", "causal", "layers")
        + ("kept_layer_bytes", "kept_matrix_layer_bytes", "kept_model_bytes", "memory_bytes")
        + ("backward_layer_bytes", "backward_matrix_layer_bytes", "backward_layer_flops")
        + ("predicted_warm_low_layer_ms", "predicted_cold_layer_ms"),
        ("tokens", "layers", "heads", "kept_layer_bytes", "kept_model_bytes", "memory_bytes")
        + ("backward_layer_bytes", "predicted_warm_low_layer_ms", "predicted_cold_layer_ms"),
    ),
    "env": Input("the run's provenance: device, versions, configuration", "json", ("device",)),
    "ceilings": Input(
        "the machine's measured ceilings",
        "json",
        ("device_name", "threads", "copy_gbps", "matmul_tflops", "matmul_dtype"),
        leaf="ceilings",
    ),
    "builds": Input(
        "the build table, a row per kernel variant and target",
        "table",
        ("target", "kernel", "variant", "status", "reason", "dtype", "head_dim", "block_m", "block_n"),
        ("head_dim", "block_m", "block_n"),
    ),
    "sizes": Input(
        "the model's S and P sizes",
        "table",
        ("tokens", "dtype", "element_bytes", "bytes"),
        ("tokens", "element_bytes", "bytes"),
    ),
    "mask_tiles": Input(
        "the model's masks: scores kept against tiles visited, and the masks' own bytes",
        "table",
        ("mask", "tokens", "query_tokens", "block", "kept_share", "visited_share", "partial_share")
        + ("dense_mask_bytes", "runs_bytes"),
        ("tokens", "query_tokens", "block", "kept_share", "visited_share", "partial_share")
        + ("dense_mask_bytes", "runs_bytes"),
        may_be_blank=True,
    ),
    "block_traffic": Input(
        "the model's traffic against block size",
        "table",
        ("tokens", "head_dim", "dtype", "causal", "block", "bytes"),
        ("tokens", "head_dim", "block", "bytes"),
    ),
    "predictions": Input(
        "the predictions per shape, T, GPU and path",
        "table",
        (*PREDICTED, "bytes_S", "dram_low_bytes", "dram_high_bytes", "issued_bytes", "time_low_s")
        + ("compulsory_bytes", "time_high_s", "launch_reason"),
        ("batch", "heads", "tokens", "head_dim", "bytes_S", "dram_low_bytes", "dram_high_bytes")
        + ("issued_bytes", "compulsory_bytes", "time_low_s", "time_high_s"),
    ),
    "kernels": Input(
        "the predictions per kernel",
        "table",
        (*PREDICTED, "kernel", "flops", "bytes_high"),
        ("tokens", "flops", "bytes_high"),
    ),
    "gpus": Input(
        "the GPUs the predictions are for",
        "table",
        GPU_NUMBERS + ("gpu", "model", "target"),
        GPU_NUMBERS,
    ),
    "decode": Input(
        "the decode model: each inference case at query_tokens from T to 1, per GPU",
        "table",
        DECODE_NUMBERS + ("dtype", "causal", "gpu", "bound", "fused_programs", "split_programs"),
        DECODE_NUMBERS + ("fused_programs", "split_programs"),
    ),
    "example": Input(
        "the seed's Figure 4 example", "json", ("scores", "tile", "whole_row", "per_tile", "figure4")
    ),
    "tile_errors": Input(
        "the tile-local and fused kernels' errors",
        "table",
        ("impl", "tokens", "block_m", "block_n", "head_dim", "dtype", "causal", "error"),
        ("tokens", "block_m", "block_n", "head_dim", "error"),
    ),
    "validation": Input("a validation result", "json", ("verdict", "as_expected"), json_type=list),
    "benchmarks_by_rule": Input(
        "the jobs' benchmark records added up per rule",
        "table",
        RULE_COLUMNS,
        ("jobs", "total_wall_s", "share_of_wall", "median_wall_s", "max_wall_s", "total_cpu_s")
        + ("peak_rss_mb",),
        may_be_blank=True,
    ),
    "benchmarks_left_out": Input(
        "the benchmark records the tables of where the run's time went leave out",
        "table",
        LEFT_OUT_COLUMNS,
        may_be_blank=True,
    ),
    "notebook": Input("an executed report", "json", ("cells",)),
}


def _fail(path, spec: Input | None, reason: str) -> InputError:
    what = f" ({spec.what})" if spec else ""
    remedy = (
        "run the workflow to make it"
        if reason == "does not exist"
        else "remove it and run the workflow again to make it anew"
    )
    return InputError(f"{path}{what}: {reason.rstrip('.')}. The workflow makes this file: {remedy}.")


def _json(path: Path, spec: Input | None):
    from kernels.io.records import DamagedRecordError, load_json, read_leaf

    try:
        value = read_leaf(path, spec.leaf) if spec and spec.leaf else load_json(path, strict=False)
    except DamagedRecordError as err:
        # its message starts with the path: keep only the reason
        raise _fail(path, spec, str(err).removeprefix(f"{path}: ")) from None
    if spec is None:
        return value
    kinds = {dict: "an object", list: "a list"}
    if not isinstance(value, spec.json_type):
        found = kinds.get(type(value), f"a {type(value).__name__}")
        raise _fail(path, spec, f"holds {found}, not {kinds[spec.json_type]}")
    items = value if spec.json_type is list else [value]
    for number, item in enumerate(items, start=1):
        where = f"item {number} " if spec.json_type is list else ""
        if not isinstance(item, dict):
            raise _fail(path, spec, f"{where}is not an object")
        missing = [key for key in spec.fields if key not in item]
        if missing:
            raise _fail(path, spec, f"{where}lacks {_names(missing)}")
    return value


def _names(missing: list[str]) -> str:
    return ("the key " if len(missing) == 1 else "the keys ") + ", ".join(missing)


def _table(path: Path, spec: Input | None) -> pd.DataFrame:
    try:
        if path.suffix == ".parquet":
            table = pd.read_parquet(path)
        elif spec and spec.may_be_blank and not path.read_text().strip():
            return pd.DataFrame(columns=list(spec.fields))
        else:
            table = pd.read_csv(path)
    except pd.errors.EmptyDataError:
        raise _fail(path, spec, "is empty (not even a header)") from None
    except pd.errors.ParserError as err:
        raise _fail(path, spec, f"is not a CSV table: {str(err).strip()}") from None
    except UnicodeDecodeError:
        raise _fail(path, spec, "is not text (not a CSV table)") from None
    except (OSError, ValueError) as err:  # pyarrow's errors are OSError or ValueError
        kind = "a Parquet table" if path.suffix == ".parquet" else "a CSV table"
        raise _fail(path, spec, f"cannot be read as {kind}: {str(err).strip()}") from None
    if spec and spec.may_be_blank and table.empty:  # a header alone: no rows to check
        return pd.DataFrame(columns=list(dict.fromkeys([*spec.fields, *table.columns])))
    if spec:
        missing = [column for column in spec.fields if column not in table.columns]
        if missing:
            names = ("the column " if len(missing) == 1 else "the columns ") + ", ".join(missing)
            raise _fail(path, spec, f"lacks {names} that the reports read")
        for column in spec.numeric:
            values = table[column]
            if pd.api.types.is_numeric_dtype(values) or values.isna().all():
                continue
            bad = values[pd.to_numeric(values, errors="coerce").isna() & values.notna()]
            if len(bad):
                row = int(bad.index[0]) + 1
                raise _fail(path, spec, f"column {column} holds {bad.iloc[0]!r} in row {row}, not a number")
    return table


def read(name: str, path: str | os.PathLike):
    """The input ``name`` of a page (``metrics``, ``env``, ... as INPUTS names them) from
    ``path``: a DataFrame for a table (CSV or Parquet), the value for JSON. InputError names
    the file and what is wrong: missing, empty, not a table or not JSON, or without a column
    or key the pages read."""
    path, spec = Path(path), INPUTS.get(name)
    if not path.exists():
        raise _fail(path, spec, "does not exist")
    if path.is_dir():
        raise _fail(path, spec, "is a folder, not a file")
    if path.suffix in (".csv", ".parquet"):
        if spec and spec.kind != "table":
            raise _fail(path, spec, f"should be JSON, not a {path.suffix} file")
        return _table(path, spec)
    if path.suffix in (".json", ".ipynb"):
        if spec and spec.kind != "json":
            raise _fail(path, spec, "should be a table (CSV or Parquet), not JSON")
        return _json(path, spec)
    raise _fail(path, spec, f"cannot read a {path.suffix or 'suffix-less'} file")
