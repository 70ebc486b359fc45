"""The GPU study's headline numbers, printed from a results folder; every line ends with the
file(s) it was read from, in parentheses (or the one it lacks, as "missing: FILE"):

- the fused kernel against the fastest SDPA backend at T = 8,192, d = 128, bf16, per mask
  (results/metrics.csv). Each side is the fastest of several medians and the line says of
  how many: the fused kernel's launch candidates (and block shapes) on one side, PyTorch's
  SDPA backends, one median each, on the other;
- the materialized path's softmax kernel: its DRAM bandwidth against the measured copy
  bandwidth (results/profile/ncu/triton_naive.json, results/ceilings.json);
- the model's bytes against Nsight Compute's DRAM bytes where S and P far exceed L2
  (results/profile/ncu/<impl>.json: what the `profile` rules of workflow/rules/profile.smk
  write from the Nsight Compute run of each headline point, with the launch that was timed).

    python -m reports.headline [RESULTS]      (default: results)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from kernels.spec import HEADLINE, PROFILE_DIR, PROFILED, SDPA_IMPLEMENTATIONS
from reports.pages.paths import triton_path


def profile_file(results: str | Path, impl: str) -> Path:
    return Path(results, PROFILE_DIR, f"{impl}.json")


def _launch_text(row) -> str:
    """How the fused kernel's time was chosen: the fastest median of its launch candidates
    (kernels.measure.forward_run.fastest_launch), or its one median at the default launch."""
    import pandas as pd

    candidates = row.get("launch_candidates")
    timed = json.loads(candidates) if isinstance(candidates, str) and candidates else []
    if timed and not pd.isna(row.get("num_warps")):
        return (
            f"the fastest of its {len(timed)} launch candidates' medians, "
            f"{int(row['num_warps'])} warps, {int(row['num_stages'])} stages"
        )
    return "one median, at its default launch"


def fused_against_sdpa(metrics, source: str | Path = "results/metrics.csv") -> list[str]:
    """Per mask at the headline shape: the fused kernel's time against the fastest SDPA
    backend's, each side saying how it was chosen."""
    import pandas as pd

    tag = f"({source})"
    rows = metrics[(metrics[list(HEADLINE)] == pd.Series(HEADLINE)).all(axis=1) & (metrics["status"] == "ok")]
    rows = rows[rows["inputs"] == "normal"].dropna(subset=["time_ms"])
    lines = []
    name = triton_path("none", metrics) or "the fused Triton path"
    for causal, group in rows.groupby("causal"):
        fused = group[group["impl"] == name]
        sdpa = group[group["impl"].isin(SDPA_IMPLEMENTATIONS)]
        if fused.empty or sdpa.empty:
            continue
        best = sdpa.loc[sdpa["time_ms"].idxmin()]
        mine = fused.loc[fused["time_ms"].idxmin()]
        how = _launch_text(mine)
        if len(fused) > 1:
            how += f"; the fastest of {len(fused)} block shapes, {mine['block_m']:.0f}x{mine['block_n']:.0f}"
        backends = sdpa["impl"].nunique()
        theirs = f"the fastest of {backends} backends' medians, one each" if backends > 1 else "one median"
        lines.append(
            f"T=8192 d=128 bf16 {'causal' if causal else 'full'}: {name} {mine['time_ms']:.3f} ms "
            f"({mine['tflops']:.0f} TFLOP/s; {how}) vs fastest SDPA backend {best['impl']} "
            f"{best['time_ms']:.3f} ms ({best['tflops']:.0f} TFLOP/s; {theirs}): "
            f"ratio {best['time_ms'] / mine['time_ms']:.2f} {tag}"
        )
    return lines or [f"no timed GPU point of {name} and an SDPA backend at T=8192, d=128, bf16 {tag}"]


