"""Training page: store or recompute. What each path keeps from its forward for the backward
(measured against the model), what that comes to at a training shape, the backward's T×T
traffic (counted) against its floor, the products the fused backward adds, the times (this
machine measured, GPUs predicted) and where recomputing P beats storing it, per target.
Reads results/backward*.csv and results/model/{backward_predictions,recompute_crossing,
training_memory}.csv; every sentence is computed from them."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from reports.pages.common import MIB, load, names, number, ok, sections, show, status_counts
from reports.pages.paths import triton_path
from reports.pages.rates import BYTES, FLOPS, within_ceilings

__all__ = [
    "RATE_COLUMNS",
    "within_ceilings",
    "load",
    "show",
    "empty",
    "why_no_backward",
    "kept_table",
    "kept_finding",
    "kept_figure",
    "training_table",
    "training_finding",
    "traffic_table",
    "traffic_finding",
    "products_table",
    "products_finding",
    "time_table",
    "stage_time_table",
    "predicted_table",
    "time_finding",
    "crossing_table",
    "crossing_finding",
    "crossing_figure",
    "finding",
]

GIB = 1 << 30
MATRIX_TENSORS = ("P", "DP", "DS", "S")  # the T×T tensors a backward moves
CASE_WORDS = {
    "cold": "every byte from DRAM",
    "warm_low": "the caches serving all of the hand-off that fits",
    "warm_high": "the caches serving the least they would",
}
empty = sections(
    {
        "kept": "the bytes each path kept from its forward for its backward, measured and modelled",
        "traffic": "the backward kernels' counted bytes, their T×T part and the compulsory floor",
        "products": "the FLOPs each backward executes against the field's convention",
        "time": "the backward's measured time alone and with its forward",
        "stages": "the materialized backward's stages timed warm and cold",
        "predicted": "each backward's predicted time on the GPUs and this machine",
        "crossing": "where the recomputing backward stops being slower than the storing one",
    }
)


def _point(r: pd.Series) -> str:
    causal = ", causal" if bool(r["causal"]) else ""
    return f"T = {int(r['tokens']):,}, d = {int(r['head_dim'])}, {r['dtype']}{causal}"


def why_no_backward(backward: pd.DataFrame) -> str | None:
    """Why no backward point has anything to show, or None when one ran."""
    if backward.empty:
        return "this study has no backward point (sweep.pass: [backward] adds them)"
    if not (backward["status"] == "ok").any():
        return f"no backward point ran ({status_counts(backward)}; the index's warnings say why)"
    return None


NO_MODEL = "no model"  # a table's cell where the path registers no model to compare with


def equals_model(measured: pd.Series, model: pd.Series) -> pd.Series:
    """Whether each measurement equals its model, or NO_MODEL where the path has none."""
    return (measured == model).astype(object).where(model.notna(), NO_MODEL)


# --- what is kept --------------------------------------------------------------------------


def kept_table(backward: pd.DataFrame) -> pd.DataFrame:
    rows = ok(backward).dropna(subset=["saved_bytes"])
    return pd.DataFrame(
        {
            "impl": rows["impl"],
            "T": rows["tokens"],
            "d": rows["head_dim"],
            "dtype": rows["dtype"],
            "causal": rows["causal"],
            "kept, MiB (measured)": rows["saved_bytes"] / MIB,
            "kept, MiB (model)": rows["saved_model_bytes"] / MIB,
            "measured = model": equals_model(rows["saved_bytes"], rows["saved_model_bytes"]),
        }
    ).sort_values(["T", "impl"], ignore_index=True)


def kept_finding(backward: pd.DataFrame) -> str:
    rows = ok(backward).dropna(subset=["saved_bytes"])
    if rows.empty:
        return empty("kept", why_no_backward(backward))
    modelled = rows.dropna(subset=["saved_model_bytes"])
    agree = int((modelled["saved_bytes"] == modelled["saved_model_bytes"]).sum())
    text = (
        f"Measured with saved-tensor hooks, the bytes kept equal the model's at {agree} of the "
        f"{len(modelled)} points it models"
    )
    if len(rows) > len(modelled):
        text += f" ({names(rows[rows['saved_model_bytes'].isna()]['impl'])}: no model)"
    paths = rows.groupby("tokens")["impl"].nunique()
    compared = paths[paths > 1]
    if compared.empty:  # one path per length: nothing to set beside it
        one = rows.sort_values("tokens").iloc[-1]
        return text + f". At {_point(one)} {one['impl']} keeps {number(one['saved_bytes'] / MIB)} MiB."
    longest = rows[rows["tokens"] == compared.index.max()].sort_values("saved_bytes")
    least, most = longest.iloc[0], longest.iloc[-1]
    return (
        text + f". At the longest T measured for more than one path ({_point(most)}) {most['impl']} "
        f"keeps {number(most['saved_bytes'] / MIB)} MiB and {least['impl']} "
        f"{number(least['saved_bytes'] / MIB)} MiB, {number(most['saved_bytes'] / least['saved_bytes'])} "
        "times less."
    )


def kept_figure(backward: pd.DataFrame):
    rows = ok(backward).dropna(subset=["saved_bytes"])
    if rows.empty:
        return None
    fig, ax = plt.subplots()
    rows = rows.assign(MiB=rows["saved_bytes"] / MIB)
    sns.lineplot(data=rows, x="tokens", y="MiB", hue="impl", style="dtype", marker="o", ax=ax)
    ax.set(xscale="log", yscale="log", xlabel="T", ylabel="kept for the backward, MiB (measured)")
    ax.set_title("What the forward keeps for the backward")
    return fig


def training_table(training: pd.DataFrame) -> pd.DataFrame:
    rows = training.drop_duplicates("impl")
    return pd.DataFrame(
        {
            "impl": rows["impl"],
            "kept per layer, GiB": rows["kept_layer_bytes"] / GIB,
            "of it T×T, GiB": rows["kept_matrix_layer_bytes"] / GIB,
            "all layers, GiB": rows["kept_model_bytes"] / GIB,
            "backward's T×T traffic per layer, GiB": rows["backward_matrix_layer_bytes"] / GIB,
        }
    ).reset_index(drop=True)


def training_finding(training: pd.DataFrame) -> str:
    """The training shape in one paragraph: what storing P keeps against the fused path,
    beside each GPU's memory."""
    if training.empty:
        return "The training shape has no rows (results/model/training_memory.csv is empty)."
    first = training.iloc[0]
    shape = (
        f"B = {int(first['batch'])}, H = {int(first['heads'])}, T = {int(first['tokens']):,}, "
        f"d = {int(first['head_dim'])}, {first['dtype']}{', causal' if bool(first['causal']) else ''}, "
        f"{int(first['layers'])} layers"
    )
    per = training.drop_duplicates("impl").set_index("impl")
    gpus = training.dropna(subset=["memory_bytes"]).drop_duplicates("target")
    parts = []
    for impl, r in per.iterrows():
        over = [g.target for g in gpus.itertuples() if r["kept_model_bytes"] > g.memory_bytes]
        fits = f"more than the memory of {names(over)}" if over else "within every GPU's memory"
        parts.append(
            f"{impl} {number(r['kept_layer_bytes'] / GIB)} GiB per layer, "
            f"{number(r['kept_model_bytes'] / GIB)} GiB in all ({fits})"
        )
    return f"At the training shape ({shape}) the forward keeps for the backward: " + "; ".join(parts) + "."


