"""A study's results/ for any grid, written in seconds: each point's record is the one the
workflow would write (the package's own base record: every model field, bytes, FLOPs and
stages computed by the package), with the measured parts filled in by a made-up machine
whose rates are given here, so that a grid of 10,000-token points or a 256 MiB cache costs
no measurement. The pages' robustness is what these studies test; the numbers mean nothing
beyond that (real measurements are tested elsewhere).

The made-up machine: products at MATMUL_FLOPS, memory at CACHE_RATE while a stage's
footprint fits the cache and at DRAM_RATE past it (warm), always DRAM_RATE cold; the
interpreter's points counted exactly as the model says (as the real counter must), never
timed; the points the real gates skip on this device skipped with the gates' own reason."""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path

import pandas as pd

from kernels.build.table import write_build_table
from kernels.io.computed_tables import write_table
from kernels.io.records import validate_record
from kernels.io.tables import write_tables
from kernels.measure import gates
from kernels.measure.ceilings import unavailable
from kernels.measure.run import base_record
from kernels.models import (
    backward_predictions,
    decode,
    mask_tiles,
    model_tables,
    prediction_tables,
    stage_predictions,
)
from kernels.models.stages import stage_costs
from kernels.planning.point import Point
from kernels.planning.sweep import points, resolved
from kernels.spec import DEFAULT_INTERPRETER_LIMIT

ROOT = Path(__file__).resolve().parents[1]
MATMUL_FLOPS = 50e9
CACHE_RATE = 40e9  # B/s
DRAM_RATE = 15e9
CALL_COST_S = 20e-6  # a fixed cost per operation


def _seconds(nbytes: float, flops: float, rate: float) -> float:
    return CALL_COST_S + nbytes / rate + flops / MATMUL_FLOPS


def _stage_times(point: Point, cache_bytes: int) -> list[dict]:
    rows = []
    for cost in stage_costs(point):
        warm_rate = CACHE_RATE if cost.footprint_bytes <= cache_bytes else DRAM_RATE
        warm = 1e3 * _seconds(cost.bytes, cost.flops, warm_rate)
        cold = 1e3 * _seconds(cost.bytes, cost.flops, DRAM_RATE)
        rows.append(
            {
                "stage": cost.stage,
                "time_ms": warm,
                "time_p10_ms": 0.95 * warm,
                "time_p90_ms": 1.05 * warm,
                "repeats": 10,
                "cold_time_ms": cold,
                "cold_time_p10_ms": 0.95 * cold,
                "cold_time_p90_ms": 1.05 * cold,
                "does": cost.does,
                "bytes": cost.bytes,
                "handoff_bytes": cost.handoff_bytes,
                "footprint_bytes": cost.footprint_bytes,
                "flops": cost.flops,
                "exps": cost.exps,
            }
        )
    return rows


def _gated(point: Point, device: str) -> str | None:
    """The reasons the real gates give without measuring anything."""
    return (
        gates.no_backward(point)
        or gates.device_absent(device)
        or gates.backend_unavailable(point, device)
        or gates.interpreter_too_small(point, device, DEFAULT_INTERPRETER_LIMIT)
    )


def modelled_record(point: Point, device: str, cache_bytes: int) -> dict:
    """The record of ``point`` on the made-up machine, checked against the record schema."""
    record = base_record(point, device, seed=0)
    reason = _gated(point, device)
    if reason:
        record |= {"status": "skipped", "reason": reason, "finished_at": record["started_at"]}
        validate_record(record)
        return record
    record |= {"finished_at": record["started_at"], "wall_seconds": 0.5, "nonfinite_outputs": 0}
    record["max_abs_error"] = 0.25 if point.impl == "triton_tile_softmax" else 1e-3 if point.e == 2 else 1e-6
    inputs_and_output = 4 * point.groups * point.tokens * point.head_dim * point.e  # q, k, v, O
    record["peak_alloc_bytes"] = (record["bytes_S"] or 0) + (record["bytes_P"] or 0) + inputs_and_output
    if point.triton:
        record["time_reason"] = "not timed: Triton interpreter (correctness and counting only)"
        record["stage_time_reason"] = record["time_reason"]
        for stage in record["stages"]:
            stage["counted_bytes"] = stage["model_bytes"]
        record["traffic_counted_bytes"] = sum(s["counted_bytes"] or 0 for s in record["stages"])
    else:
        nbytes = sum(s["compulsory_bytes"] for s in record["stages"])
        footprint = nbytes if nbytes > cache_bytes else 0
        # (a backward whose path models no FLOPs: the convention's, for a made-up time)
        flops = record["flops"] if record["flops"] is not None else record["convention_flops"]
        seconds = _seconds(nbytes, flops, DRAM_RATE if footprint else CACHE_RATE)
        record |= {"time_ms": 1e3 * seconds, "time_p10_ms": 0.95e3 * seconds, "time_p90_ms": 1.05e3 * seconds}
        record["repeats"] = 10
        staged = _stage_times(point, cache_bytes)
        if staged:
            record |= {"stage_times": staged, "last_cache_bytes": cache_bytes}
    if point.backward:
        record |= _modelled_backward(record)
    validate_record(record)
    return record


