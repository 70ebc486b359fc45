"""Build page: tables, figures and sentences from results/build.csv.

What a reader wants from it: how many registers and how much shared memory each kernel
variant takes on each target, whether it spills, how many blocks fit on an SM, and whether
the matrix products of the fused kernel use the target's tensor-core instructions.
"""

from __future__ import annotations

import re

import matplotlib.pyplot as plt
import pandas as pd

from kernels.spec import DEFAULT_TARGETS
from reports.pages.common import elsewhere, load, names, no_point_of, sections, show, triton_points

__all__ = [
    "load",
    "show",
    "empty",
    "why_no_builds",
    "why_no_fused",
    "summary",
    "resource_table",
    "flag_colour",
    "resources_figure",
    "tensor_core_summary",
    "fused_table",
    "instruction_figure",
    "memory_instructions",
]

KIB = 1024
FUSED_KERNEL = "attention_fwd_kernel"  # the kernel of our fused and tile-local paths
# what each section shows, for the sentence it shows instead when the study has nothing for it
empty = sections(
    {
        "resources": "the registers, spills, shared memory and resident blocks per SM of every "
        "kernel variant on each target",
        "tensor cores": "whether the fused kernel's matrix products use the target's tensor-core "
        "instructions",
        "candidates": "every launch candidate (num_warps, num_stages) of the fused kernel on each "
        "target, with what it costs and whether a GPU run would time it",
        "instructions": "every variant's memory instructions by class and width",
    }
)
KERNEL_LABELS = {
    "scores_kernel": "naive: S = QKᵀ",
    "softmax_kernel": "naive: softmax",
    "pv_kernel": "naive: O = PV",
}
FLAG_COLOURS = {
    "does not fit": "#f4b6b6",
    "failed": "#f4b6b6",
    "spills": "#f7d9a8",
    "< 2 blocks/SM": "#fbeeb0",
}


def kernel_label(row) -> str:
    if row["kernel"] == "attention_fwd_kernel":
        name = "fused, online softmax" if row["carry_stats"] in (True, "True") else "fused, tile-local"
    else:
        name = KERNEL_LABELS.get(row["kernel"], row["kernel"])
    return name


