"""Performance page: the speed-up from fusing in the device's native type first, then time and
throughput against T, every speed-up, the fused kernel against PyTorch's fastest SDPA
backend, and the achieved bandwidth against the machine's measured ceilings. On a CPU only
the PyTorch paths are timed, and 2-byte CPU timings are labelled with what slows them.
Speed-ups, TFLOP/s and GB/s come from the tables (kernels.io.derived); this page only
selects and draws them."""

from __future__ import annotations

import pandas as pd
import seaborn as sns

from kernels.spec import SDPA_IMPLEMENTATIONS
from reports.pages.common import (
    POINT_COLUMNS,
    busy_note,
    device_label,
    load,
    names,
    number,
    ok,
    sections,
    show,
    why_untimed,
)
from reports.pages.paths import triton_path
from reports.pages.rates import BYTES, FLOPS, within_ceilings

__all__ = [
    "busy_note",
    "load",
    "show",
    "empty",
    "why_untimed",
    "why_no_pair",
    "why_no_sdpa",
    "device_label",
    "timed",
    "headline",
    "slow_dtype_note",
    "time_figure",
    "speedup_table",
    "bandwidth",
    "RATE_COLUMNS",
    "within_ceilings",
    "ceilings",
    "compile_table",
    "why_no_compile",
]

SHAPE = ["batch", "heads", "tokens", "head_dim", "causal", "inputs"]
NATIVE = {"cpu": "float32"}  # the dtype a device's matrix products are fast in (GPU: any)
# what each section shows, for the sentence it shows instead when the study has nothing for it
empty = sections(
    {
        "headline": "the speed-up from fusing: each fused implementation's time against its "
        "materialized twin's on the same inputs, in the device's native dtype",
        "time": "time per call and TFLOP/s against T, a panel per dtype and head dimension",
        "speedups": "every speed-up from fusing, in every dtype timed",
        "best sdpa": "per shape, the fastest of PyTorch's SDPA backends, and the fused Triton "
        "kernel against it where it was timed",
        "bandwidth": "each timed point's achieved bandwidth and throughput",
        "roofline": "each timed point under the roofline of this machine's measured ceilings, "
        "with the bound that applies to it and the fraction of it reached",
        "compile": "each compiled path's first call per shape and mask (its compile, or a load "
        "from the compiler's cache), timed apart, against one timed call",
    }
)


def timed(metrics: pd.DataFrame) -> pd.DataFrame:
    return ok(metrics).dropna(subset=["time_ms"])


def _fused(metrics: pd.DataFrame) -> pd.DataFrame:
    """Timed points of implementations that do not store S and P, with their speed-up."""
    data = timed(metrics)
    return data[(data["twin"] != data["impl"]) & data["speedup_vs_materialized"].notna()]


def why_no_pair(metrics: pd.DataFrame, device: str | None = None) -> str | None:
    """Why no fused implementation was timed beside its materialized twin (in the device's
    native dtype when ``device`` is given), or None when one was."""
    untimed = why_untimed(metrics)
    if untimed:
        return untimed
    pairs = _fused(metrics)
    native = NATIVE.get(device) if device else None
    if not pairs.empty and native and (pairs["dtype"] != native).all():
        return (
            f"no pair was timed in {native}, this device's native dtype (pairs timed in "
            f"{names(pairs['dtype'])} are in the table of every speed-up)"
        )
    if not pairs.empty:
        return None
    found = timed(metrics)
    return (
        "this study timed no fused implementation beside its materialized twin on the same "
        f"inputs (timed: {names(found['impl'])} in {names(found['dtype'])})"
    )


def why_no_sdpa(metrics: pd.DataFrame) -> str | None:
    untimed = why_untimed(metrics)
    if untimed:
        return untimed
    found = timed(metrics)
    found = found[found["inputs"] == "normal"]
    if found["impl"].isin(SDPA_IMPLEMENTATIONS).any():
        return None
    return f"this study timed no SDPA implementation (timed: {names(found['impl'])})"


