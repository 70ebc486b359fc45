"""Masks page: what a fused, block-sparse kernel skips and what the materialized one still
stores. Per mask of the study: the scores it keeps against the tiles a block-sparse kernel
visits (the model's mask_tiles table), each Triton path's bytes counted against its model,
the mask's own bytes, this machine's times against what the mask keeps, and the GPUs' floors.
Every sentence is computed from the tables; a section without data says what it would show."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from kernels import masks
from reports.pages.common import busy_note, load, number, ok, sections, show

__all__ = [
    "busy_note",
    "load",
    "show",
    "empty",
    "findings",
    "coverage_table",
    "coverage_figure",
    "bytes_table",
    "mask_bytes_table",
    "time_table",
    "against_fastest",
    "time_figure",
    "floors_table",
]

FULL, CAUSAL = (masks.from_causal(c).spelled() for c in (False, True))
SHOWN_BLOCKS = (32, 64, 128)  # of the model's square blocks, the ones the tables show
MIB = float(1 << 20)

empty = sections(
    {
        "coverage": "the share of the scores each mask keeps against the share held by the tiles a "
        "block-sparse kernel visits, per block size",
        "bytes": "each Triton path's bytes under each mask, counted in the interpreter beside its model",
        "mask bytes": "the mask's own bytes per head: the dense boolean tensor a PyTorch path takes "
        "against the rows' runs of keys our kernels read",
        "time": "this machine's time per path and mask against the share of the scores the mask keeps",
        "floors": "each GPU's predicted time floor per path and mask at the study's lengths",
    }
)


def beyond(table: pd.DataFrame) -> pd.DataFrame:
    """Rows under a mask beyond causal."""
    return table[~table["mask"].isin((FULL, CAUSAL))] if "mask" in table else table.iloc[0:0]


def kept(tiles: pd.DataFrame) -> pd.DataFrame:
    """(mask, tokens, query_tokens) → the share of the scores it keeps."""
    return tiles.drop_duplicates(["mask", "tokens", "query_tokens"])[
        ["mask", "tokens", "query_tokens", "kept_share"]
    ]


def coverage_table(tiles: pd.DataFrame) -> pd.DataFrame:
    """Per mask, T and block: kept against visited, and the partial tiles' share."""
    rows = tiles[tiles["block"].isin(SHOWN_BLOCKS)]
    return pd.DataFrame(
        {
            "mask": rows["mask"],
            "T": rows["tokens"],
            "queries": rows["query_tokens"],
            "tiles": rows["block"].map(lambda b: f"{b} × {b}"),
            "kept share": rows["kept_share"],
            "visited share": rows["visited_share"],
            "visited / kept": rows["visited_share"] / rows["kept_share"],
            "partial of visited": rows["partial_share"],
        }
    ).reset_index(drop=True)


def coverage_figure(tiles: pd.DataFrame):
    """Visited share against block size per mask (the kept share dotted): what the tiles add."""
    shown = beyond(tiles)
    if shown.empty:
        return None
    cases = shown.drop_duplicates(["tokens", "query_tokens"])
    fig, axes = plt.subplots(1, len(cases), figsize=(5.5 * len(cases), 3.8), squeeze=False)
    for ax, case in zip(axes[0], cases.itertuples(), strict=True):
        mine = shown[(shown["tokens"] == case.tokens) & (shown["query_tokens"] == case.query_tokens)]
        for (mask, rows), colour in zip(mine.groupby("mask"), sns.color_palette(), strict=False):
            ax.plot(rows["block"], rows["visited_share"], marker="o", color=colour, label=f"{mask}: visited")
            ax.axhline(rows["kept_share"].iloc[0], color=colour, ls=":", label=f"{mask}: kept")
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(mine["block"].unique()), [str(b) for b in sorted(mine["block"].unique())])
        ax.set(
            xlabel="square tile (BLOCK_M = BLOCK_N)",
            ylabel="share of the T × T scores",
            title=f"T = {case.tokens:,}, {case.query_tokens:,} queries",
        )
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


# what makes two points the same problem but for the mask
PEERS = ["impl", "batch", "heads", "kv_heads", "tokens", "query_tokens", "head_dim", "dtype", "inputs"]
PEERS += ["block_m", "block_n"]