def natural_key(text: str) -> tuple:
    """'rows of 256' before 'rows of 1024': numbers inside labels compare as numbers."""
    return tuple(
        (0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", str(text))
    )


def natural_order(table: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    return table.sort_values(columns, key=lambda column: column.map(natural_key)).reset_index(drop=True)


def shape_label(row) -> str:
    """dtype, head dim, blocks, mask; 'T≢0 (16)' marks the variant Triton compiles for
    lengths that are not multiples of 16 (no alignment hint on T)."""
    unaligned = "" if row["tokens_aligned"] in (True, "True") else ", T≢0 (16)"
    if pd.notna(row["row_block"]):
        return f"{row['dtype']}, rows of {int(row['row_block'])}{unaligned}"
    mask = "causal" if row["causal"] in (True, "True") else "full"
    head = f"d={int(row['head_dim'])}, " if pd.notna(row["head_dim"]) else ""  # stats: no d
    if pd.isna(row["block_m"]):  # no tiles at all (the split-KV path's merge: a row per program)
        return f"{row['dtype']}, {head}one row per program{unaligned}"
    if pd.isna(row["block_n"]):  # a kernel over query rows alone (the backward's delta)
        return f"{row['dtype']}, {head}{int(row['block_m'])} rows{unaligned}"
    return f"{row['dtype']}, {head}{int(row['block_m'])}×{int(row['block_n'])}, {mask}{unaligned}"


def figure_labels(targets: pd.Series, kernels: pd.Series, shapes: pd.Series, ids: pd.Series) -> pd.Series:
    """'kernel | shape' per row, with the variant id added where two variants of one target
    would otherwise share a label (they differ in a specialization the label omits)."""
    labels = kernels + " | " + shapes
    repeated = pd.DataFrame({"t": targets, "l": labels}).duplicated(keep=False)
    return labels.where(~repeated, labels + " (" + ids + ")")


def short_id(variants: pd.Series) -> pd.Series:
    return variants.str.rsplit("-", n=1).str[-1]


def flags(row) -> str:
    found = []
    if row["status"] != "ok":
        found.append("does not fit" if "shared memory" in str(row["reason"]) else "failed")
    if (row["spill_store_bytes"] or 0) > 0 or (row["stack_bytes"] or 0) > 0:
        found.append("spills")
    if pd.notna(row["blocks_per_sm"]) and row["blocks_per_sm"] < 2:
        found.append("< 2 blocks/SM")
    return ", ".join(found)


def resource_columns(builds: pd.DataFrame) -> dict[str, pd.Series]:
    """What a variant costs an SM, as the build tables show it."""
    return {
        "warps": builds["num_warps"],
        "stages": builds["num_stages"],
        "registers": builds["registers"],
        "spilled B": builds["spill_store_bytes"],
        "shared KiB": builds["shared_bytes"] / KIB,
        "blocks/SM": builds["blocks_per_sm"],
    }


def resource_table(builds: pd.DataFrame) -> pd.DataFrame:
    """One row per variant and target, flagged where it spills, fits fewer than two blocks
    per SM or cannot launch."""
    if builds.empty:
        return pd.DataFrame()
    table = pd.DataFrame(
        {
            "target": builds["target"],
            "id": short_id(builds["variant"]),
            "kernel": builds.apply(kernel_label, axis=1),
            "variant": builds.apply(shape_label, axis=1),
            **resource_columns(builds),
            "limited by": builds["occupancy_limited_by"],
            "tensor cores": builds["tensor_core"],
            "flags": builds.apply(flags, axis=1),
        }
    )
    return natural_order(table, ["target", "kernel", "variant"])


def flag_colour(row) -> list[str]:
    """A row's cells coloured by its worst flag (for show(..., colour=flag_colour))."""
    for flag, shade in FLAG_COLOURS.items():
        if flag in row["flags"]:
            return [f"background-color: {shade}"] * len(row)
    return [""] * len(row)


def resources_figure(table: pd.DataFrame):
    """Registers, shared memory and blocks per SM of every variant, one colour per target."""
    if table.empty:
        return None
    frame = table.assign(label=figure_labels(table["target"], table["kernel"], table["variant"], table["id"]))
    labels = sorted(frame["label"].unique(), key=natural_key)
    targets = sorted(frame["target"].unique())
    height = 0.8 / len(targets)
    fig, axes = plt.subplots(1, 3, figsize=(13, 0.45 * len(labels) + 1.8), sharey=True)
    columns = [
        ("registers", "registers per thread"),
        ("shared KiB", "shared memory per block, KiB"),
        ("blocks/SM", "resident blocks per SM"),
    ]
    for ax, (column, title) in zip(axes, columns, strict=True):
        for i, target in enumerate(targets):
            values = frame[frame["target"] == target].set_index("label")[column].reindex(labels)
            ax.barh(
                [y + i * height for y in range(len(labels))], values.fillna(0), height=height, label=target
            )
        ax.set(title=title)
    axes[2].axvline(2, color="black", linestyle="--", linewidth=1, label="two blocks per SM")
    axes[0].set_yticks([y + height * (len(targets) - 1) / 2 for y in range(len(labels))], labels)
    axes[0].invert_yaxis()
    handles, names = axes[0].get_legend_handles_labels()
    marks = dict(zip(*reversed(axes[2].get_legend_handles_labels()), strict=True))
    fig.legend(
        [*handles, marks["two blocks per SM"]],
        [*names, "two blocks per SM"],
        title="target",
        loc="upper center",
        ncol=len(targets) + 1,
        bbox_to_anchor=(0.5, 1.0),
    )
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.9 / fig.get_figheight()))
    return fig


def tensor_core_summary(builds: pd.DataFrame) -> str:
    """Whether the fused kernel's products run on tensor cores, per target, in words."""
    fused = builds[(builds["kernel"] == FUSED_KERNEL) & (builds["status"] == "ok")]
    if fused.empty:
        tried = int((builds["kernel"] == FUSED_KERNEL).sum())
        return (
            f"None of the {tried:,} fused variants built (the reasons are listed at the top)."
            if tried
            else ""
        )
    lines = []
    for target, group in fused.groupby("target"):
        hgmma = int((group["sass_HGMMA"].astype(float) > 0).sum())
        hmma = int(((group["sass_HMMA"].astype(float) > 0) & (group["sass_HGMMA"].astype(float) == 0)).sum())
        none = len(group) - hgmma - hmma
        parts = [
            f"{hgmma} use HGMMA (warpgroup MMA)" if hgmma else None,
            f"{hmma} use HMMA (warp MMA)" if hmma else None,
            f"{none} use no tensor-core instruction" if none else None,
        ]
        lines.append(
            f"- **{target}**: of {len(group)} fused variants, " + ", ".join(p for p in parts if p) + "."
        )
    return "\n".join(lines)