# --- what the backward moves ------------------------------------------------------------------


def traffic_table(stages: pd.DataFrame) -> pd.DataFrame:
    """Per backward point: counted bytes (all, T×T), the model's, the compulsory floor."""
    rows = stages[stages["status"] == "ok"].copy()
    if rows.empty:
        return pd.DataFrame()
    rows["matrix"] = rows["tensor"].isin(MATRIX_TENSORS)
    key = ["impl", "tokens", "head_dim", "dtype", "causal"]
    sums = rows.groupby(key, dropna=False).agg(
        counted=("counted_bytes", lambda c: c.sum(min_count=1)),
        model=("model_bytes", lambda c: c.sum(min_count=1)),
        compulsory=("compulsory_bytes", "sum"),
    )
    matrix = (
        rows[rows["matrix"]]
        .groupby(key, dropna=False)
        .agg(
            counted_tt=("counted_bytes", lambda c: c.sum(min_count=1)),
            compulsory_tt=("compulsory_bytes", "sum"),
        )
    )
    table = sums.join(matrix).fillna({"compulsory_tt": 0}).reset_index()
    table = table.dropna(subset=["counted"])
    return pd.DataFrame(
        {
            "impl": table["impl"],
            "T": table["tokens"],
            "d": table["head_dim"],
            "dtype": table["dtype"],
            "causal": table["causal"],
            "counted, MiB": table["counted"] / MIB,
            "model, MiB": table["model"] / MIB,
            "counted = model": equals_model(table["counted"], table["model"]),
            "T×T counted, MiB": table["counted_tt"].fillna(0) / MIB,
            "compulsory, MiB": table["compulsory"] / MIB,
            "T×T compulsory, MiB": table["compulsory_tt"] / MIB,
        }
    ).sort_values(["T", "impl"], ignore_index=True)


