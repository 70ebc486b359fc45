"""``build``: compile the Triton kernels of sweep points for GPU targets (no GPU needed)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from kernels.cli.arguments import output_file, output_folder, points_and_targets, select_mode
from kernels.spec import (
    DEFAULT_TARGETS,
    GPU_TARGETS,
)


def add_build_arguments(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument(
        "--point",
        nargs="+",
        required=True,
        metavar="NAME",
        help="sweep points by name, e.g. triton_flash/float16/B1-H1-T1024-d64-causal-bm64-bn64-normal",
    )
    cmd.add_argument(
        "--target",
        nargs="+",
        choices=[*GPU_TARGETS, "local"],
        default=list(DEFAULT_TARGETS),
        help="GPU targets, or 'local' for this machine's GPU",
    )
    cmd.add_argument(
        "--candidates",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also compile the fused kernel's launch candidates (num_warps, num_stages)",
    )
    cmd.add_argument(
        "--backward",
        action="store_true",
        help="also compile each point's backward launches (the paths with a backward module)",
    )
    cmd.add_argument(
        "--out", required=True, type=output_file, help="JSON with one record per variant and target"
    )
    cmd.add_argument(
        "--artifacts",
        required=True,
        type=output_folder,
        help="folder for TTIR, PTX, cubin, SASS and resource dumps (one sub-folder per target)",
    )


def run_build(args: argparse.Namespace) -> int:
    select_mode("cuda")  # compiled Triton; building needs no GPU
    from kernels.build import compile as build
    from kernels.io.atomic import write_text_atomic

    points, targets = points_and_targets(args)
    result = build.build(
        points,
        targets,
        Path(args.artifacts),
        progress=print_build_record,
        candidates=args.candidates,
        backward=args.backward,
    )
    write_text_atomic(args.out, json.dumps(result, indent=1))
    failed = sum(r["status"] != "ok" for r in result["variants"])
    print(f"{len(result['variants'])} builds ({len(targets)} targets), {failed} failed -> {args.out}")
    return 0


def print_build_record(record: dict) -> None:
    c = record["constants"]
    shape = " ".join(f"{k}={c[k]}" for k in ("HEAD_DIM", "BLOCK_M", "BLOCK_N", "ROW_BLOCK") if k in c)
    if record["status"] == "ok":
        detail = (
            f"{record['registers']} regs, {record['shared_bytes']:,} B shared, "
            f"{record['blocks_per_sm']} blocks/SM, {record['compile_s']:.1f} s"
        )
    else:
        detail = record["reason"][:160]
    print(f"{record['target']} {record['variant']} {shape}: {record['status']} ({detail})", flush=True)