def _modelled_backward(record: dict) -> dict:
    """A backward record's own fields: kept bytes as the model says (as the hooks must),
    small gradient errors, and forward + backward timed where the backward was."""
    kept = record["saved_model"] or {}
    saved = [{"shape": [n], "dtype": "uint8", "bytes": n} for n in kept.values()]
    found = {"saved_bytes": record["saved_model_bytes"], "saved": saved if kept else None}
    found["gradient_errors"] = {name: record["max_abs_error"] for name in ("dQ", "dK", "dV")}
    if record["time_ms"] is not None:
        step = 1.5 * record["time_ms"]
        found |= {"step_time_ms": step, "step_time_p10_ms": 0.95 * step, "step_time_p90_ms": 1.05 * step}
        found["step_repeats"] = 10
    return found


@cache
def _training_shape() -> dict:
    import yaml
    from snakemake.utils import validate

    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    validate(config, str(ROOT / "workflow" / "schemas" / "config.schema.yaml"))
    return config["training"]


def training_shape() -> dict:
    """The configuration's training shape as the schema fills it in (config.yaml's, if any):
    read once (a tenth of a small study's time), a copy each call."""
    return copy.deepcopy(_training_shape())


def ceilings(cache_bytes: int, device_name: str = "made-up CPU") -> dict:
    """ceilings.json of the made-up machine: one cache level of ``cache_bytes``, then DRAM."""
    return {
        "device": "cpu",
        "device_name": device_name,
        "threads": 2,
        "copy_gbps": DRAM_RATE / 1e9,
        "matmul_tflops": MATMUL_FLOPS / 1e12,
        "matmul_dtype": "float32",
        "exp_per_s": 1e9,
        "call_us": 5.0,
        "levels": [
            {"level": "L3", "bytes": cache_bytes, "footprint_bytes": cache_bytes // 2}
            | {"copy_gbps": CACHE_RATE / 1e9, "update_gbps": 1.2 * CACHE_RATE / 1e9},
            {"level": "DRAM", "bytes": None, "footprint_bytes": 4 * cache_bytes}
            | {"copy_gbps": DRAM_RATE / 1e9, "update_gbps": 1.2 * DRAM_RATE / 1e9},
        ],
    }


def planned_sweep(*configs: Path) -> list[dict]:
    """The sweep of config/config.yaml with ``configs`` laid over it (a later file's sweep
    replaces the earlier's, as Snakemake replaces a list), with the schema's defaults."""
    import yaml
    from snakemake.utils import validate

    config: dict = {}
    for path in (ROOT / "config" / "config.yaml", *configs):
        config |= yaml.safe_load(Path(path).read_text())
    validate(config, str(ROOT / "workflow" / "schemas" / "config.schema.yaml"))
    sweep = config["sweep"]
    return sweep if isinstance(sweep, list) else [sweep]


def write_results(
    results: Path, grids: list[dict], records: list[dict], found_ceilings: dict, tile_errors: list[dict]
) -> pd.DataFrame:
    """results/ as the workflow leaves it before the reports, from the records of ``grids``
    (resolved), the machine's ceilings and the tile errors; the metrics table is returned."""
    model = results / "model"
    model.mkdir(parents=True, exist_ok=True)
    metrics = write_tables(
        records,
        results / "metrics.parquet",
        results / "metrics.csv",
        results / "stages.csv",
        results / "stage_times.csv",
        backward=tuple(results / f"backward{f}.csv" for f in ("", "_stages", "_stage_times")),
    )
    write_build_table([], results / "build.csv")
    model_tables.write(
        grids, model / "matrix_sizes.csv", model / "block_traffic.csv", model / "softmax_example.json"
    )
    decode.write(grids, model / "decode.csv")
    mask_tiles.write(grids, model / "mask_tiles.csv")
    prediction_tables.write(
        grids, [], model / "gpus.csv", model / "predictions.csv", model / "predicted_kernels.csv"
    )
    write_table(results / "tile_errors.csv", "tile_errors.csv", tile_errors)
    device = found_ceilings.get("device", "cpu")
    config = {"device": device, "sweep": grids, "build": {"targets": ["sm_80", "sm_90"]}}
    env = {"device": device, "cpu": "test CPU", "cpu_count": 2, "versions": {}}
    (results / "env.json").write_text(json.dumps(env | {"config": config}))
    (results / "ceilings.json").write_text(json.dumps(found_ceilings))
    stage_predictions.write(grids, found_ceilings, model / "stage_predictions.csv")
    backward_predictions.write(
        grids,
        training_shape(),
        found_ceilings,
        model / "backward_predictions.csv",
        model / "recompute_crossing.csv",
        model / "training_memory.csv",
    )
    return metrics


def write_study(results: Path, sweep: list[dict], cache_bytes: int, device: str = "cpu") -> list[dict]:
    """results/ for ``sweep`` planned against ``cache_bytes`` on the made-up machine; the
    resolved sweep's grids are returned."""
    grids = resolved(sweep, cache_bytes)
    records = [modelled_record(p, device, cache_bytes) for p in points(grids)]
    found = ceilings(cache_bytes) if device == "cpu" else unavailable(device, "no CUDA device")
    write_results(results, grids, records, found, [])
    return grids


def write_index(results: Path, templates: list[Path]) -> str:
    """results/index.html for a study written here (no validation results, no point files)."""
    from reports.pages import index

    index.write(
        results / "env.json",
        results / "metrics.parquet",
        [],
        templates,
        results / "build.csv",
        results / "index.html",
        predictions_path=results / "model" / "predictions.csv",
        stage_times_path=results / "stage_times.csv",
        training_paths=(
            results / "backward.csv",
            results / "model" / "training_memory.csv",
            results / "model" / "recompute_crossing.csv",
        ),
    )
    return (results / "index.html").read_text()