def traffic_finding(stages: pd.DataFrame) -> str:
    table = traffic_table(stages)
    if table.empty:
        return empty(
            "traffic", "no backward point of a Triton path was counted (only the interpreter counts)"
        )
    modelled = table[table["counted = model"] != NO_MODEL]
    agree = int(modelled["counted = model"].astype(bool).sum())
    unmodelled = table[table["counted = model"] == NO_MODEL]
    if modelled.empty:
        text = f"No counted backward here has a traffic model ({names(unmodelled['impl'])}: none registered)"
    else:
        text = (
            f"The interpreter's count equals the model to the byte at {agree} of the "
            f"{len(modelled)} counted backward points with a model"
        )
        if len(unmodelled):
            text += f" ({names(unmodelled['impl'])}: no backward traffic model)"
    longest = table[table["T"] == table["T"].max()].set_index("impl")
    text += f". At the longest T counted ({int(longest['T'].iloc[0]):,}): "
    parts = []
    for impl, r in longest.iterrows():
        matrix = r["T×T counted, MiB"]
        ratio = r["T×T counted, MiB"] / r["T×T compulsory, MiB"] if r["T×T compulsory, MiB"] else None
        parts.append(
            f"{impl} moves {number(r['counted, MiB'])} MiB, {number(matrix)} MiB of it T×T"
            + (f" ({number(ratio)} times its T×T floor)" if ratio else "")
            + f", against a compulsory {number(r['compulsory, MiB'])} MiB"
        )
    return text + "; ".join(parts) + "."


# --- the products ------------------------------------------------------------------------------


def products_table(backward: pd.DataFrame) -> pd.DataFrame:
    rows = (
        ok(backward)
        .dropna(subset=["convention_flops"])
        .drop_duplicates(["impl", "tokens", "head_dim", "dtype", "causal"])
    )
    return pd.DataFrame(
        {
            "impl": rows["impl"],
            "T": rows["tokens"],
            "causal": rows["causal"],
            "executed GFLOP": rows["flops"] / 1e9,
            "convention GFLOP": rows["convention_flops"] / 1e9,
            "executed / convention": rows["flops"] / rows["convention_flops"],
            "executed / forward": rows["flops"] / rows["forward_flops"],
        }
    ).sort_values(["T", "impl"], ignore_index=True)


def products_finding(backward: pd.DataFrame) -> str:
    table = products_table(backward)
    if table.empty:
        return empty("products", why_no_backward(backward))
    unmodelled = table[table["executed GFLOP"].isna()]
    no_model = f"{names(unmodelled['impl'])}: no backward FLOPs model registered, executed FLOPs unknown"
    table = table.dropna(subset=["executed GFLOP"])
    if table.empty:
        return f"No backward here has a model of the FLOPs it executes ({no_model})."
    longest = table[table["T"] == table["T"].max()].set_index("impl")
    parts = [
        f"{impl} {number(r['executed / convention'])}× ({number(r['executed / forward'])}× its forward)"
        for impl, r in longest.iterrows()
    ]
    text = (
        "FLOPs as executed against the convention (2.5 times the forward's) at T = "
        f"{int(longest['T'].iloc[0]):,}: " + "; ".join(parts) + "."
    )
    if len(unmodelled):
        text += f" ({no_model}.)"
    stored, recomputed = triton_path("SP", backward), triton_path("none", backward)
    if stored in longest.index and recomputed in longest.index:
        text += f" What recomputation costs is the difference between {recomputed}'s and {stored}'s."
    return text


