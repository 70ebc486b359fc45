"""Figures derived from measured ones, computed here once for every implementation (as
tritonbench derives its metrics for all backends): throughput from the model's FLOPs,
bandwidth from the model's bytes, and the speed-up from fusing, the time of the materialized
twin (each record's ``twin``, from its implementation's registration) on the same inputs
over the point's own time. A twin measured with several block shapes counts with its fastest."""

from __future__ import annotations

import pandas as pd

# What makes two points' inputs the same: the shape, the dtype, the mask, what q, k, v hold
# and the device (the seed is the run's).
SAME_INPUTS = ["batch", "heads", "tokens", "head_dim", "dtype", "causal", "mask", "inputs", "device"]


def throughput(metrics: pd.DataFrame) -> pd.DataFrame:
    """TFLOP/s and GB/s of every timed point (the model's bytes: as issued where the model
    knows them, else the compulsory ones), and the share of this machine's floor its time
    reached (the record's floor_ms over its time: 1 at the floor)."""
    seconds = metrics["time_ms"] / 1e3
    moved = metrics["traffic_model_bytes"].fillna(metrics["traffic_compulsory_bytes"])
    return metrics.assign(
        tflops=metrics["flops"] / seconds / 1e12,
        gbps=moved / seconds / 1e9,
        floor_share=metrics.get("floor_ms", float("nan")) / metrics["time_ms"],
    )


def speedups(metrics: pd.DataFrame) -> pd.DataFrame:
    """``twin`` and ``speedup_vs_materialized`` for every point (missing where either is untimed)."""
    twin = metrics["twin"]
    timed = metrics[metrics["status"] == "ok"].dropna(subset=["time_ms"])
    fastest = timed.groupby(["impl"] + SAME_INPUTS, dropna=False)["time_ms"].min().rename("twin_time_ms")
    keyed = metrics[SAME_INPUTS].assign(impl=twin)
    twin_ms = keyed.join(fastest, on=["impl"] + SAME_INPUTS)["twin_time_ms"]
    own_ms = metrics["time_ms"].where(metrics["status"] == "ok")
    return metrics.assign(twin=twin, speedup_vs_materialized=twin_ms / own_ms)


def derive(metrics: pd.DataFrame) -> pd.DataFrame:
    """Every derived column, added to the table of points."""
    return speedups(throughput(metrics))


def stage_rates(stages: pd.DataFrame) -> pd.DataFrame:
    """Per timed stage (kernels.io.tables.timed_stage_table): achieved GB/s (the model's bytes
    over the warm median, and over the cold one), product TFLOP/s, exponentials per second,
    warm over cold speed (the cold median over the warm one: above 1 where the caches served
    the hand-off), the stage's share of the whole call, and S + P over the largest cache."""
    warm = (stages["time_ms"] / 1e3).where(stages["time_ms"] > 0)
    cold = stages["cold_time_ms"] / 1e3
    return stages.assign(
        gbps=stages["bytes"] / warm / 1e9,
        cold_gbps=stages["bytes"] / cold / 1e9,
        tflops=stages["flops"] / warm / 1e12,
        exps_per_s=stages["exps"] / warm,
        warm_speedup=cold / warm,
        share_of_call=stages["time_ms"] / stages["call_time_ms"],
        sp_over_cache=(stages["bytes_S"] + stages["bytes_P"]) / stages["last_cache_bytes"],
    )