def compared(metrics: pd.DataFrame) -> pd.DataFrame:
    """The points under a mask beyond causal (normal inputs) and their peers under causal and
    full: the same path and problem but for the mask."""
    found = ok(metrics)
    if "mask" not in found:
        return found.iloc[0:0]
    found = found[found["inputs"] == "normal"]
    cases = beyond(found)[PEERS].drop_duplicates()
    return found.merge(cases, on=PEERS)


def _triton_bytes(metrics: pd.DataFrame) -> pd.DataFrame:
    counted = compared(metrics)
    return counted[counted["traffic_counted_bytes"].notna()]


BYTES_COLUMNS = ["path", "T", "queries", "mask", "counted MiB", "model MiB", "counted = model", "of full"]


def bytes_table(metrics: pd.DataFrame) -> pd.DataFrame:
    """Each counted point: its bytes counted and modelled, and as a share of the same path's
    bytes without a mask at the same T (where the study has that point)."""
    counted = _triton_bytes(metrics)
    if counted.empty:
        return pd.DataFrame(columns=BYTES_COLUMNS)
    full = counted[counted["mask"] == FULL][[*PEERS, "traffic_counted_bytes"]]
    rows = counted.merge(full.rename(columns={"traffic_counted_bytes": "full"}), on=PEERS, how="left")
    return pd.DataFrame(
        {
            "path": rows["impl"],
            "T": rows["tokens"],
            "queries": rows["query_tokens"],
            "mask": rows["mask"],
            "counted MiB": rows["traffic_counted_bytes"] / MIB,
            "model MiB": rows["traffic_model_bytes"] / MIB,
            "counted = model": rows["traffic_counted_bytes"] == rows["traffic_model_bytes"],
            "of full": rows["traffic_counted_bytes"] / rows["full"],
        }
    ).sort_values(["T", "queries", "path", "mask"], ignore_index=True)


def queries_said(row: dict) -> str:
    """' (4 queries)' where a row has fewer queries than keys, else ''."""
    return f" ({row['queries']:,} queries)" if row["queries"] != row["T"] else ""


def mask_bytes_table(tiles: pd.DataFrame, metrics: pd.DataFrame) -> pd.DataFrame:
    """Per mask and T: the dense boolean mask against the rows' runs of keys, per head, and
    the dense mask against one S of the study at that T (bytes_S of its materialized points,
    per head)."""
    own = beyond(tiles).drop_duplicates(["mask", "tokens", "query_tokens"])
    if own.empty:
        return pd.DataFrame()
    materialized = compared(metrics)
    materialized = materialized[materialized["bytes_S"] > 0]
    per_head = materialized["bytes_S"] / (materialized["batch"] * materialized["heads"])
    case = ["tokens", "query_tokens"]
    s_bytes = per_head.groupby([materialized[c] for c in case]).min().rename("s_bytes")
    own = own.join(s_bytes, on=case)
    return pd.DataFrame(
        {
            "mask": own["mask"],
            "T": own["tokens"],
            "queries": own["query_tokens"],
            "dense mask MiB": own["dense_mask_bytes"] / MIB,
            "runs of keys KiB": own["runs_bytes"] / 1024,
            "dense / runs": own["dense_mask_bytes"] / own["runs_bytes"],
            "dense / S": own["dense_mask_bytes"] / own["s_bytes"],
        }
    ).reset_index(drop=True)


def timed(metrics: pd.DataFrame, tiles: pd.DataFrame) -> pd.DataFrame:
    """The timed points under every mask, each with the share of the scores its mask keeps and
    its time as a share of the same path's time without a mask (full) at the same shape."""
    found = compared(metrics)
    found = found[found["time_ms"].notna()]
    shares = kept(tiles).rename(columns={"kept_share": "kept"})
    found = found.merge(shares, on=["mask", "tokens", "query_tokens"], how="inner")
    full = found[found["mask"] == FULL][[*PEERS, "time_ms"]].rename(columns={"time_ms": "full_ms"})
    return found.merge(full, on=PEERS, how="left").dropna(subset=["full_ms"])