def headline(metrics: pd.DataFrame, device: str) -> str:
    """The speed-up from fusing in the device's native dtype, largest T first."""
    native = NATIVE.get(device)
    data = _fused(metrics)
    if native:
        data = data[data["dtype"] == native]
    if data.empty:
        return empty("headline", why_no_pair(metrics, device))
    lines = []
    for (impl, twin, dtype), group in data.groupby(["impl", "twin", "dtype"]):
        best = group.groupby(SHAPE)["speedup_vs_materialized"].max().reset_index()
        best = best.sort_values(["tokens", "causal"], ascending=[False, False])
        cases = "; ".join(
            f"T = {r.tokens:,} {'causal' if r.causal else 'not causal'}: **{r.speedup_vs_materialized:.1f}×**"
            for r in best.itertuples()
        )
        lines.append(f"- **{impl}** against **{twin}**, {dtype}: {cases}")
    return (
        f"**Speed-up from fusing** (time of the materialized twin over the fused time, same "
        f"inputs, {native or 'every dtype'}):\n\n" + "\n".join(lines)
    )


def slow_dtype_note(metrics: pd.DataFrame, device: str) -> str | None:
    """On a CPU, 2-byte timings against float32 ones of the same implementation and shape:
    how much slower, from the data, and why."""
    if device != "cpu":
        return None
    data = timed(metrics)
    half = data[data["dtype"].isin(["float16", "bfloat16"])]
    if half.empty:
        return None
    single = data[data["dtype"] == "float32"].groupby(["impl"] + SHAPE)["time_ms"].min()
    ratios = half.join(single.rename("float32_ms"), on=["impl"] + SHAPE).dropna(subset=["float32_ms"])
    text = (
        "**About the 2-byte timings on this CPU:** PyTorch's CPU matrix products have no fast "
        "float16 or bfloat16 path on most processors, so these times include converting "
        "elements and slow kernels; their speed-ups say more about the dtype than about fusing. "
        "Read the float32 ones."
    )
    if ratios.empty:
        return text
    ratios = ratios.assign(slower=ratios["time_ms"] / ratios["float32_ms"])
    per_impl = ratios.groupby(["impl", "dtype"])["slower"].median()
    found = "; ".join(f"{impl} {dtype}: {x:.1f}×" for (impl, dtype), x in per_impl.items())
    return text + f" Measured here, the median 2-byte time over the float32 time of the same point: {found}."


def _case(row) -> str:
    blocks = "" if pd.isna(row["block_m"]) else f" {int(row['block_m'])}×{int(row['block_n'])}"
    return f"{row['impl']}{blocks}"


def time_figure(metrics: pd.DataFrame, value: str, ylabel: str, device: str):
    data = timed(metrics)
    data = data[data["inputs"] == "normal"]
    if data.empty:
        return None
    data = data.assign(case=data.apply(_case, axis=1))
    grid = sns.relplot(
        data=data,
        x="tokens",
        y=value,
        hue="case",
        style="causal",
        kind="line",
        markers=True,
        col="dtype",
        row="head_dim",
        height=4,
        aspect=1.2,
    )
    grid.set(yscale="log", ylabel=ylabel, xlabel="tokens T")
    for ax in grid.axes.flat:
        ax.set_xscale("log", base=2)
    grid.figure.suptitle(f"{ylabel} against T — {device}", y=1.03)
    return grid.figure


def speedup_table(metrics: pd.DataFrame) -> pd.DataFrame:
    columns = SHAPE[:4] + ["dtype", "causal", "inputs", "impl", "twin", "time_ms", "speedup_vs_materialized"]
    data = _fused(metrics)[columns]
    return data.sort_values(["dtype", "impl", "tokens", "causal"]).reset_index(drop=True)


