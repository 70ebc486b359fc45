"""Command line: ``python -m kernels validate ...``.

The Triton mode is chosen here, from ``--device``, before any Triton module is imported:
cpu runs the kernels through Triton's interpreter, cuda compiles them.
"""

from __future__ import annotations

import argparse
import json
import sys

from kernels.checks import BLOCK_SIZES, DTYPES, HEAD_DIMS
from kernels.names import DEFAULT_BLOCK, IMPLEMENTATIONS

DEVICES = ("auto", "cpu", "cuda")


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value


def resolve_device(name: str) -> str:
    """``auto`` means cuda when torch sees a GPU; an explicit cuda without one is an error."""
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch.cuda.is_available() is False on this machine; "
                         "use --device cpu to run the kernels through Triton's interpreter")
    return name


def select_mode(device: str) -> None:
    from kernels import runtime

    try:
        runtime.set_interpret(device == "cpu")
    except RuntimeError as err:
        raise SystemExit(f"--device {device}: {err}") from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m kernels", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    val = sub.add_parser("validate", help="compare every implementation with the float64 reference")
    val.add_argument("--impl", nargs="+", choices=IMPLEMENTATIONS, default=list(IMPLEMENTATIONS))
    val.add_argument("--device", choices=DEVICES, default="auto")
    val.add_argument("--dtype", nargs="+", choices=tuple(DTYPES), default=list(DTYPES))
    val.add_argument("--causal", choices=("both", "true", "false"), default="both")
    val.add_argument("--tokens", nargs="+", type=positive_int,
                     help="replace the default shapes by these T (with --head-dim)")
    val.add_argument("--head-dim", nargs="+", type=int, choices=HEAD_DIMS,
                     help="head dims for --tokens (default 64)")
    val.add_argument("--batch", type=positive_int, default=1, help="B for --tokens shapes")
    val.add_argument("--heads", type=positive_int, default=2, help="H for --tokens shapes")
    val.add_argument("--block-m", type=int, choices=BLOCK_SIZES, default=DEFAULT_BLOCK)
    val.add_argument("--block-n", type=int, choices=BLOCK_SIZES, default=DEFAULT_BLOCK)
    val.add_argument("--seed", type=int, default=0)
    val.add_argument("--json", metavar="PATH", help="also write every result as JSON (atomically)")
    val.add_argument("--quiet", action="store_true", help="print the table only at the end")
    return parser


def run_validate(args: argparse.Namespace) -> int:
    device = resolve_device(args.device)
    select_mode(device)
    from kernels import runtime, validate

    if args.head_dim and not args.tokens:
        raise SystemExit("--head-dim needs --tokens (it replaces the default shapes)")
    if args.tokens:
        shapes = tuple(validate.Shape(args.batch, args.heads, t, d)
                       for t in args.tokens for d in (args.head_dim or [64]))
    else:
        shapes = validate.CUDA_SHAPES if device == "cuda" else validate.CPU_SHAPES
    causals = {"both": (False, True), "true": (True,), "false": (False,)}[args.causal]
    print(f"# validate on {device} ({runtime.describe()}), blocks {args.block_m}x{args.block_n}, "
          f"seed {args.seed}", flush=True)
    progress = None if args.quiet else (
        lambda r: print(validate.format_table([r]).splitlines()[1], flush=True))
    results = validate.validate(
        impls=tuple(args.impl), dtypes=tuple(args.dtype), causals=causals, shapes=shapes,
        device=device, block_m=args.block_m, block_n=args.block_n, seed=args.seed,
        progress=progress,
    )
    print(validate.format_table(results))
    print(validate.summary(results))
    if args.json:
        from kernels.atomic import write_text_atomic

        write_text_atomic(args.json, json.dumps([r.to_dict() for r in results], indent=1))
    return 0 if all(r.as_expected for r in results) else 1


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "validate":
        return run_validate(args)
    raise AssertionError(args.command)


if __name__ == "__main__":
    sys.exit(main())
