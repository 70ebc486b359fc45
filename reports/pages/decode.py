"""Decode page: where the difficulty of attention goes when the queries shrink to one row. From
the decode model (results/model/decode.csv, kernels.models.decode: every inference case at
query_tokens from T down to 1, per GPU) and this study's decode points (the metrics at
query_tokens 1): S and P's share of the bytes, the fused design's intensity against each GPU's
ridge, what grouped K/V heads save, what splitting the keys costs and buys, this machine's
K + V read rate inside and past its largest cache, and the Triton paths' counted bytes at every
inference shape. It loads every problem, not the square one alone (common.load's problems)."""

from __future__ import annotations

import json

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from kernels.spec import ELEMENT_BYTES
from reports.pages.common import (
    MIB,
    busy,
    busy_note,
    implementations,
    load,
    names,
    number,
    ok,
    sections,
    show,
    why_untimed,
)
from reports.pages.rates import BYTES, rate
from reports.pages.traffic import why_uncounted

__all__ = [
    "busy_note",
    "load",
    "show",
    "empty",
    "decode_points",
    "share_figure",
    "share_text",
    "intensity_figure",
    "turn_table",
    "turn_text",
    "grouped_table",
    "grouped_model_text",
    "grouped_measured_text",
    "grouped_evidence",
    "split_table",
    "split_text",
    "rates",
    "rate_figure",
    "rate_text",
    "inference_points",
    "counted_table",
    "counted_text",
    "finding",
]

DECODE = 1  # query_tokens of a decode step: one query row per sequence
# an inference case of the model's table (everything but query_tokens and the GPU)
CASE = ["batch", "heads", "kv_heads", "tokens", "head_dim", "dtype", "causal"]
SHAPE = [c for c in CASE if c != "kv_heads"]
# a measured point apart from its K/V heads: its twin with a K/V head per query head shares it
TWIN = ["impl", "batch", "heads", "tokens", "head_dim", "dtype", "causal", "inputs", "block_m", "block_n"]
TWIN += ["num_splits"]
NOT_MODELLED = "not modelled"

# what each section shows, for the sentence it shows instead when the study has nothing for it
empty = sections(
    {
        "share": "the share of the materialized design's bytes that are S and P, against K and "
        "V, as query_tokens falls from T to 1",
        "intensity": "the fused design's arithmetic intensity against query rows per K/V head, "
        "with each GPU's ridge point and where it turns bandwidth-bound",
        "grouped model": "the K and V bytes a decode step reads with fewer K/V heads than query "
        "heads, from the model",
        "grouped measured": "this machine's decode time with fewer K/V heads against a K/V head "
        "per query head",
        "split": "the partial results that splitting the keys adds, the programs it launches "
        "against each GPU's SMs, and its predicted time against the fused design's",
        "rates": "the rate this machine read K and V at in its timed decode points, against K "
        "plus V over its largest cache",
        "counted": "the bytes the Triton interpreter counted at the points of an inference shape "
        "against the model, per path, query_tokens and K/V heads",
    }
)


# --- what the tables hold -------------------------------------------------------------------


def span(values: pd.Series, scale: float = 1.0) -> str:
    """'5.9' or '1.5–5.9': the values' range as a reader reads it, one number where it is one."""
    low, high = number(values.min() * scale), number(values.max() * scale)
    return low if low == high else f"{low}–{high}"


def model_rows(decode: pd.DataFrame) -> pd.DataFrame:
    """One row per case and query_tokens (what does not depend on the GPU)."""
    return decode.drop_duplicates([*CASE, "query_tokens"]).reset_index(drop=True)


def why_no_cases(decode: pd.DataFrame) -> str | None:
    if len(decode):
        return None
    return (
        "this study has no inference case (no point whose query_tokens or kv_heads differ from "
        "T and H), so the decode model has no row"
    )


def decode_points(metrics: pd.DataFrame) -> pd.DataFrame:
    """The study's points at one query row (none in a table written before the dimension)."""
    if "query_tokens" not in metrics.columns:
        return metrics.iloc[0:0]
    found = metrics[metrics["query_tokens"] == DECODE]
    # a table written before num_splits has no column of it: every point at its path's own rule
    return found.assign(num_splits=found.get("num_splits", pd.Series(pd.NA, index=found.index)))