def against_best_sdpa(metrics: pd.DataFrame) -> pd.DataFrame:
    """Per shape, dtype and mask: PyTorch's fastest SDPA backend (every forced one and its own
    pick) and the fused Triton kernel where it was timed, with the ratio of their times."""
    data = timed(metrics)
    data = data[data["inputs"] == "normal"]
    keys = [*SHAPE[:4], "dtype", "causal"]
    sdpa = data[data["impl"].isin(SDPA_IMPLEMENTATIONS)]
    if sdpa.empty:
        return pd.DataFrame()
    best = sdpa.loc[sdpa.groupby(keys)["time_ms"].idxmin(), [*keys, "impl", "time_ms"]]
    best = best.rename(columns={"impl": "fastest_sdpa", "time_ms": "sdpa_ms"})
    name = triton_path("none", metrics) or "fused"
    fused = data[data["impl"] == name].groupby(keys)["time_ms"].min().rename(f"{name}_ms")
    table = best.join(fused, on=keys)
    table[f"speedup_of_{name}"] = table["sdpa_ms"] / table[f"{name}_ms"]
    return table.sort_values(keys).reset_index(drop=True)


# the rate columns of this page's tables, for reports.pages.rates.within_ceilings: column →
# (kind, its unit in per-second multiples)
RATE_COLUMNS = {"gbps": (BYTES, 1e9), "tflops": (FLOPS, 1e12)}


def bandwidth(metrics: pd.DataFrame) -> pd.DataFrame:
    columns = [*POINT_COLUMNS, "block_m", "block_n", "time_ms", "gbps", "tflops"]
    return timed(metrics)[columns].sort_values(["impl", "dtype", "tokens"]).reset_index(drop=True)


def measured(found: dict) -> bool:
    """Whether the ceilings hold rates (a device the machine lacks has none, and a reason)."""
    return found.get("copy_gbps") is not None and found.get("matmul_tflops") is not None


def roofline(metrics: pd.DataFrame, found: dict) -> pd.DataFrame:
    """Each timed point against the machine's measured ceilings: the bound that applies at
    its arithmetic intensity (copy bandwidth below the ridge, matrix-product rate above) and
    the fraction of that bound it reached."""
    data = timed(metrics)
    data = data[data["inputs"] == "normal"]
    if not measured(found):
        data = data.iloc[0:0]  # no roof to hold them against
        found = {"matmul_tflops": 1.0, "copy_gbps": 1.0}
    peak, copy = found["matmul_tflops"] * 1e12, found["copy_gbps"] * 1e9
    ridge = peak / copy
    memory_bound = data["intensity_flop_per_byte"] < ridge
    attainable = (data["intensity_flop_per_byte"] * copy).where(memory_bound, peak)
    fraction = (data["tflops"] * 1e12 / attainable).rename("fraction_of_bound")
    bound = memory_bound.map({True: "memory", False: "compute"}).rename("bound")
    columns = [*POINT_COLUMNS, "mask", "time_ms", "floor_ms", "intensity_flop_per_byte", "gbps", "tflops"]
    data = data.reindex(columns=list(dict.fromkeys([*data.columns, *columns])))  # older records lack some
    table = pd.concat([data[columns], bound, fraction], axis=1)
    return table.sort_values(["impl", "dtype", "tokens", "causal"]).reset_index(drop=True)


def roofline_figure(table: pd.DataFrame, found: dict):
    """Achieved FLOP/s against arithmetic intensity, under the roof the ceilings draw."""
    import matplotlib.pyplot as plt
    import numpy as np

    if table.empty:
        return None
    peak, copy = found["matmul_tflops"] * 1e3, found["copy_gbps"]  # GFLOP/s, GB/s
    ridge = peak / copy
    intensity = table["intensity_flop_per_byte"]
    low, high = min(intensity.min(), ridge) / 4, max(intensity.max(), ridge) * 4
    x = np.geomspace(low, high, 200)
    fig, ax = plt.subplots()
    ax.plot(x, np.minimum(x * copy, peak), color="black", lw=1.5, label="roof: measured ceilings")
    ax.axvline(ridge, color="grey", ls=":", lw=1, label=f"ridge {ridge:,.1f} FLOP/B")
    label = (table["impl"] + " " + table["dtype"]).rename("path")
    sns.scatterplot(x=intensity, y=table["tflops"] * 1e3, hue=label, style=label, s=60, ax=ax)
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="FLOPs per byte moved (model)",
        ylabel="achieved GFLOP/s",
        title=f"Roofline of this machine ({found['device_name']}, {found['matmul_dtype']} product)",
    )
    ax.legend(fontsize=7)
    return fig