def softmax_bandwidth(
    records: list[dict], ceilings: dict | None, ceilings_source: str | Path = "results/ceilings.json"
) -> list[str]:
    """The materialized path's softmax kernel: DRAM bytes over Nsight Compute's time, against
    the copy bandwidth measured in the same study."""
    lines = []
    for record in records:
        for kernel in record.get("ncu_kernels") or []:
            if "softmax" not in kernel.get("kernel", "") or not kernel.get("ncu_time_ns"):
                continue
            moved = kernel.get("dram_read_bytes", 0) + kernel.get("dram_write_bytes", 0)
            gbps = moved / kernel["ncu_time_ns"]
            if ceilings and ceilings.get("copy_gbps"):
                against = (
                    f"{gbps / ceilings['copy_gbps']:.0%} of the measured copy bandwidth "
                    f"({ceilings['copy_gbps']:,.0f} GB/s)"
                )
                files = f"{record['source']}, {ceilings_source}"
            else:
                against = "no measured copy bandwidth to hold it against"
                files = f"{record['source']}; missing: {ceilings_source}"
            lines.append(
                f"{record['impl']} softmax kernel: {gbps:,.0f} GB/s of DRAM traffic, {against} ({files})"
            )
    if lines:
        return lines
    found = [r for r in records if r.get("stores") == "SP"]  # the materialized path's
    if found:
        why = found[0].get("dram_reason") or "no softmax kernel among its profiled kernels"
        return [f"no Nsight Compute figure of the materialized path's softmax: {why} ({found[0]['source']})"]
    return []  # no record of the materialized path: load_profiles names the missing file


def model_against_dram(records: list[dict]) -> list[str]:
    """Per profiled point: Nsight Compute's DRAM bytes against the model's bytes as issued."""
    lines = []
    for r in records:
        launch = f", launch {r['launch'][0]},{r['launch'][1]} as timed" if r.get("launch") else ""
        if r.get("dram_bytes") and r.get("traffic_model_bytes"):
            lines.append(
                f"{r['impl']} T={r['tokens']}{launch}: DRAM {r['dram_bytes'] / 2**20:,.0f} MiB "
                f"(Nsight Compute) vs model {r['traffic_model_bytes'] / 2**20:,.0f} MiB as issued: "
                f"ratio {r['dram_bytes'] / r['traffic_model_bytes']:.2f} ({r['source']})"
            )
        else:
            why = r.get("dram_reason") or "no model bytes in its record"
            lines.append(
                f"{r['impl']} T={r.get('tokens')}: no Nsight Compute DRAM bytes: {why} ({r['source']})"
            )
    return lines or ["no Nsight Compute DRAM bytes in these records"]


def load_profiles(results: str | Path) -> tuple[list[dict], list[str]]:
    """The profile records of the headline points, each with the file it came from, and a
    line for each one that is missing or cannot be read."""
    records, missing = [], []
    for impl in PROFILED:
        path = profile_file(results, impl)
        try:
            record = json.loads(path.read_text())
        except FileNotFoundError:
            missing.append(
                f"no Nsight Compute record of {impl}, scripts/gpu_profile.sh writes it (missing: {path})"
            )
            continue
        except (OSError, ValueError) as err:
            missing.append(f"no Nsight Compute record of {impl}: {err} (unreadable: {path})")
            continue
        records.append(record | {"impl": record.get("impl", impl), "source": str(path)})
    return records, missing


def read_ceilings(path: Path) -> dict | None:
    """The ceilings held to their schema, as every reader holds them; None (the lines then
    name the file as missing) when absent or damaged, the damage printed."""
    from kernels.io.records import DamagedRecordError, read_leaf

    if not path.exists():
        return None
    try:
        return read_leaf(path, "ceilings")
    except DamagedRecordError as err:
        print(f"not used: {err}")
        return None


def lines(results: str | Path = "results") -> list[str]:
    import pandas as pd

    table = Path(results, "metrics.csv")
    if table.exists():
        found = fused_against_sdpa(pd.read_csv(table), table)
    else:
        found = [f"no timed GPU point (missing: {table})"]
    ceilings_file = Path(results, "ceilings.json")
    ceilings = read_ceilings(ceilings_file)
    records, missing = load_profiles(results)
    if records:
        found += softmax_bandwidth(records, ceilings, ceilings_file) + model_against_dram(records)
    return found + missing


def main(results: str = "results") -> None:
    for line in lines(results):
        print(line)


if __name__ == "__main__":
    main(*sys.argv[1:2])
