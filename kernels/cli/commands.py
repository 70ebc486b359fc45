"""Every command: its one-line help, its arguments, what runs it, and what it leaves when its
--time-limit passes (verdicts and ceilings say why they are missing and the study goes on;
the others have nothing to record, so their job fails with the reason in its log)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass

from kernels.cli import (
    build,
    ceilings,
    mask_tiles,
    measure,
    ncu_target,
    predict,
    preflight,
    tile_errors,
    validate,
)
from kernels.cli.arguments import time_limit_reason


def _nothing_to_record(args: argparse.Namespace) -> None:
    print(f"error: {time_limit_reason(args)}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Command:
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    on_expiry: Callable[[argparse.Namespace], None] = _nothing_to_record
    expiry_status: int = 1


COMMANDS = {
    "validate": Command(
        "compare implementations with the float64 reference",
        validate.add_validate_arguments,
        validate.run_validate,
        lambda args: validate.write_validation(args, timed_out=True),
        0,
    ),
    "measure": Command(
        "measure one sweep point into a JSON record", measure.add_measure_arguments, measure.run_measure
    ),
    "build": Command(
        "compile the Triton kernels of sweep points for GPU targets (no GPU needed)",
        build.add_build_arguments,
        build.run_build,
    ),
    "tile-errors": Command(
        "tile-local and fused kernel against float64 over T and BLOCK_N (CSV)",
        tile_errors.add_tile_errors_arguments,
        tile_errors.run_tile_errors,
    ),
    "ceilings": Command(
        "the machine's copy bandwidth and matrix-product rate (JSON)",
        ceilings.add_ceilings_arguments,
        ceilings.run_ceilings,
        lambda args: ceilings.write_ceilings_unavailable(args, time_limit_reason(args)),
        0,
    ),
    "predict": Command(
        "predicted DRAM bytes and time on GPUs you may not have (no torch, no GPU)",
        predict.add_predict_arguments,
        predict.run_predict,
    ),
    "mask-tiles": Command(
        "share of the scores a mask keeps against the tiles a block-sparse kernel visits (no torch)",
        mask_tiles.add_mask_tiles_arguments,
        mask_tiles.run_mask_tiles,
    ),
    "preflight": Command(
        "compile every launch a GPU plan makes for the target and name those that cannot run (no GPU needed)",
        preflight.add_preflight_arguments,
        preflight.run_preflight,
    ),
    "ncu-target": Command(
        "(internal) one call of a point for Nsight Compute",
        ncu_target.add_ncu_target_arguments,
        ncu_target.run_ncu_target,
    ),
}
