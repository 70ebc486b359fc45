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
from reports.pages.common import load, number, ok, sections, show

__all__ = [
    "load",
    "show",
    "empty",
    "findings",
    "coverage_table",
    "coverage_figure",
    "bytes_table",
    "mask_bytes_table",
    "time_table",
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


def _triton_bytes(metrics: pd.DataFrame) -> pd.DataFrame:
    counted = ok(metrics)
    counted = counted[counted["traffic_counted_bytes"].notna()]
    return counted if "mask" in counted else counted.iloc[0:0]


BYTES_COLUMNS = ["path", "T", "queries", "mask", "counted MiB", "model MiB", "counted = model", "of full"]


def bytes_table(metrics: pd.DataFrame) -> pd.DataFrame:
    """Each counted point: its bytes counted and modelled, and as a share of the same path's
    bytes without a mask at the same T (where the study has that point)."""
    counted = _triton_bytes(metrics)
    if counted.empty:
        return pd.DataFrame(columns=BYTES_COLUMNS)
    key = ["impl", "tokens", "query_tokens", "kv_heads", "head_dim", "dtype", "block_m", "block_n"]
    key = [k for k in key if k in counted]
    full = counted[counted["mask"] == FULL].set_index(key)["traffic_counted_bytes"].rename("full")
    rows = counted.join(full, on=key)
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
    materialized = ok(metrics)
    materialized = materialized[materialized["bytes_S"] > 0]
    per_head = materialized["bytes_S"] / (materialized["batch"] * materialized["heads"])
    s_bytes = per_head.groupby(materialized["tokens"]).min()
    return pd.DataFrame(
        {
            "mask": own["mask"],
            "T": own["tokens"],
            "queries": own["query_tokens"],
            "dense mask MiB": own["dense_mask_bytes"] / MIB,
            "runs of keys KiB": own["runs_bytes"] / 1024,
            "dense / runs": own["dense_mask_bytes"] / own["runs_bytes"],
            "dense / S": own["dense_mask_bytes"] / own["tokens"].map(s_bytes),
        }
    ).reset_index(drop=True)


def timed(metrics: pd.DataFrame, tiles: pd.DataFrame) -> pd.DataFrame:
    """The timed points under every mask, each with the share of the scores its mask keeps and
    its time as a share of the same path's time without a mask (full) at the same shape."""
    found = ok(metrics)
    found = found[found["time_ms"].notna() & found["mask"].notna()] if "mask" in found else found.iloc[0:0]
    shares = kept(tiles).rename(columns={"kept_share": "kept"})
    found = found.merge(shares, on=["mask", "tokens", "query_tokens"], how="inner")
    key = ["impl", "tokens", "query_tokens", "kv_heads", "head_dim", "dtype", "batch", "heads"]
    full = found[found["mask"] == FULL].set_index(key)["time_ms"].rename("full_ms")
    return found.join(full, on=key).dropna(subset=["full_ms"])


def time_table(metrics: pd.DataFrame, tiles: pd.DataFrame) -> pd.DataFrame:
    rows = timed(metrics, tiles)
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
        }
    ).sort_values(["T", "path", "kept share"], ignore_index=True)


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
    rows = rows[rows["shape"].isin(beyond(rows)["shape"]) | rows["mask"].isin((FULL, CAUSAL))]
    if beyond(rows).empty:
        return pd.DataFrame()
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
    for row in beyond(time_table(metrics, tiles)).to_dict("records"):
        lines.append(
            f"- On this machine {row['path']} took {number(row['time ms'])} ms at T = {row['T']:,}"
            f"{queries_said(row)} under "
            f"{row['mask']}, {row['of full']:.0%} of its time without a mask, while the mask keeps "
            f"{row['kept share']:.1%} of the scores: its time {follows(row['of full'], row['kept share'])}."
        )
    return "\n".join(lines) or "**No finding:** this study has no point under a mask beyond causal."


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
    spent = beyond(time_table(metrics, tiles))
    if not spent.empty:
        least = spent.sort_values(["T", "kept share"], ascending=[False, True]).iloc[0]
        rows = spent[(spent["T"] == least["T"]) & (spent["mask"] == least["mask"])]
        shares = ", ".join(f"{r['path']} {r['of full']:.0%}" for r in rows.to_dict("records"))
        parts.append(
            f"under {least['mask']} at T = {least['T']:,}, which keeps {least['kept share']:.1%} of the "
            f"scores, this machine's time as a share of each path's without a mask: {shares}"
        )
    if not parts:
        return None
    text = "; ".join(parts)
    return text[0].upper() + text[1:] + "."