def why_no_decode(metrics: pd.DataFrame) -> str | None:
    if len(decode_points(metrics)):
        return None
    return f"this study has no point at query_tokens {DECODE} ({implementations(metrics)})"


def kv_bytes(points: pd.DataFrame) -> pd.Series:
    """K + V of each point: 2·B·kv_heads·T·d·e, what a decode step must read."""
    e = points["dtype"].map(ELEMENT_BYTES)
    return 2 * points["batch"] * points["kv_heads"] * points["tokens"] * points["head_dim"] * e


def kv_said(kv_heads) -> str:
    return f"{int(kv_heads)} K/V head{'s' * (int(kv_heads) != 1)}"


def describe(row) -> str:
    return (
        f"B = {row['batch']}, T = {int(row['tokens']):,}, d = {row['head_dim']}, {row['dtype']}, "
        f"{row['heads']} query heads, {'causal' if row['causal'] else 'not causal'}"
    )


def _colours(groups) -> dict:
    found = sorted({int(g) for g in groups})
    return dict(zip(found, sns.color_palette("viridis", len(found)), strict=True))


def _case_lines(ax, rows: pd.DataFrame, x: str, y: pd.Series, colours: dict) -> None:
    """A line per case, coloured by its group size, each group size named once."""
    named = set()
    for _, line in rows.assign(_y=y).groupby(CASE, sort=True):
        line = line.sort_values(x)
        group = int(line["group_size"].iloc[0])
        label = f"{group} query head{'s' * (group != 1)} per K/V head"
        ax.plot(line[x], line["_y"], marker="o", ms=3, lw=1.2, color=colours[group], label=label)
        if group in named:
            ax.lines[-1].set_label("_" + label)
        named.add(group)


# --- 1. S and P against K and V -------------------------------------------------------------


def share_figure(decode: pd.DataFrame):
    """S and P's share of the materialized design's compulsory bytes against query_tokens,
    a line per case; None without a case."""
    rows = model_rows(decode)
    if rows.empty:
        return None
    fig, ax = plt.subplots()
    _case_lines(ax, rows, "query_tokens", 100 * rows["sp_share"], _colours(rows["group_size"]))
    ax.set_xscale("log", base=2)
    ax.set(
        xlabel="query_tokens (each line runs from its T down to 1)",
        ylabel="S and P, % of the bytes",
        title="S and P against K and V as the queries shrink",
        ylim=(0, 100),
    )
    ax.legend(fontsize=8)
    return fig


def share_text(decode: pd.DataFrame) -> str:
    """S and P's share where every position queries and at one query row, per group size."""
    rows = model_rows(decode)
    if rows.empty:
        return empty("share", why_no_cases(decode))
    rows = rows.assign(kv_share=rows["kv_bytes"] / (rows["sp_bytes"] + rows["kv_bytes"] + rows["qo_bytes"]))
    full, one = rows[rows["query_tokens"] == rows["tokens"]], rows[rows["query_tokens"] == DECODE]
    by_group = ", ".join(
        f"{span(part['sp_share'], 100)}% with {group} query head{'s' * (group != 1)} per K/V head"
        for group, part in one.groupby("group_size")
    )
    return (
        f"Where every position queries (query_tokens = T), S and P are {span(full['sp_share'], 100)}% "
        f"of the bytes the materialized design must move; at one query row, {by_group}. One query "
        "row makes S one row of T scores per query head, while K and V keep all T rows of d "
        f"values per K/V head: at decode they are {span(one['kv_share'], 100)}% of the bytes, and "
        "the more query heads share a K/V head, the larger S and P's share."
    )


# --- 2. intensity against the ridge ----------------------------------------------------------