# --- time ----------------------------------------------------------------------------------------

# the rate columns of the time tables, for reports.pages.rates.within_ceilings: column → (kind,
# its unit in per-second multiples)
RATE_COLUMNS = {"backward GFLOP/s": (FLOPS, 1e9), "GB/s (warm)": (BYTES, 1e9)}


def time_table(backward: pd.DataFrame) -> pd.DataFrame:
    rows = ok(backward).dropna(subset=["time_ms"])
    return pd.DataFrame(
        {
            "impl": rows["impl"],
            "T": rows["tokens"],
            "dtype": rows["dtype"],
            "causal": rows["causal"],
            "backward, ms": rows["time_ms"],
            "forward + backward, ms": rows["step_time_ms"],
            "backward GFLOP/s": rows["flops"] / rows["time_ms"] / 1e6,
        }
    ).sort_values(["T", "impl"], ignore_index=True)


def stage_time_table(stage_times: pd.DataFrame) -> pd.DataFrame:
    rows = stage_times[stage_times["stage"] != "rest"].dropna(subset=["time_ms"])
    return pd.DataFrame(
        {
            "impl": rows["impl"],
            "T": rows["tokens"],
            "stage": rows["stage"],
            "does": rows["does"],
            "warm, ms": rows["time_ms"],
            "cold, ms": rows["cold_time_ms"],
            "cold / warm": rows["cold_time_ms"] / rows["time_ms"],
            "GB/s (warm)": rows["gbps"],
        }
    ).reset_index(drop=True)


def predicted_table(predictions: pd.DataFrame) -> pd.DataFrame:
    """Per backward point and target: the kernels' predicted times summed, and what bounds
    the slowest kernel (cold)."""
    if predictions.empty:
        return pd.DataFrame()
    key = ["impl", "tokens", "head_dim", "dtype", "causal", "target"]
    sums = predictions.groupby(key, dropna=False)[
        ["predicted_warm_low_ms", "predicted_warm_high_ms", "predicted_cold_ms"]
    ].sum()
    slowest = predictions.loc[predictions.groupby(key, dropna=False)["predicted_cold_ms"].idxmax()]
    bound = slowest.set_index(key)[["kernel", "bound_cold"]]
    table = sums.join(bound).reset_index()
    return pd.DataFrame(
        {
            "impl": table["impl"],
            "T": table["tokens"],
            "dtype": table["dtype"],
            "causal": table["causal"],
            "target": table["target"],
            "warm, ms": table["predicted_warm_low_ms"].map(number)
            + " – "
            + table["predicted_warm_high_ms"].map(number),
            "cold, ms": table["predicted_cold_ms"],
            "slowest kernel (cold)": table["kernel"] + ": " + table["bound_cold"].astype(str) + "-bound",
        }
    ).sort_values(["target", "T", "impl"], ignore_index=True)


def time_finding(backward: pd.DataFrame, env: dict) -> str:
    rows = ok(backward).dropna(subset=["time_ms"])
    where = "a GPU" if env.get("device") == "cuda" else "this CPU (CPU times, not GPU ones)"
    if rows.empty:
        untimed = ok(backward)
        why = (
            "no backward point was timed ("
            + "; ".join(
                f"{names(g['impl'])}: {str(reason).removeprefix('not timed: ')}"
                for reason, g in untimed.groupby(untimed["time_reason"].fillna("no reason recorded"))
            )
            + ")"
            if not untimed.empty
            else why_no_backward(backward) or "no backward point ran"
        )
        return empty("time", why)
    longest = rows[rows["tokens"] == rows["tokens"].max()]
    parts = [
        f"{r.impl} {number(r.time_ms)} ms alone, {number(r.step_time_ms)} ms with its forward"
        for r in longest.itertuples()
    ]
    return f"Measured on {where} at T = {int(longest['tokens'].iloc[0]):,}: " + "; ".join(parts) + "."


# --- where recomputation wins -------------------------------------------------------------------


def _crossings(crossing: pd.DataFrame) -> pd.DataFrame:
    return crossing.drop_duplicates(["target", "head_dim", "dtype", "causal", "block_m", "block_n", "case"])


