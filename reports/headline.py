"""The GPU study's headline numbers, printed from a results folder (and the Nsight Compute
records of the two headline points): the fused kernel against the fastest SDPA backend at
T = 8,192, d = 128, bf16; the materialized path's softmax bandwidth against the measured copy
bandwidth; the model's bytes against Nsight Compute's DRAM bytes where S and P far exceed L2.

    python -m reports.headline results [docs/results/<gpu>/ncu]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

from kernels.spec import SDPA_IMPLEMENTATIONS

HEADLINE = {"tokens": 8192, "head_dim": 128, "dtype": "bfloat16"}


def fused_against_sdpa(metrics: pd.DataFrame) -> list[str]:
    rows = metrics[(metrics[list(HEADLINE)] == pd.Series(HEADLINE)).all(axis=1) & (metrics["status"] == "ok")]
    rows = rows[rows["inputs"] == "normal"]
    lines = []
    for causal, group in rows.groupby("causal"):
        fused = group[group["impl"] == "triton_flash"]
        sdpa = group[group["impl"].isin(SDPA_IMPLEMENTATIONS)].dropna(subset=["time_ms"])
        if fused.empty or sdpa.empty:
            continue
        best = sdpa.loc[sdpa["time_ms"].idxmin()]
        mine = fused.loc[fused["time_ms"].idxmin()]
        lines.append(
            f"T=8192 d=128 bf16 {'causal' if causal else 'full'}: triton_flash {mine['time_ms']:.3f} ms "
            f"({mine['tflops']:.0f} TFLOP/s) vs fastest SDPA backend {best['impl']} {best['time_ms']:.3f} ms "
            f"({best['tflops']:.0f} TFLOP/s): ratio {best['time_ms'] / mine['time_ms']:.2f}"
        )
    return lines or ["no timed GPU point at T=8192, d=128, bf16 in these results"]


def softmax_bandwidth(records: list[dict], ceilings: dict) -> list[str]:
    lines = []
    for record in records:
        for kernel in record.get("ncu_kernels") or []:
            if "softmax" in kernel.get("kernel", "") and kernel.get("ncu_time_ns"):
                moved = kernel.get("dram_read_bytes", 0) + kernel.get("dram_write_bytes", 0)
                gbps = moved / kernel["ncu_time_ns"]
                lines.append(
                    f"{record['impl']} softmax kernel: {gbps:,.0f} GB/s of DRAM traffic, "
                    f"{gbps / ceilings['copy_gbps']:.0%} of the measured copy bandwidth "
                    f"({ceilings['copy_gbps']:,.0f} GB/s)"
                )
    return lines or ["no Nsight Compute record of the materialized path"]


def model_against_dram(records: list[dict]) -> list[str]:
    return [
        f"{r['impl']} T={r['tokens']}: DRAM {r['dram_bytes'] / 2**20:,.0f} MiB (Nsight Compute) vs "
        f"model {r['traffic_model_bytes'] / 2**20:,.0f} MiB as issued: ratio "
        f"{r['dram_bytes'] / r['traffic_model_bytes']:.2f}"
        for r in records
        if r.get("dram_bytes") and r.get("traffic_model_bytes")
    ] or ["no Nsight Compute DRAM bytes in these records"]


def main(results: str, ncu_dir: str | None = None) -> None:
    metrics = pd.read_csv(Path(results, "metrics.csv"))
    ceilings = json.loads(Path(results, "ceilings.json").read_text())
    records = [json.loads(p.read_text()) for p in sorted(Path(ncu_dir).glob("*.json"))] if ncu_dir else []
    for line in (
        fused_against_sdpa(metrics) + softmax_bandwidth(records, ceilings) + model_against_dram(records)
    ):
        print(line)


if __name__ == "__main__":
    main(*sys.argv[1:3])