def time_table(metrics: pd.DataFrame, tiles: pd.DataFrame) -> pd.DataFrame:
    """Each timed point beside the share of the scores its mask keeps: its time, as a share of
    the path's time without a mask, this machine's floor for it (the path's own bytes and
    FLOPs at the ceilings' rates) and the share of that floor it reached, and a compiled
    path's first call (its compile, or a load from the compiler's cache), timed apart."""
    rows = timed(metrics, tiles)
    absent = pd.Series(float("nan"), index=rows.index)  # columns of records written before them
    return pd.DataFrame(
        {
            "path": rows["impl"],
            "T": rows["tokens"],
            "queries": rows["query_tokens"],
            "dtype": rows["dtype"],
            "mask": rows["mask"],
            "kept share": rows["kept"],
            "time ms": rows["time_ms"],
            "of full": rows["time_ms"] / rows["full_ms"],
            "floor ms": rows.get("floor_ms", absent),
            "of floor reached": rows.get("floor_share", absent),
            "first call s": rows.get("compile_seconds", absent),
            "timed while busy": rows.get("contention_verdict", absent)
            .astype("string")
            .eq("busy")
            .fillna(False),
        }
    ).sort_values(["T", "path", "kept share"], ignore_index=True)


def against_fastest(metrics: pd.DataFrame, tiles: pd.DataFrame) -> pd.DataFrame:
    """At each timed (T, mask): every path's time over the fastest path's there."""
    rows = time_table(metrics, tiles)
    if rows.empty:
        return rows.assign(**{"× fastest": []})
    fastest = rows.groupby(["T", "queries", "dtype", "mask"])["time ms"].transform("min")
    return rows.assign(**{"× fastest": rows["time ms"] / fastest})


def time_figure(metrics: pd.DataFrame, tiles: pd.DataFrame):
    """Time as a share of the path's unmasked time against the kept share: a path on the
    diagonal computes only what the mask keeps; one near 1 computes every score."""
    rows = timed(metrics, tiles)
    if rows.empty:
        return None
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    case = rows["impl"] + ", T=" + rows["tokens"].map("{:,}".format)
    rows = rows.assign(share=rows["time_ms"] / rows["full_ms"], case=case)
    sns.scatterplot(data=rows, x="kept", y="share", hue="case", style="mask", s=70, ax=ax)
    ax.plot([0, 1], [0, 1], color="grey", ls=":", label="time follows the kept scores")
    ax.set(
        xlabel="share of the scores the mask keeps",
        ylabel="time / the path's time without a mask",
        xlim=(0, 1.05),
        ylim=(0, max(1.1, float(rows["share"].max()) * 1.1)),
        title="Does a path's time follow what the mask keeps?",
    )
    sns.move_legend(ax, "upper left", bbox_to_anchor=(1.01, 1), fontsize=7)
    return fig


def floors_table(predictions: pd.DataFrame) -> pd.DataFrame:
    """Each GPU's predicted floor per path and mask at the study's own lengths."""
    if predictions.empty or "mask" not in predictions:
        return pd.DataFrame()
    rows = predictions[predictions["in_sweep"].astype(bool) & predictions["launch_reason"].isna()]
    same = ["gpu", "path", "batch", "heads", "tokens", "head_dim", "dtype", "block_m", "block_n"]
    cases = beyond(rows)[same].drop_duplicates()
    if cases.empty:
        return pd.DataFrame()
    rows = rows.merge(cases, on=same)
    return pd.DataFrame(
        {
            "GPU": rows["gpu"],
            "path": rows["path"],
            "T": rows["tokens"],
            "d": rows["head_dim"],
            "dtype": rows["dtype"],
            "mask": rows["mask"],
            "issued MiB": rows["issued_bytes"] / MIB,
            "floor ms (low)": rows["time_low_s"] * 1e3,
            "floor ms (high)": rows["time_high_s"] * 1e3,
        }
    ).sort_values(["GPU", "T", "path", "mask"], ignore_index=True)


