"""Sentences and small computations the report notebooks show, each built from the data."""

from __future__ import annotations

import pandas as pd


def device_label(env: dict) -> str:
    if env.get("device") == "cuda":
        return f"GPU: {env.get('gpu_name')} (driver {env.get('driver')}, CUDA {env.get('cuda')})"
    return f"CPU: {env.get('cpu')} ({env.get('cpu_count')} cores) — CPU timings, not GPU ones"


def run_summary(metrics: pd.DataFrame, env: dict) -> str:
    counts = metrics["status"].value_counts()
    versions = env.get("versions", {})
    commit = (env.get("git") or {}).get("commit") or "unknown"
    lines = [f"**Run:** {device_label(env)}; torch {versions.get('torch')}, triton "
             f"{versions.get('triton')}; commit `{commit[:12]}`; config `{env.get('config_hash')}`. "
             f"{len(metrics)} points: " + ", ".join(f"{n} {s}" for s, n in counts.items()) + "."]
    bad = metrics[metrics["status"] != "ok"]
    if not bad.empty:
        reasons = bad.groupby(["status", "reason"]).size().reset_index(name="points")
        lines.append("\n**Warning: not every point ran.**\n")
        lines += [f"- {r.points} {r.status}: {r.reason}" for r in reasons.itertuples()]
    return "\n".join(lines)


def quadrupling(bytes_by_tokens: pd.Series) -> str:
    ratios = (bytes_by_tokens / bytes_by_tokens.shift(1)).dropna()
    steps = (pd.Series(bytes_by_tokens.index).diff().dropna() > 0).all()
    low, high = ratios.min(), ratios.max()
    return (f"From one T to the next (each step doubles T{'' if steps else ' or more'}), a "
            f"matrix grows by a factor of {low:g}" + (f" to {high:g}." if high != low else "."))


def counted_summary(counted: pd.DataFrame) -> str:
    if counted.empty:
        return "No point was counted in the interpreter (a GPU run, or no Triton point)."
    exact = int((counted["traffic_counted_bytes"] == counted["traffic_model_bytes"]).sum())
    return (f"{exact} of {len(counted)} counted points moved exactly the bytes the model "
            f"predicts (ratios from {counted['counted / model'].min():g} to "
            f"{counted['counted / model'].max():g}).")


def no_dram(metrics: pd.DataFrame, env: dict) -> str:
    reasons = metrics["dram_reason"].dropna().unique()
    why = "; ".join(reasons) if len(reasons) else "no DRAM measurement in these metrics"
    return f"No DRAM measurement to show: {why}."


def ceilings(env: dict) -> str:
    found = env.get("ceilings")
    if not found:
        return ("No machine ceilings (copy bandwidth, matrix-product rate) were measured in this "
                "run, so no roofline is drawn.")
    return (f"Measured ceilings: copy {found['copy_gbps']:.0f} GB/s, bf16 matrix product "
            f"{found['matmul_tflops']:.0f} TFLOP/s.")


def report_device() -> str:
    """Where the report's own small computations run: the GPU of the machine rendering the
    report if it has one, else its CPU through Triton's interpreter (set before any kernel)."""
    import torch

    from kernels import runtime

    device = "cuda" if torch.cuda.is_available() else "cpu"
    runtime.set_interpret(device == "cpu")
    return device


def tile_errors(device: str, tokens: list[int], blocks: list[int], head_dim: int = 32,
                seed: int = 0) -> pd.DataFrame:
    """Max error of the tile-local and the fused kernel against float64, over T and BLOCK_N."""
    import torch

    from kernels.inputs import make_qkv
    from kernels.reference import reference_float64
    from kernels.registry import attention

    rows = []
    for i, t in enumerate(tokens):
        q, k, v = make_qkv(1, 1, t, head_dim, torch.float32, device, seed + i)
        ref = reference_float64(q, k, v, True)
        for b in blocks:
            for impl in ("triton_tile_softmax", "triton_flash"):
                out = attention(q, k, v, impl=impl, causal=True, block_m=16, block_n=b)
                rows.append({"impl": impl, "tokens": t, "block_n": b,
                             "error": (out.double() - ref).abs().max().item()})
    return pd.DataFrame(rows)
