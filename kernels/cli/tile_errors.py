"""``tile-errors``: the tile-local and the fused kernel against float64 over T and BLOCK_N (CSV)."""

from __future__ import annotations

import argparse

from kernels.cli.arguments import DEVICE_HELP, device_absent, output_file, resolve_device, select_mode
from kernels.planning.point import (
    seed_int,
)
from kernels.spec import (
    DEVICES,
)


def add_tile_errors_arguments(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("--device", choices=DEVICES, default="auto", help=DEVICE_HELP)
    cmd.add_argument("--seed", type=seed_int, default=0)
    cmd.add_argument("--out", required=True, type=output_file, help="CSV to write (atomically)")


def run_tile_errors(args: argparse.Namespace) -> int:
    device = resolve_device(args.device)
    select_mode(device)
    from kernels.measure import tile_errors

    absent = device_absent(device)
    if absent:
        tile_errors.write([], args.out)  # the header only: no error was computed
        print(f"no tile errors computed: {absent} -> {args.out} (header only)")
        return 0
    rows = tile_errors.tile_errors(device, seed=args.seed)
    tile_errors.write(rows, args.out)
    print(f"{len(rows)} errors on {device} -> {args.out}")
    return 0
