"""``ceilings``: the machine's copy bandwidth and matrix-product rate (JSON)."""

from __future__ import annotations

import argparse
import contextlib
import json

from kernels.cli.arguments import (
    DEVICE_HELP,
    add_timing_arguments,
    chosen_windows,
    device_absent,
    output_file,
    product_shape,
    resolve_device,
    usable_threads,
)
from kernels.planning.point import (
    positive_int,
)
from kernels.spec import (
    DEVICES,
)


def add_ceilings_arguments(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("--device", choices=DEVICES, default="auto", help=DEVICE_HELP)
    cmd.add_argument(
        "--products",
        nargs="*",
        type=product_shape,
        default=[],
        metavar="DTYPE:D:SHORTEST:LONGEST[:rows]",
        help="the products to time in the stages' shapes, for the expected times (the workflow "
        "passes the sweep's: kernels.planning.sweep.product_shapes); ':rows' also times them with "
        "one query row per head (decode); none: no operation rates",
    )
    cmd.add_argument("--threads", type=positive_int, help="torch's thread count (default: torch's own)")
    add_timing_arguments(cmd)
    cmd.add_argument("--out", required=True, type=output_file, help="JSON to write (atomically)")


def run_ceilings(args: argparse.Namespace) -> int:
    device = resolve_device(args.device)
    import torch

    from kernels.io.atomic import write_text_atomic
    from kernels.measure import ceilings

    threads = usable_threads(args.threads)
    if threads:
        torch.set_num_threads(threads)
    absent = device_absent(device)
    if absent:
        write_ceilings_unavailable(args, absent)
        return 0
    from kernels.measure.timing import windows

    with windows(chosen_windows(args)):
        found = ceilings.measure(device, products=args.products)
    with getattr(args, "write_lock", contextlib.nullcontext()):
        write_text_atomic(args.out, json.dumps(found, indent=1) + "\n")
    print(
        f"{found['device_name']} ({found['threads']} threads): copy {found['copy_gbps']:.1f} GB/s, "
        f"{found['matmul_dtype']} matrix product {found['matmul_tflops'] * 1e3:.0f} GFLOP/s -> {args.out}"
    )
    return 0


def write_ceilings_unavailable(args: argparse.Namespace, reason: str) -> None:
    """Ceilings with their rates null and the reason (a device this machine lacks, a time
    limit passed): the study's predictions for this machine are left out, naming it."""
    from kernels.io.atomic import write_text_atomic
    from kernels.measure import ceilings

    device = resolve_device(args.device)
    write_text_atomic(args.out, json.dumps(ceilings.unavailable(device, reason), indent=1) + "\n")
    print(f"ceilings not measured: {reason} -> {args.out}", flush=True)