def fused_table(builds: pd.DataFrame) -> pd.DataFrame:
    """The fused kernel's variants with their tensor-core instruction counts."""
    fused = builds[builds["kernel"] == FUSED_KERNEL]
    if fused.empty:
        return pd.DataFrame()
    table = fused.assign(variant=fused.apply(shape_label, axis=1), kernel=fused.apply(kernel_label, axis=1))
    columns = ["target", "kernel", "variant", "status", "sass_HMMA", "sass_HGMMA", "sass_total"]
    return natural_order(table[columns], ["target", "kernel", "variant"])


MIX_CLASSES = ["HMMA", "HGMMA", "LDG", "STG", "LDGSTS", "LDS", "STS", "LDSM", "LDL", "STL"]


def instruction_figure(builds: pd.DataFrame):
    """Static tensor-core and memory instruction counts per variant, one panel per target."""
    ok = builds[builds["status"] == "ok"]
    if ok.empty:
        return None
    frame = ok.assign(
        label=figure_labels(
            ok["target"],
            ok.apply(kernel_label, axis=1),
            ok.apply(shape_label, axis=1),
            short_id(ok["variant"]),
        )
    )
    targets = sorted(frame["target"].unique())
    labels = sorted(frame["label"].unique(), key=natural_key)
    fig, axes = plt.subplots(
        1,
        len(targets),
        figsize=(6.5 * len(targets), 0.45 * len(labels) + 1.8),
        sharex=True,
        sharey=True,
        squeeze=False,
    )
    for ax, target in zip(axes[0], targets, strict=True):
        counts = (
            frame[frame["target"] == target]
            .set_index("label")[[f"sass_{c}" for c in MIX_CLASSES]]
            .reindex(labels)
            .astype(float)
            .fillna(0)
        )
        left = pd.Series(0.0, index=labels)
        for cls in MIX_CLASSES:
            ax.barh(labels, counts[f"sass_{cls}"], left=left, label=cls)
            left += counts[f"sass_{cls}"]
        ax.set(title=f"{target}: instructions in the SASS", xlabel="static count")
    axes[0][0].invert_yaxis()
    handles, names = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, names, loc="upper center", ncol=len(MIX_CLASSES), bbox_to_anchor=(0.5, 1.0))
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.9 / fig.get_figheight()))
    return fig


def memory_instructions(builds: pd.DataFrame) -> pd.DataFrame:
    """Static counts of memory instructions by class and width (bits), per variant."""
    ok = builds[builds["status"] == "ok"]
    columns = [
        c
        for c in builds.columns
        if c.startswith("sass_") and c.count("_") == 2 and not c.startswith(("sass_LDL", "sass_STL"))
    ]
    if ok.empty or not columns:
        return pd.DataFrame()
    table = ok[columns].astype(float).fillna(0).astype(int)
    table.columns = [c.removeprefix("sass_").replace("_", " ") + " bit" for c in columns]
    table.insert(0, "variant", ok.apply(shape_label, axis=1))
    table.insert(0, "kernel", ok.apply(kernel_label, axis=1))
    table.insert(0, "target", ok["target"])
    return natural_order(table, ["target", "kernel", "variant"])


def launched(builds: pd.DataFrame) -> pd.DataFrame:
    """The variants sweep points launch as they run here (not those built only as a launch
    candidate of the fused kernel)."""
    if "candidate_for" not in builds:
        return builds
    return builds[builds["points"] > 0]


def candidate_table(builds: pd.DataFrame) -> pd.DataFrame:
    """Every launch candidate of the fused kernel (kernels.spec.FUSED_LAUNCH_CANDIDATES) on
    every target: what it costs in registers, spills, shared memory and blocks per SM, and
    whether a GPU run would time it (built, and no spill)."""
    if "candidate_for" not in builds:
        return pd.DataFrame()
    tried = builds[builds["candidate_for"].fillna(0) > 0]
    if tried.empty:
        return pd.DataFrame()
    spilled = tried["spill_store_bytes"].fillna(0).astype(float) > 0
    table = pd.DataFrame(
        {
            "target": tried["target"],
            "variant": tried.apply(shape_label, axis=1),
            **resource_columns(tried),
            "timed on a GPU": (tried["status"] == "ok") & ~spilled,
            "why not": tried["reason"].where(
                tried["status"] != "ok", spilled.map({True: "spills", False: ""})
            ),
        }
    )
    return natural_order(table, ["target", "variant", "warps", "stages"])