def intensity_figure(decode: pd.DataFrame):
    """The fused design's FLOP per compulsory byte against query rows per K/V head, a panel
    per dtype, each GPU's ridge a horizontal line; None without a case."""
    rows = model_rows(decode)
    if rows.empty:
        return None
    dtypes = sorted(rows["dtype"].unique())
    fig, axes = plt.subplots(1, len(dtypes), figsize=(5.6 * len(dtypes), 4.4), squeeze=False)
    colours = _colours(rows["group_size"])
    greys = sns.color_palette("Greys_r", 6)
    for ax, dtype in zip(axes[0], dtypes, strict=True):
        part = rows[rows["dtype"] == dtype]
        _case_lines(ax, part, "rows_per_kv_head", part["intensity_flop_per_byte"], colours)
        ridges = decode[decode["dtype"] == dtype].drop_duplicates("gpu")
        for colour, ridge in zip(greys, ridges.itertuples(), strict=False):
            label = f"{ridge.gpu} ridge, {number(ridge.ridge_flop_per_byte)} FLOP/B"
            ax.axhline(ridge.ridge_flop_per_byte, color=colour, ls="--", lw=1, label=label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set(
            xlabel="query rows per K/V head (query_tokens × group size)",
            ylabel="FLOP per compulsory byte (fused)",
            title=f"Intensity against the ridge, {dtype}",
        )
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def turn_table(decode: pd.DataFrame) -> pd.DataFrame:
    """Per GPU and dtype: its ridge, the most query rows per K/V head still bound by bandwidth
    and the fewest already bound by compute (the model's ``bound``)."""
    rows = []
    for (gpu, dtype), part in decode.groupby(["gpu", "dtype"], sort=False):
        memory = part.loc[part["bound"] == "memory", "rows_per_kv_head"]
        compute = part.loc[part["bound"] == "compute", "rows_per_kv_head"]
        rows.append(
            {
                "gpu": gpu,
                "dtype": dtype,
                "ridge_flop_per_byte": part["ridge_flop_per_byte"].iloc[0],
                "bandwidth-bound up to (rows)": memory.max() if len(memory) else None,
                "compute-bound from (rows)": compute.min() if len(compute) else None,
            }
        )
    return pd.DataFrame(rows)


def _turn(row) -> str:
    """Where one GPU turns, in words."""
    where = f"the {row['gpu']} ({row['dtype']}, ridge {number(row['ridge_flop_per_byte'])} FLOP/B)"
    memory, compute = row["bandwidth-bound up to (rows)"], row["compute-bound from (rows)"]
    if pd.isna(compute):
        return f"{where} is bandwidth-bound at every case of the sweep (up to {number(memory)} rows)"
    if pd.isna(memory):
        return f"{where} is compute-bound at every case of the sweep (from {number(compute)} rows)"
    turned = f"{where} is compute-bound from {number(compute)} rows"
    if memory > compute:  # cases of other lengths overlap: T decides between them
        turned += f" but bandwidth-bound in some cases up to {number(memory)} (T decides between)"
    return turned


def turn_text(decode: pd.DataFrame) -> str:
    """Where each GPU turns from bandwidth- to compute-bound, and how far below the ridge one
    query row sits."""
    if decode.empty:
        return empty("intensity", why_no_cases(decode))
    turns = "; ".join(_turn(row) for _, row in turn_table(decode).iterrows())
    one = decode[decode["query_tokens"] == DECODE]
    top = one[one["group_size"] == one["group_size"].max()]
    low = top.loc[(top["ridge_flop_per_byte"] / top["intensity_flop_per_byte"]).idxmin()]
    group = int(low["group_size"])
    return (
        f"Query rows per K/V head (query_tokens × the query heads sharing it) set the products "
        f"each byte of K and V feeds. By the model, {turns}. At one query row the rows are the "
        f"group size: with {group} query head{'s' * (group != 1)} per K/V head the fused design "
        f"does {number(low['intensity_flop_per_byte'])} FLOP per byte ({describe(low)}), "
        f"{number(low['ridge_flop_per_byte'] / low['intensity_flop_per_byte'])}× below the "
        f"{low['gpu']}'s ridge, the nearest any GPU comes: decode waits on memory."
    )


# --- 3. grouped heads ----------------------------------------------------------------------


def _grouped_model(decode: pd.DataFrame) -> str:
    """K + V at one query row for the shape with the most K/V head counts (its longest T)."""
    one = model_rows(decode)
    one = one[one["query_tokens"] == DECODE]
    counts = one.groupby(SHAPE)["kv_heads"].transform("nunique")
    shape = one[counts == counts.max()].sort_values(["tokens", "batch", "dtype"]).iloc[-1]
    rows = one[(one[SHAPE] == shape[SHAPE].to_numpy()).all(axis=1)].sort_values("kv_heads", ascending=False)
    listed = ", ".join(
        f"{number(r.kv_bytes / MIB)} MiB with {kv_said(r.kv_heads)}" for r in rows.itertuples()
    )
    return (
        f"By the model, K and V at one query row ({describe(shape)}): {listed}. They "
        "are what a decode step must read, and they fall as heads over kv_heads."
    )


def grouped_table(metrics: pd.DataFrame) -> pd.DataFrame:
    """Each timed decode point beside its twin with a K/V head per query head: K + V, time,
    and the speed-up measured against the one its bytes alone would give."""
    timed = ok(decode_points(metrics)).dropna(subset=["time_ms"])
    full = timed[timed["kv_heads"] == timed["heads"]][[*TWIN, "time_ms"]]
    rows = timed.merge(full.rename(columns={"time_ms": "all_heads_ms"}), on=TWIN)
    if rows.empty:
        return pd.DataFrame()
    table = rows[["impl", "tokens", "head_dim", "dtype", "heads", "kv_heads", "time_ms"]].copy()
    table.insert(6, "kv_bytes", kv_bytes(rows))
    table["speedup_from_kv_size"] = rows["heads"] / rows["kv_heads"]
    table["speedup_measured"] = rows["all_heads_ms"] / rows["time_ms"]
    return table.sort_values(["impl", "dtype", "tokens", "kv_heads"], ascending=[True, True, True, False])


def _grouped_measured(table: pd.DataFrame) -> str:
    said = []
    for impl, part in table[table["kv_heads"] < table["heads"]].groupby("impl"):
        each = [
            f"{number(g['speedup_measured'].median())}× as fast with {kv_said(kv)} of {heads} "
            f"(bytes alone: {number(heads / kv)}×; {len(g)} length{'s' * (len(g) != 1)})"
            for (heads, kv), g in part.groupby(["heads", "kv_heads"], sort=False)
        ]
        said.append(f"{impl} runs " + ", ".join(each))
    return (
        "Measured here, at one query row and the same T (the median over the lengths timed): "
        + "; ".join(said)
        + "."
    )


FAR_BELOW = 2  # a time that fell less than the bytes by more than this factor: its bytes are not its time
OPS_SHOWN = 8  # of the ATen operations a path's call ran, the first shown


def _amount(nbytes: float) -> str:
    return f"{number(nbytes / MIB)} MiB" if nbytes >= MIB / 10 else f"{number(nbytes / 1024)} KiB"


def _ops(points: pd.DataFrame) -> list[str]:
    """The ATen operations the points' calls ran (their records' ops_run, JSON in the table),
    each once, in the order first called; [] where none was recorded."""
    found: dict[str, None] = {}
    for listed in points.get("ops_run", pd.Series(dtype=object)).dropna():
        found |= dict.fromkeys(json.loads(listed) if isinstance(listed, str) else listed)
    return list(found)


def _what_it_did(impl: str, points: pd.DataFrame, row: pd.Series) -> str:
    """What one path did with the shared K/V heads, from its grouped points' records: its
    largest allocation during a call against K and V repeated per query head (the copy a call
    that expanded them would make), and the ATen operations its call ran."""
    repeated = kv_bytes(points.assign(kv_heads=points["heads"]))
    peak = pd.to_numeric(points["peak_alloc_bytes"], errors="coerce")
    known = peak.notna()
    if not known.any():
        said = f"{impl} recorded no allocation"
    else:
        longest = points[known].loc[points[known]["tokens"].idxmax()]
        copy = float(repeated[longest.name])
        top = float(peak[known].max())
        if (peak[known] < repeated[known]).all():
            said = (
                f"{impl} allocated at most {_amount(top)} during a call, less than the "
                f"{_amount(copy)} that K and V repeated per query head take at T = "
                f"{int(longest['tokens']):,}: it read each shared head where it lay, without copying it"
            )
        else:
            said = (
                f"{impl} allocated up to {_amount(top)} during a call, room for K and V repeated per query "
                f"head ({_amount(copy)} at T = {int(longest['tokens']):,})"
            )
    ops = _ops(points)
    if ops:
        more = f" and {len(ops) - OPS_SHOWN} more" if len(ops) > OPS_SHOWN else ""
        said += f"; its call ran {', '.join(f'`{op}`' for op in ops[:OPS_SHOWN])}{more}"
    if row["speedup_measured"] * FAR_BELOW < row["speedup_from_kv_size"] and known.any():
        said += (
            f". At T = {int(row['tokens']):,} its time fell {number(row['speedup_measured'])}× for "
            f"{number(row['speedup_from_kv_size'])}× fewer bytes of K and V"
            + (", which it did not copy" if (peak[known] < repeated[known]).all() else "")
            + ": what its call spends is not reading them from memory, and fewer K/V heads do not "
            "shrink it (docs/decode.md counts where such a call's work goes without timing it)"
        )
    return said + "."


def grouped_evidence(metrics: pd.DataFrame) -> str:
    """Per path with grouped decode points: what its records say it did with the shared K/V
    heads (peak allocation, the operations it ran) and, where its time fell far less than its
    bytes, that its time is not the bytes'."""
    table = grouped_table(metrics)
    if table.empty:
        return ""
    timed = ok(decode_points(metrics)).dropna(subset=["time_ms"])
    grouped = timed[timed["kv_heads"] < timed["heads"]]
    fewer = table[table["kv_heads"] < table["heads"]]
    said = []
    for impl, part in fewer.groupby("impl"):
        # its fewest K/V heads at its longest T: the case the sentence's speed-ups are of
        row = part.sort_values(["kv_heads", "tokens"], ascending=[True, False]).iloc[0]
        said.append(_what_it_did(impl, grouped[grouped["impl"] == impl], row))
    return "What each path did with the shared heads, from its records: " + " ".join(said)


def grouped_model_text(decode: pd.DataFrame) -> str:
    """What grouping saves in bytes, by the model."""
    return _grouped_model(decode) if len(decode) else empty("grouped model", why_no_cases(decode))


def grouped_measured_text(metrics: pd.DataFrame) -> str:
    """What grouping saves in this machine's time, from the metrics."""
    table = grouped_table(metrics)
    if not table.empty and (table["kv_heads"] < table["heads"]).any():
        return _grouped_measured(table) + "\n\n" + grouped_evidence(metrics)
    why = why_no_decode(metrics) or why_untimed(decode_points(metrics))
    return empty(
        "grouped measured",
        why or f"no timed point at query_tokens {DECODE} has a twin with fewer K/V heads than query heads",
    )


# --- 4. splitting the keys -------------------------------------------------------------------


def split_table(decode: pd.DataFrame, gpus: pd.DataFrame) -> pd.DataFrame:
    """Per decode case and GPU: the programs of each design against the SMs, the partials the
    split adds over K + V, and both designs' predicted times."""
    one = decode[decode["query_tokens"] == DECODE]
    if one.empty:
        return pd.DataFrame()
    sms = gpus.drop_duplicates("gpu").set_index("gpu")["sms"]
    table = one[["gpu", "tokens", "heads", "kv_heads", "dtype"]].copy()
    table["sms"] = one["gpu"].map(sms)
    for design in ("fused", "split"):
        table[f"{design}_programs"] = one[f"{design}_programs"].map(
            lambda v: NOT_MODELLED if pd.isna(v) else f"{int(v):,}"
        )
    table["fraction_partials_of_kv"] = one["split_partial_bytes"] / one["kv_bytes"]
    table["fused_ms"] = one["fused_s"] * 1e3
    table["split_ms"] = one["split_s"] * 1e3
    table["speedup_split"] = one["fused_s"] / one["split_s"]
    return table.sort_values(["gpu", "dtype", "tokens", "kv_heads"]).reset_index(drop=True)


def _programs(value, sms) -> str:
    if pd.isna(value):
        return f"{NOT_MODELLED} yet"
    return f"{int(value):,} programs on {int(sms)} SMs" if pd.notna(sms) else f"{int(value):,} programs"


def split_text(decode: pd.DataFrame, gpus: pd.DataFrame) -> str:
    """What splitting the keys costs (partials) and buys (programs, predicted time), for the
    decode case with the most query heads per K/V head and the longest T, on each GPU."""
    one = decode[decode["query_tokens"] == DECODE]
    if one.empty:
        return empty("split", why_no_cases(decode))
    sms = gpus.drop_duplicates("gpu").set_index("gpu")["sms"]
    case = one.sort_values(["group_size", "tokens", "batch", "dtype"]).iloc[-1]
    rows = one[(one[CASE] == case[CASE].to_numpy()).all(axis=1)]
    each = [
        f"on the {r.gpu}, fused {_programs(r.fused_programs, sms.get(r.gpu))}, split "
        f"{_programs(r.split_programs, sms.get(r.gpu))}, predicted {number(r.fused_s * 1e6)} µs "
        f"fused against {number(r.split_s * 1e6)} µs split"
        for r in rows.itertuples()
    ]
    partials, kv = case["split_partial_bytes"], case["kv_bytes"]
    text = (
        f"At one query row with {int(case['group_size'])} query heads per K/V head "
        f"({describe(case)}), splitting the keys writes and reads back partial results: "
        f"{number(partials / MIB)} MiB, {number(100 * partials / kv)}% of K and V's "
        f"{number(kv / MIB)} MiB. It buys programs: " + "; ".join(each) + ". Across the sweep's "
        f"decode cases the partials add {span(one['split_partial_bytes'] / one['kv_bytes'], 100)}% "
        "to K and V."
    )
    if one["fused_programs"].isna().any():
        text += (
            " The fused design's programs are not modelled yet, so its predicted time takes the "
            "whole bandwidth as reached: what splitting buys in time awaits that model, or a GPU."
        )
    return text


# --- 5. this machine's K + V read rate -------------------------------------------------------


def largest_cache(metrics: pd.DataFrame, ceilings: dict) -> tuple[float | None, str]:
    """The largest cache of this machine and where it was read: the records' own (a timed
    chain's last_cache_bytes), else results/ceilings.json's largest level."""
    recorded = metrics.get("last_cache_bytes", pd.Series(dtype=float))
    recorded = pd.to_numeric(recorded, errors="coerce").dropna()
    if len(recorded):
        return float(recorded.max()), "the records' last_cache_bytes"
    sizes = [level["bytes"] for level in ceilings.get("levels") or [] if level.get("bytes")]
    return (float(max(sizes)), "results/ceilings.json") if sizes else (None, "")


def rates(metrics: pd.DataFrame, ceilings: dict) -> pd.DataFrame:
    """The timed decode points with K + V, the rate they were read at (K + V over the time),
    K + V over the largest cache and whether the machine was busy."""
    timed = ok(decode_points(metrics)).dropna(subset=["time_ms"])
    cache, _ = largest_cache(metrics, ceilings)
    found = timed[[*TWIN, "kv_heads", "time_ms"]].copy()
    if found.empty:
        return found.reindex(columns=[*found.columns, "kv_bytes", "gbps", "kv_over_cache", "busy"])
    found["kv_bytes"] = kv_bytes(timed)
    found["gbps"] = found["kv_bytes"] / (found["time_ms"] / 1e3) / 1e9
    found["kv_over_cache"] = found["kv_bytes"] / cache if cache else float("nan")
    found["busy"] = found.index.isin(busy(timed).index)
    return found.reset_index(drop=True)


def why_no_rates(metrics: pd.DataFrame) -> str | None:
    points = decode_points(metrics)
    return why_no_decode(metrics) or why_untimed(points)


def rate_figure(found: pd.DataFrame, ceilings: dict):
    """GB/s of K + V against K + V over the largest cache (in MiB where no cache size is
    known), a colour per path and a marker per K/V head count, busy points ringed, the
    machine's copy rates as guides; None without a timed decode point."""
    if found.empty:
        return None
    over = found["kv_over_cache"].notna().all()
    x = found["kv_over_cache"] if over else found["kv_bytes"] / MIB
    fig, ax = plt.subplots()
    sns.scatterplot(x=x, y=found["gbps"], hue=found["impl"], style=found["kv_heads"].astype(str), s=45, ax=ax)
    marked = found["busy"].to_numpy()
    if marked.any():
        ax.scatter(x[marked], found["gbps"][marked], s=160, facecolors="none", edgecolors="red", lw=1.4)
        ax.collections[-1].set_label("timed on a busy machine")
    for level in ceilings.get("levels") or []:
        if level.get("copy_gbps"):
            label = f"{level['level']} copy, {number(level['copy_gbps'])} GB/s"
            ax.axhline(level["copy_gbps"], color="grey", lw=0.9, ls=":", label=label)
    if over:
        ax.axvline(1.0, color="black", ls=(0, (2, 2)), lw=1, label="K + V = largest cache")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set(
        xlabel="K + V over the largest cache" if over else "K + V, MiB (no cache size known)",
        ylabel="GB/s (K + V over the time of a call)",
        title="K and V read at one query row, this machine",
    )
    ax.legend(fontsize=7, bbox_to_anchor=(1.01, 1), loc="upper left")
    return fig


def _rate_line(impl: str, part: pd.DataFrame, ceilings: dict) -> str:
    inside, past = part[part["kv_over_cache"] <= 1], part[part["kv_over_cache"] > 1]

    def median(side: pd.DataFrame) -> str:
        n = len(side)
        return f"{rate(1e9 * side['gbps'].median(), BYTES, ceilings).text} ({n} point{'s' * (n != 1)})"

    beyond = rate(1e9 * part["gbps"].max(), BYTES, ceilings)
    if not beyond.measured:  # no median is stated beside a point that beats the ceilings
        return f"{impl}: no rate stated, a call was {beyond.text}"
    if inside.empty or past.empty:
        where = "inside" if past.empty else "past"
        return f"{impl}: {median(part)}, every point {where} the cache"
    ratio = inside["gbps"].median() / past["gbps"].median()
    return (
        f"{impl}: {median(inside)} inside the cache, {median(past)} past it, {number(ratio)}× as fast inside"
    )


def rate_text(found: pd.DataFrame, metrics: pd.DataFrame, ceilings: dict) -> str:
    """The median rate each path read K + V at inside the largest cache against past it; no
    rate beyond what the ceilings allow (reports.pages.rates)."""
    if found.empty:
        return empty("rates", why_no_rates(metrics))
    cache, where = largest_cache(metrics, ceilings)
    if cache is None:
        beyond = rate(1e9 * found["gbps"].max(), BYTES, ceilings)
        said = f"at {span(found['gbps'])} GB/s" if beyond.measured else f"in calls {beyond.text}"
        return (
            f"K and V were read {said}; neither the records nor "
            "results/ceilings.json give a cache size to hold them against."
        )
    lines = "; ".join(_rate_line(impl, part, ceilings) for impl, part in found.groupby("impl"))
    marked = int(found["busy"].sum())
    busy_said = f" {marked} of the {len(found)} points were timed on a busy machine (ringed)." * bool(marked)
    return (
        f"K + V over the time of a call at one query row, the median on each side of the largest "
        f"cache ({number(cache / MIB)} MiB, from {where}): {lines}.{busy_said}"
    )


# --- 6. the Triton paths' counted bytes ------------------------------------------------------


def inference_points(metrics: pd.DataFrame) -> pd.DataFrame:
    """The study's points of an inference shape: fewer queries than keys, or fewer K/V heads
    than query heads."""
    return metrics[(metrics["query_tokens"] != metrics["tokens"]) | (metrics["kv_heads"] != metrics["heads"])]


def counted_table(metrics: pd.DataFrame) -> pd.DataFrame:
    """Each counted point of an inference shape: compulsory, modelled and counted bytes,
    whether the count is the model to the byte, and the bytes as issued over the compulsory
    ones."""
    data = inference_points(metrics).dropna(subset=["traffic_counted_bytes", "traffic_model_bytes"])
    if data.empty:
        return pd.DataFrame()
    shown = ["impl", "query_tokens", "tokens", "dtype", "heads", "kv_heads", "traffic_compulsory_bytes"]
    table = data[shown].copy()
    splits = data.get("num_splits", pd.Series(pd.NA, index=data.index))
    if splits.notna().any():  # a sweep that sets num_splits: which count each row asked for (–: none)
        table.insert(1, "num_splits", splits.map(lambda n: "–" if pd.isna(n) else f"{int(n):,}"))
    table["traffic_model_bytes"] = data["traffic_model_bytes"]
    table["traffic_counted_bytes"] = data["traffic_counted_bytes"]
    off = (data["traffic_counted_bytes"] - data["traffic_model_bytes"]).astype("Int64")
    table["counted = model"] = off.map(lambda d: "to the byte" if d == 0 else f"off by {d:+,} B")
    table["model / compulsory"] = data["traffic_model_bytes"] / data["traffic_compulsory_bytes"]
    order = ["impl", "dtype", "query_tokens", "tokens", "kv_heads"]
    return table.sort_values(order, ascending=[True, True, True, True, False])


def why_uncounted_here(metrics: pd.DataFrame, env: dict) -> str:
    points = inference_points(metrics)
    if points.empty:
        return (
            "this study has no point whose query_tokens or kv_heads differ from T and H "
            f"({implementations(metrics)})"
        )
    return why_uncounted(points, env)


def counted_text(table: pd.DataFrame, metrics: pd.DataFrame, env: dict) -> str:
    """How many counts are the model's to the byte, and each path's bytes as issued over the
    compulsory ones by query_tokens and K/V heads."""
    if table.empty:
        return empty("counted", why_uncounted_here(metrics, env))
    exact = int((table["counted = model"] == "to the byte").sum())
    issued = "; ".join(
        f"{impl}: "
        + ", ".join(
            f"{number(g['model / compulsory'].median())}× with {kv_said(kv)} at query_tokens {q:,}"
            for (q, kv), g in part.groupby(["query_tokens", "kv_heads"], sort=False)
        )
        for impl, part in table.groupby("impl")
    )
    return (
        f"The interpreter counted exactly the model's bytes at {exact} of the {len(table)} points "
        f"of an inference shape it counted ({names(table['impl'])}). As issued over compulsory: "
        f"{issued}. A path that reads the shared K/V head once per query head moves K and V up "
        "to the group size times."
    )


# --- the index's finding ---------------------------------------------------------------------


def finding(metrics: pd.DataFrame) -> str | None:
    """One line for the index: at the longest timed decode length, the fewest K/V heads'
    time against a K/V head per query head (marked where the machine was busy); else, with
    nothing timed, the counted Triton paths' bytes as issued over compulsory; else None."""
    if not {"query_tokens", "kv_heads"} <= set(metrics.columns):
        return None  # a table written before the inference dimensions: nothing to say
    table = grouped_table(metrics)
    fewer = table[table["kv_heads"] < table["heads"]] if not table.empty else table
    if fewer.empty:
        return _counted_finding(metrics)
    r = fewer.sort_values(["tokens", "heads", "kv_heads"], ascending=[False, True, True]).iloc[0]
    twins = decode_points(metrics)
    same = (twins[["impl", "tokens", "dtype"]] == [r["impl"], r["tokens"], r["dtype"]]).all(axis=1)
    marked = " (timed on a busy machine: see the warnings)" if not busy(twins[same]).empty else ""
    return (
        f"At one query row against T = {int(r['tokens']):,} ({r['dtype']}), {r['impl']} with "
        f"{kv_said(r['kv_heads'])} for {r['heads']} query heads runs "
        f"{number(r['speedup_measured'])}× as fast as with {r['heads']}, for "
        f"{number(r['speedup_from_kv_size'])}× fewer K and V bytes{marked}."
    )


def _counted_finding(metrics: pd.DataFrame) -> str | None:
    table = counted_table(metrics)
    fewer = (
        table[(table["kv_heads"] < table["heads"]) & (table["query_tokens"] == DECODE)]
        if len(table)
        else table
    )
    if fewer.empty:
        return None
    least = fewer[fewer["kv_heads"] == fewer["kv_heads"].min()]
    least = least[least["tokens"] == least["tokens"].max()]
    ratios = zip(least["impl"], least["model / compulsory"], strict=True)
    each = ", ".join(f"{impl} {number(ratio)}×" for impl, ratio in ratios)
    r = least.iloc[0]
    return (
        f"At one query row against T = {int(r['tokens']):,} with {kv_said(r['kv_heads'])} for "
        f"{r['heads']} query heads, the Triton paths issue "
        f"{each} the compulsory bytes (counted by the interpreter)."
    )