def crossing_table(crossing: pd.DataFrame) -> pd.DataFrame:
    if crossing.empty:
        return pd.DataFrame()
    rows = _crossings(crossing)
    first, last = int(crossing["tokens"].min()), int(crossing["tokens"].max())

    def said(value) -> str:
        if pd.isna(value):
            return f"never up to {last:,}"
        return f"every T from {first:,}" if int(value) == first else f"from T = {int(value):,}"

    return pd.DataFrame(
        {
            "target": rows["target"],
            "d": rows["head_dim"],
            "dtype": rows["dtype"],
            "causal": rows["causal"],
            "blocks": rows["block_m"].astype(int).astype(str) + "×" + rows["block_n"].astype(int).astype(str),
            "caches": rows["case"].map(CASE_WORDS),
            "recomputing P wins": rows["crossing_tokens"].map(said),
        }
    ).reset_index(drop=True)


def crossing_finding(crossing: pd.DataFrame) -> str:
    """Per target, the crossing T on the cold roofline (DRAM only) for each shape, and the
    ratio of the two backwards at the longest T of the range."""
    if crossing.empty:
        return empty("crossing", "the model's crossing table is empty")
    last = int(crossing["tokens"].max())
    cold = crossing[crossing["case"] == "cold"]
    parts = []
    for target, group in cold.groupby("target", sort=False):
        at_last = group[group["tokens"] == last]
        ratio = (at_last["stored_ms"] / at_last["recomputed_ms"]).median()
        crosses = group.drop_duplicates(["head_dim", "dtype", "causal"])["crossing_tokens"]
        where = (
            "never within the range"
            if crosses.isna().all()
            else "from T = " + names(f"{int(c):,}" for c in crosses.dropna())
        )
        parts.append(
            f"{target}: {where} (at T = {last:,} storing P takes {number(ratio)} times as long as "
            "recomputing it)"
        )
    return (
        "Where the fused Triton backward (P recomputed, no T×T tensor in memory) is never slower than "
        "the materialized one (P kept, dP and dS through memory), on the roofline with every byte "
        "from DRAM: " + "; ".join(parts) + "."
    )


def crossing_figure(crossing: pd.DataFrame):
    if crossing.empty:
        return None
    rows = crossing[crossing["case"].isin(["cold", "warm_low"])]
    rows = rows.assign(
        ratio=rows["stored_ms"] / rows["recomputed_ms"],
        shape="d=" + rows["head_dim"].astype(str),
        caches=rows["case"].map(CASE_WORDS),  # the legend in words, not the table's keys
    )
    fig, ax = plt.subplots()
    sns.lineplot(
        data=rows, x="tokens", y="ratio", hue="target", style="caches", marker="o", ax=ax, errorbar=None
    )
    ax.axhline(1, color="grey", linestyle="--", linewidth=1)
    ax.set(xscale="log", yscale="log", xlabel="T", ylabel="storing P ÷ recomputing it (predicted time)")
    ax.set_title("Above 1, recomputing P is faster")
    return fig


# --- the index's line ----------------------------------------------------------------------------


def finding(
    backward: pd.DataFrame | None, training: pd.DataFrame | None, crossing: pd.DataFrame | None
) -> str | None:
    """One line for the index: what storing P keeps at the training shape against the fused
    path, and where recomputing wins on the cold roofline."""
    if training is None or training.empty or backward is None or backward.empty:
        return None
    per = training.drop_duplicates("impl").set_index("impl")
    stored, recomputed = triton_path("SP", backward), triton_path("none", backward)
    if stored not in per.index or recomputed not in per.index:
        return None
    first = training.iloc[0]
    text = (
        f"Training at T = {int(first['tokens']):,}, {int(first['heads'])} heads, {int(first['layers'])} "
        f"layers, {first['dtype']}: storing P keeps {number(per.loc[stored, 'kept_model_bytes'] / GIB)} GiB "
        f"for the backward, recomputing it {number(per.loc[recomputed, 'kept_model_bytes'] / GIB)} GiB"
    )
    if crossing is not None and not crossing.empty:
        cold = _crossings(crossing[crossing["case"] == "cold"])
        wins = cold.groupby("target", sort=False)["crossing_tokens"].min()
        text += "; recomputing is predicted faster " + ", ".join(
            f"on {t} from T = {int(c):,}" if pd.notna(c) else f"never on {t}" for t, c in wins.items()
        )
    return text + "."