def roofline_summary(table: pd.DataFrame, found: dict, why: str | None = None) -> str:
    """Per implementation, which bound applies and the best fraction of it reached; ``why``:
    why no point was timed, when none was (why_untimed)."""
    if table.empty:
        return empty(
            "roofline", why if measured(found) else f"no ceilings were measured: {found.get('reason')}"
        )
    lines = []
    for (impl, dtype), group in table.groupby(["impl", "dtype"]):
        # the largest T, not causal where timed so
        last = group.sort_values(["tokens", "causal"], ascending=[True, False]).iloc[-1]
        mask = "causal" if last["causal"] else "not causal"
        lines.append(
            f"- **{impl}** ({dtype}): {last['bound']}-bound at the largest T (T = {last['tokens']:,}, "
            f"{mask}, {number(last['intensity_flop_per_byte'])} FLOP/B), reaching "
            f"{number(100 * last['fraction_of_bound'], 2)}% of that bound; best over the sweep "
            f"{number(100 * group['fraction_of_bound'].max(), 2)}%."
        )
    ridge = found["matmul_tflops"] * 1e3 / found["copy_gbps"]
    return (
        f"The ridge of this machine is at {ridge:,.1f} FLOP per byte: a kernel doing fewer "
        "FLOPs per byte is bounded by the copy bandwidth, one doing more by the matrix-product "
        "rate. The ceilings are rates this machine reached (one copy, one matrix product), not "
        "its datasheet peaks, and the bytes are the model's (as issued where modelled, else "
        "compulsory), so a fraction a little above 100% is possible.\n\n" + "\n".join(lines)
    )


def ceilings(found: dict) -> str:
    """The machine's measured rates, for reading the bandwidth and throughput above."""
    if not measured(found):
        return f"**No ceilings measured here:** {found.get('reason') or 'the ceilings hold no rates'}."
    return (
        f"**Measured ceilings of this machine** ({found['device_name']}, {found['threads']} "
        f"threads): memory copy {found['copy_gbps']:.1f} GB/s; {found['matmul_dtype']} matrix "
        f"product {found['matmul_tflops'] * 1e3:,.0f} GFLOP/s. A point's GB/s above the copy rate "
        "means its bytes were served by caches, not memory."
    )


def compile_table(metrics: pd.DataFrame) -> pd.DataFrame:
    """The points of a path compiled per shape and mask: its first call in the measuring
    process (traced and compiled, or loaded from Inductor's cache) beside one timed call."""
    rows = ok(metrics)
    rows = rows[rows["compile_seconds"].notna()] if "compile_seconds" in rows else rows.iloc[0:0]
    table = pd.DataFrame(
        {
            "path": rows["impl"],
            "T": rows["tokens"],
            "dtype": rows["dtype"],
            "mask": rows["mask"],
            "first call s": rows["compile_seconds"],
            "timed call ms": rows["time_ms"],
            "first call / timed call": rows["compile_seconds"] * 1e3 / rows["time_ms"],
        }
    )
    return table.sort_values(["path", "T", "mask"], ignore_index=True)


def why_no_compile(metrics: pd.DataFrame) -> str:
    """Why the compile table is empty: nothing was timed, or no path of the study compiles."""
    if timed(metrics).empty:
        return why_untimed(metrics)
    return "no point of this study is of a path compiled per shape and mask (its registration's compiles)"
