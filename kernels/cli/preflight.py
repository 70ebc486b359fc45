"""``preflight``: compile every launch a GPU plan makes for a target and name those that cannot run."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from kernels.cli.arguments import output_file, output_folder, points_and_targets, select_mode, usable_threads
from kernels.planning.point import (
    positive_int,
)
from kernels.spec import (
    GPU_TARGETS,
)


def add_preflight_arguments(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument(
        "--point",
        nargs="+",
        default=[],
        metavar="NAME",
        help="sweep points by name: each one's launches and candidates, and the validation of its "
        "implementation, dtype and blocks on the GPU shapes (torch points launch nothing to check)",
    )
    cmd.add_argument(
        "--gpu-tests", action="store_true", help="also what the tests marked gpu (tests/test_gpu.py) launch"
    )
    cmd.add_argument("--backward", action="store_true", help="also each point's backward launches")
    cmd.add_argument(
        "--target",
        nargs="+",
        choices=[*GPU_TARGETS, "local"],
        default=["sm_90"],
        help="GPU targets, or 'local' for this machine's GPU",
    )
    cmd.add_argument("--out", required=True, type=output_file, help="JSON with every launch's finding")
    cmd.add_argument(
        "--artifacts",
        type=output_folder,
        help="folder for the compiled variants' TTIR, PTX, cubin and SASS (default: none kept)",
    )
    cmd.add_argument(
        "--jobs", type=positive_int, default=1, help="compiles side by side (processes; at most the cores)"
    )


def run_preflight(args: argparse.Namespace) -> int:
    select_mode("cuda")  # compiled Triton; no GPU needed
    from kernels.build import preflight
    from kernels.io.atomic import write_text_atomic

    points, targets = points_and_targets(args)
    planned = preflight.study_plan(points) + (preflight.gpu_test_plan() if args.gpu_tests else [])
    planned += preflight.backward_plan([p for p in points if args.backward or p.backward])
    artifacts = Path(args.artifacts) if args.artifacts else None
    found = preflight.preflight(planned, targets, artifacts, usable_threads(args.jobs))
    write_text_atomic(args.out, json.dumps(found, indent=1) + "\n")
    for line in preflight.problems(found):
        print(line)
    counts = found["counts"]
    print(
        f"preflight on {', '.join(targets)}: {len(found['launches'])} launches of {len(found['variants'])} "
        f"compiled variants in {found['seconds']:.0f} s: {counts['ok']} ok, {counts['spills']} spill, "
        f"{counts['unfit']} cannot run -> {args.out}"
    )
    return 0
