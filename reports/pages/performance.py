"""Performance page: time per call and throughput against T, the gain from fusing, and the
achieved bandwidth. On a CPU only the PyTorch paths are timed."""

from __future__ import annotations

import pandas as pd
import seaborn as sns

from reports.pages.common import device_label, load, ok

__all__ = ["load", "device_label", "timed", "time_figure", "speedups", "bandwidth", "ceilings"]

PAIRS = [("triton_flash", "triton_naive"), ("sdpa", "torch_naive")]  # (fused, materialized)


def timed(metrics: pd.DataFrame) -> pd.DataFrame:
    return ok(metrics).dropna(subset=["time_ms"])


def time_figure(metrics: pd.DataFrame, value: str, ylabel: str, device: str):
    data = timed(metrics)
    if data.empty:
        return None
    data = data.assign(
        case=data.apply(
            lambda r: (
                f"{r['impl']}"
                + ("" if pd.isna(r["block_m"]) else f" {int(r['block_m'])}×{int(r['block_n'])}")
            ),
            axis=1,
        )
    )
    grid = sns.relplot(
        data=data,
        x="tokens",
        y=value,
        hue="case",
        style="causal",
        kind="line",
        markers=True,
        col="head_dim",
        height=4,
        aspect=1.2,
    )
    grid.set(yscale="log", ylabel=ylabel, xlabel="tokens T")
    for ax in grid.axes.flat:
        ax.set_xscale("log", base=2)
    grid.figure.suptitle(f"{ylabel} against T — {device}", y=1.03)
    return grid.figure


def speedups(metrics: pd.DataFrame, fast: str, slow: str) -> pd.DataFrame:
    key = ["batch", "heads", "tokens", "head_dim", "dtype", "causal"]
    data = timed(metrics)
    a = data[data["impl"] == fast].groupby(key)["time_ms"].min()
    b = data[data["impl"] == slow].groupby(key)["time_ms"].min()
    joined = pd.concat({f"{fast} ms": a, f"{slow} ms": b}, axis=1).dropna()
    joined["speed-up"] = joined[f"{slow} ms"] / joined[f"{fast} ms"]
    return joined.reset_index()


def bandwidth(metrics: pd.DataFrame) -> pd.DataFrame:
    columns = [
        "impl",
        "tokens",
        "head_dim",
        "dtype",
        "causal",
        "block_m",
        "block_n",
        "time_ms",
        "gbps",
        "tflops",
    ]
    return timed(metrics)[columns].sort_values(["impl", "tokens"]).reset_index(drop=True)


def ceilings(env: dict) -> str:
    found = env.get("ceilings")
    if not found:
        return (
            "No machine ceilings (copy bandwidth, matrix-product rate) were measured in this "
            "run, so no roofline is drawn."
        )
    return (
        f"Measured ceilings: copy {found['copy_gbps']:.0f} GB/s, bf16 matrix product "
        f"{found['matmul_tflops']:.0f} TFLOP/s."
    )
