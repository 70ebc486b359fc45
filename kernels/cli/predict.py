"""``predict``: DRAM bytes and time on GPUs you may not have, from the models (no torch, no GPU)."""

from __future__ import annotations

import argparse
import json
import sys

from kernels import catalog
from kernels.cli.arguments import read_ceilings
from kernels.planning.point import (
    Point,
    batch_int,
    heads_int,
    impl_name,
    tokens_int,
)
from kernels.spec import (
    BLOCK_SIZES,
    DEFAULT_BLOCK,
    DTYPES,
    HEAD_DIMS,
    MAX_GRID_YZ,
    MAX_TOKENS,
)


def add_predict_arguments(cmd: argparse.ArgumentParser) -> None:
    from kernels.planning.gpus import GPUS

    cmd.add_argument("--batch", type=batch_int, default=1, help="B")
    cmd.add_argument("--heads", type=heads_int, default=1, help=f"H (at most {MAX_GRID_YZ:,})")
    cmd.add_argument(
        "--tokens", type=tokens_int, nargs="+", required=True, help=f"T (one or more; at most {MAX_TOKENS:,})"
    )
    cmd.add_argument("--head-dim", type=int, choices=HEAD_DIMS, required=True, help="d")
    cmd.add_argument("--dtype", choices=DTYPES, default="float16")
    cmd.add_argument("--causal", action="store_true", help="mask future keys")
    cmd.add_argument("--block-m", type=int, choices=BLOCK_SIZES, default=DEFAULT_BLOCK)
    cmd.add_argument("--block-n", type=int, choices=BLOCK_SIZES, default=DEFAULT_BLOCK)
    cmd.add_argument("--gpu", nargs="+", choices=list(GPUS), default=list(GPUS), help="GPUs to predict for")
    cmd.add_argument("--json", action="store_true", help="print JSON instead of a table")
    cmd.add_argument(
        "--stages",
        action="store_true",
        help="predict each stage of one materialized path instead: the time of each cache level, "
        "DRAM, the products and the exponentials, warm (a band) and cold (kernels.models.hierarchy)",
    )
    cmd.add_argument(
        "--impl",
        type=impl_name,
        help="with --stages: the staged path whose stages are predicted (default: triton_naive; "
        "torch_naive, triton_s_only or a plugin with a stage chain)",
    )
    cmd.add_argument(
        "--ceilings",
        metavar="JSON",
        help="with --stages: this machine's measured rates (python -m kernels ceilings), predicted "
        "for as 'this machine' beside the GPUs",
    )


def run_predict(args: argparse.Namespace) -> int:
    from kernels.models import hierarchy, predict, stage_predictions
    from kernels.models.stage_cost import staged
    from kernels.planning.gpus import GPUS

    if not args.stages and (args.impl or args.ceilings):
        raise SystemExit("predict: --impl and --ceilings go with --stages")
    impl = args.impl or catalog.triton_path("SP")
    if impl not in staged():
        raise SystemExit(f"predict: --impl {impl}: not staged; staged implementations: {', '.join(staged())}")
    blocks = (args.block_m, args.block_n) if catalog.get(impl).triton else (None, None)
    points = []
    for tokens in args.tokens:
        try:
            shape = dict(batch=args.batch, heads=args.heads, tokens=tokens, head_dim=args.head_dim)
            points.append(
                Point(impl, **shape, dtype=args.dtype, mask=args.causal, block_m=blocks[0], block_n=blocks[1])
            )
        except ValueError as err:
            raise SystemExit(f"predict: {err}") from None
    if args.stages:
        targets = stage_predictions.gpu_machines(args.gpu)
        if args.ceilings:
            try:
                targets.append(hierarchy.from_ceilings(read_ceilings(args.ceilings)))
            except ValueError as err:
                raise SystemExit(f"predict: --ceilings {args.ceilings}: {err}") from None
        rows = [row for p in points for target in targets for row in stage_predictions.stage_rows(p, target)]
        print(json.dumps(rows, indent=1) if args.json else stage_predictions.format_rows(rows))
        for note in filter(None, (target.product_assumption(args.dtype) for target in targets)):
            print(f"note: {note}", file=sys.stderr)
        return 0
    rows = [predict.summary_row(p, GPUS[name]) for p in points for name in args.gpu]
    print(json.dumps(rows, indent=1) if args.json else predict.format_rows(rows))
    return 0
