"""``ncu-target`` (internal): one call of a point inside the profiler range Nsight Compute records."""

from __future__ import annotations

import argparse

from kernels.cli.arguments import point_from, select_mode
from kernels.planning.point import (
    add_cli_arguments,
    launch_pair,
    seed_int,
)


def run_ncu_target(args: argparse.Namespace) -> int:
    """Warm up (compile), then exactly one call inside the profiler range ncu records."""
    import torch

    select_mode("cuda")
    from kernels.impl.inputs import make_qkv
    from kernels.measure.forward_run import call_of

    point = point_from(args)
    q, k, v = make_qkv(
        point.batch,
        point.heads,
        point.tokens,
        point.head_dim,
        getattr(torch, point.dtype),
        "cuda",
        args.seed,
        inputs=point.inputs,
    )
    call = call_of(point, q, k, v, args.launch)
    call()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    call()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    return 0


def add_ncu_target_arguments(cmd: argparse.ArgumentParser) -> None:
    add_cli_arguments(cmd)
    cmd.add_argument("--seed", type=seed_int, default=0, help="inputs' random seed")
    cmd.add_argument(
        "--launch", type=launch_pair, help="the fused kernel's num_warps,num_stages, as measure chose them"
    )