def candidate_summary(table: pd.DataFrame) -> str:
    if table.empty:
        return ""
    lines = [
        f"- **{target}**: {int(group['timed on a GPU'].sum())} of {len(group)} candidates build "
        "without spilling"
        for target, group in table.groupby("target")
    ]
    return "\n".join(lines)


def _configured_targets(env: dict) -> list[str]:
    build = (env.get("config") or {}).get("build") or {}
    return list(build.get("targets", DEFAULT_TARGETS))


def why_no_builds(builds: pd.DataFrame, metrics: pd.DataFrame, env: dict) -> str | None:
    """Why the study built no kernel, from its points and configuration; None when it built
    one."""
    if not builds.empty:
        return None
    triton = triton_points(metrics)
    if triton.empty and metrics.empty and elsewhere(metrics):
        return no_point_of(metrics, "Triton point")
    if triton.empty:
        return f"{no_point_of(metrics, 'Triton point')}, so there is no kernel to compile"
    if not _configured_targets(env) and env.get("device") != "cuda":
        return (
            f"no target to build for: build.targets is empty and the run had no GPU (the "
            f"Triton points, of {names(triton['impl'])}, ran under the interpreter)"
        )
    return (
        f"the build table holds no variant, although the study has {len(triton):,} Triton "
        f"point{'s' if len(triton) != 1 else ''} ({names(triton['impl'])})"
    )


def why_no_fused(builds: pd.DataFrame, metrics: pd.DataFrame, env: dict) -> str | None:
    """Why no fused-kernel variant was built, or None when one was."""
    if (builds["kernel"] == FUSED_KERNEL).any():
        return None
    no_builds = why_no_builds(builds, metrics, env)
    if no_builds:
        return no_builds
    triton = triton_points(metrics)["impl"]
    return (
        f"this study has no point of a path on the fused kernel ({FUSED_KERNEL}); its "
        f"Triton implementation{'s' if triton.nunique() != 1 else ''}: {names(triton)}"
    )


def why_no_candidates(builds: pd.DataFrame, metrics: pd.DataFrame, env: dict) -> str | None:
    no_fused = why_no_fused(builds, metrics, env)
    if no_fused:
        return no_fused
    if ((env.get("config") or {}).get("build") or {}).get("candidates") is False:
        return "the configuration turns the launch candidates off (build.candidates: false)"
    return "the build table holds no launch candidate of the fused kernel"


def why_no_instructions(builds: pd.DataFrame, metrics: pd.DataFrame, env: dict) -> str | None:
    no_builds = why_no_builds(builds, metrics, env)
    if no_builds:
        return no_builds
    if not (builds["status"] == "ok").any():
        return f"no variant built: all {len(builds):,} failed (their reasons are listed at the top)"
    return "the build table holds no instruction count (cuobjdump gave none)"


def summary(builds: pd.DataFrame, why: str | None = None) -> str:
    """Per target, the variants built and those that cannot run, with the reason of each
    that cannot; ``why``: why nothing was built, when nothing was (why_no_builds)."""
    if builds.empty:
        return f"No Triton kernel was built: {why or 'the build table is empty'}."
    counts = builds.groupby("target")["status"].value_counts().unstack(fill_value=0)
    lines = []
    for target, row in counts.iterrows():
        built, bad = int(row.get("ok", 0)), int(row.sum() - row.get("ok", 0))
        lines.append(f"- **{target}**: {built} variants built" + (f", **{bad} cannot run**" if bad else ""))
    failed = builds[builds["status"] != "ok"]
    for row in failed.itertuples():
        lines.append(
            f"  - {row.target} {kernel_label(row._asdict())} ({shape_label(row._asdict())}): {row.reason}"
        )
    total = builds["compile_s"].sum()
    return (
        "\n".join(lines) + f"\n\nCompiling them took {total:.1f} s, counting each "
        "variant once (one build job per implementation, dtype, blocks and d, each variant compiled once)."
    )
