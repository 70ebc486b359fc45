"""Build results (``kernels.build.compile``) → one table, a row per kernel variant and target.

The instruction mix is flattened into ``sass_<class>`` columns (``sass_LDG_128``: 128-bit
global loads); kernel constants used by the report get their own columns.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from kernels.build.sass import INSTRUCTION_CLASSES, TENSOR_CORE_CLASSES
from kernels.io.atomic import write_atomic

CONSTANT_COLUMNS = {
    "HEAD_DIM": "head_dim",
    "BLOCK_M": "block_m",
    "BLOCK_N": "block_n",
    "CAUSAL": "causal",
    "CARRY_STATS": "carry_stats",
    "ROW_BLOCK": "row_block",
    "BLOCK_R": "block_r",
}
COLUMNS = [
    "target",
    "kernel",
    "variant",
    "status",
    "reason",
    "dtype",
    "head_dim",
    "block_m",
    "block_n",
    "causal",
    "carry_stats",
    "row_block",
    "block_r",
    "tokens_aligned",
    "num_warps",
    "num_stages",
    "compile_s",
    "registers",
    "stack_bytes",
    "local_bytes",
    "spill_store_bytes",
    "spill_load_bytes",
    "static_shared_bytes",
    "dynamic_shared_bytes",
    "shared_bytes",
    "blocks_per_sm",
    "occupancy_limited_by",
    "warps_per_sm",
    "occupancy",
    "tensor_core",
    "points",
    "candidate_for",
    "backward_for",
    "cubin",
]


def _users(by_point: dict[str, list[str]]) -> dict[str, list[str]]:
    """variant id → the points that name it."""
    users: dict[str, list[str]] = {}
    for point, variants in by_point.items():
        for variant in variants:
            users.setdefault(variant, []).append(point)
    return users


def rows(result: dict) -> list[dict]:
    users = _users(result["points"])
    tried = _users(result.get("candidates", {}))  # the points a variant is a launch candidate of
    backs = _users(result.get("backward", {}))  # the points whose backward launches it
    out = []
    for record in result["variants"]:
        row = {key: record.get(key) for key in COLUMNS}
        for constant, column in CONSTANT_COLUMNS.items():
            row[column] = record["constants"].get(constant)
        pointers = [t for t in record["argument_types"] if t.startswith("*")]
        row["dtype"] = pointers[0].lstrip("*") if pointers else None
        row["tokens_aligned"] = "T" in record["aligned_16"]  # Triton specializes T % 16 == 0
        row["points"] = len(users.get(record["variant"], []))
        row["candidate_for"] = len(tried.get(record["variant"], []))
        row["backward_for"] = len(backs.get(record["variant"], []))
        row["cubin"] = record.get("artifacts", {}).get("cubin")
        mix = record.get("instructions") or {}
        for key, count in mix.items():
            row[f"sass_{key.replace('.', '_')}"] = count
        row["tensor_core"] = ", ".join(c for c in TENSOR_CORE_CLASSES if mix.get(c)) or (
            "none" if mix else None
        )
        out.append(row)
    return out


def build_table(paths: Iterable[str | os.PathLike]) -> pd.DataFrame:
    """One row per (variant, target); a variant built by several jobs (two lengths that
    specialize alike, say) appears once."""
    records = [row for path in paths for row in rows(json.loads(Path(path).read_text()))]
    sass = [f"sass_{c}" for c in ("total", *INSTRUCTION_CLASSES)]
    frame = pd.DataFrame(records, columns=None if records else COLUMNS + sass)
    for column in COLUMNS + sass:
        if column not in frame:
            frame[column] = None  # instruction counts: filled with 0 below
    widths = sorted(c for c in frame.columns if c.startswith("sass_") and c not in sass)
    frame = frame[COLUMNS + sass + widths]
    counts = sass + widths
    failed_early = frame["sass_total"].isna()  # compilation failed: no SASS at all
    frame[counts] = frame[counts].fillna(0).astype(int).astype(object)
    frame.loc[failed_early, counts] = None
    if records:  # a variant built by several jobs: one row, counting all its points
        for counted in ("points", "candidate_for", "backward_for"):
            frame[counted] = frame.groupby(["target", "variant"])[counted].transform("sum")
    frame = frame.drop_duplicates(subset=["target", "variant"])
    return frame.sort_values(["target", "kernel", "variant"]).reset_index(drop=True)


def write_build_table(paths: Iterable[str | os.PathLike], out: str | os.PathLike) -> pd.DataFrame:
    frame = build_table(paths)
    write_atomic(out, lambda tmp: frame.to_csv(tmp, index=False), sealed=True)
    return frame