def findings(metrics: pd.DataFrame, tiles: pd.DataFrame) -> str:
    """The page's findings as sentences, each from the tables."""
    lines = []
    shown = beyond(tiles)
    for case in shown[shown["block"] == 64].to_dict("records"):
        same = (shown["mask"] == case["mask"]) & (shown["tokens"] == case["tokens"])
        wide = shown[same & (shown["query_tokens"] == case["query_tokens"]) & (shown["block"] == 128)]
        at_128 = f"; with 128 × 128 tiles, {wide['visited_share'].iloc[0]:.1%}" if len(wide) else ""
        lines.append(
            f"- **{case['mask']}** at T = {case['tokens']:,} ({case['query_tokens']:,} queries) keeps "
            f"{case['kept_share']:.1%} of the scores. A block-sparse kernel with 64 × 64 tiles computes "
            f"{case['visited_share']:.1%} of them ({case['partial_share']:.0%} of its tiles need the "
            f"element mask){at_128}."
        )
    for row in beyond(bytes_table(metrics)).dropna(subset=["of full"]).to_dict("records"):
        lines.append(
            f"- {row['path']} at T = {row['T']:,}{queries_said(row)} under {row['mask']} moved "
            f"{number(row['counted MiB'])} "
            f"MiB, {row['of full']:.0%} of what it moves without a mask (counted "
            f"{'=' if row['counted = model'] else '≠'} model)."
        )
    for row in beyond(against_fastest(metrics, tiles)).to_dict("records"):
        lines.append(
            f"- On this machine {row['path']} took {number(row['time ms'])} ms at T = {row['T']:,}"
            f"{queries_said(row)} under "
            f"{row['mask']}, {row['of full']:.0%} of its time without a mask, while the mask keeps "
            f"{row['kept share']:.1%} of the scores: its time {follows(row['of full'], row['kept share'])}"
            f"{reached(row)}{slower(row)}{BUSY if row['timed while busy'] else ''}."
        )
    return "\n".join(lines) or "**No finding:** none of this study's points is under a mask beyond causal."


BUSY = " (timed while the machine was busy)"


def reached(row: dict) -> str:
    """'; 12% of this machine's floor for it' where the point has a floor."""
    share = row.get("of floor reached")
    if share is None or pd.isna(share):
        return ""
    return f"; it reached {share:.0%} of this machine's floor for it"


def slower(row: dict) -> str:
    """'; 5.1 × the fastest path's time there' where it was not the fastest."""
    times = row.get("× fastest")
    if times is None or pd.isna(times) or times <= 1:
        return "; the fastest path there" if times == 1 else ""
    return f"; {number(times)} × the fastest path's time there"


def follows(time_share: float, kept_share: float) -> str:
    """In words, whether a time share follows the kept share or every score."""
    if time_share >= 0.75:
        return "follows T², every score, not what the mask keeps"
    if time_share <= 2 * kept_share + 0.05:
        return "follows what the mask keeps"
    return "falls with the mask, but less than what the mask keeps"


def finding(metrics: pd.DataFrame, tiles: pd.DataFrame) -> str | None:
    """The index's line: at one masked case, each counted path's bytes as a share of its
    unmasked bytes, and at the timed case that keeps least, each timed path's time as a share
    of its unmasked time beside the share the mask keeps. None without a mask beyond causal."""
    parts = []
    moved = beyond(bytes_table(metrics)).dropna(subset=["of full"])
    if not moved.empty:
        case = moved.sort_values(["T", "queries", "mask"], ascending=[False, False, True]).iloc[0]
        rows = moved[(moved["T"] == case["T"]) & (moved["queries"] == case["queries"])]
        rows = rows[rows["mask"] == case["mask"]]
        shares = ", ".join(f"{r['path']} {r['of full']:.0%}" for r in rows.to_dict("records"))
        parts.append(
            f"Under {case['mask']} at T = {case['T']:,}, the counted bytes as a share of each path's "
            f"without a mask: {shares}"
        )
    spent = beyond(against_fastest(metrics, tiles))
    if not spent.empty:
        least = spent.sort_values(["T", "kept share"], ascending=[False, True]).iloc[0]
        rows = spent[(spent["T"] == least["T"]) & (spent["mask"] == least["mask"])]
        shares = ", ".join(f"{r['path']} {r['of full']:.0%}" for r in rows.to_dict("records"))
        parts.append(
            f"under {least['mask']} at T = {least['T']:,}, which keeps {least['kept share']:.1%} of the "
            f"scores, this machine's time as a share of each path's without a mask: {shares}"
        )
        if len(rows) > 1:
            first = rows.sort_values("time ms").iloc[0]
            others = rows[rows["path"] != first["path"]].sort_values("time ms")
            ratios = ", ".join(
                f"{number(r['× fastest'])} × for {r['path']}" for r in others.to_dict("records")
            )
            parts.append(
                f"{first['path']} was the fastest there ({number(first['time ms'])} ms; the others' "
                f"time over it: {ratios})"
            )
    if not parts:
        return None
    text = "; ".join(parts)
    return text[0].upper() + text[1:] + "."
