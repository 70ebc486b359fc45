"""Command line: ``python -m kernels validate ...`` and ``python -m kernels measure ...``.

The Triton mode is chosen here, from ``--device``, before any Triton module is imported:
cpu runs the kernels through Triton's interpreter, cuda compiles them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kernels.checks import BLOCK_SIZES, DTYPES, HEAD_DIMS
from kernels.devices import DEVICES
from kernels.names import DEFAULT_BLOCK, IMPLEMENTATIONS


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

    from kernels import devices

    name = devices.resolve(name)
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
    val.add_argument("--exit-zero", action="store_true",
                     help="exit 0 even when a verdict is unexpected (the JSON records it)")
    add_point_parser(sub.add_parser("measure", help="measure one sweep point into a JSON record"))
    add_build_parser(sub.add_parser(
        "build", help="compile the Triton kernels of sweep points for GPU targets (no GPU needed)"))
    add_point_parser(sub.add_parser("ncu-target", help="(internal) one call for Nsight Compute"),
                     target=True)
    return parser


def add_point_parser(cmd: argparse.ArgumentParser, target: bool = False) -> None:
    cmd.add_argument("--impl", required=True, choices=IMPLEMENTATIONS)
    cmd.add_argument("--batch", type=positive_int, default=1)
    cmd.add_argument("--heads", type=positive_int, default=1)
    cmd.add_argument("--tokens", type=positive_int, required=True)
    cmd.add_argument("--head-dim", type=int, choices=HEAD_DIMS, required=True)
    cmd.add_argument("--dtype", choices=tuple(DTYPES), required=True)
    cmd.add_argument("--causal", action="store_true")
    cmd.add_argument("--block-m", type=int, choices=BLOCK_SIZES)
    cmd.add_argument("--block-n", type=int, choices=BLOCK_SIZES)
    cmd.add_argument("--sp-dtype", choices=tuple(DTYPES), help="S/P dtype of triton_naive")
    cmd.add_argument("--seed", type=int, default=0)
    if target:
        return
    cmd.add_argument("--device", choices=DEVICES, default="auto")
    cmd.add_argument("--interpreter-limit", type=positive_int, default=None,
                     help="largest B·H·T² the interpreter runs; bigger points are skipped")
    cmd.add_argument("--no-ncu", action="store_true", help="skip Nsight Compute on a GPU")
    cmd.add_argument("--require-validation", metavar="JSON",
                     help="validation results (validate --json); if any verdict was "
                          "unexpected, the point is recorded as skipped instead of measured")
    cmd.add_argument("--require-build", nargs="+", metavar="JSON",
                     help="build results (build --out) covering this point; if a kernel it "
                          "launches failed to build for a required target, the point is skipped")
    cmd.add_argument("--required-targets", nargs="+", metavar="TARGET",
                     help="the targets --require-build must hold for (default: all it built)")
    cmd.add_argument("--out", required=True, help="JSON record to write (atomically)")


def add_build_parser(cmd: argparse.ArgumentParser) -> None:
    from kernels.targets import DEFAULT_TARGETS

    cmd.add_argument("--point", nargs="+", required=True, metavar="NAME",
                     help="sweep points by name, e.g. triton_flash/float16/B1-H1-T1024-d64-causal-bm64-bn64")
    cmd.add_argument("--target", nargs="+", default=list(DEFAULT_TARGETS),
                     help="sm_NN targets, or 'local' for this machine's GPU (default: %(default)s)")
    cmd.add_argument("--out", required=True, help="JSON with one record per variant and target")
    cmd.add_argument("--artifacts", required=True,
                     help="folder for PTX, cubin, SASS and resource dumps (one sub-folder per target)")


def point_from(args: argparse.Namespace):
    from kernels.model import Point

    triton = args.impl.startswith("triton_")
    for flag in ("block_m", "block_n"):
        if getattr(args, flag) is not None and not triton:
            raise SystemExit(f"--{flag.replace('_', '-')} applies to the Triton implementations only, "
                             f"not --impl {args.impl}")
    if args.sp_dtype and args.impl != "triton_naive":
        raise SystemExit(f"--sp-dtype applies to --impl triton_naive only, not {args.impl}")
    return Point(args.impl, args.batch, args.heads, args.tokens, args.head_dim, args.dtype,
                 args.causal, args.block_m, args.block_n, args.sp_dtype)


def point_args(args: argparse.Namespace) -> list[str]:
    """The point's own flags, to hand to a child process (ncu-target)."""
    out = ["--impl", args.impl, "--batch", str(args.batch), "--heads", str(args.heads),
           "--tokens", str(args.tokens), "--head-dim", str(args.head_dim), "--dtype", args.dtype,
           "--seed", str(args.seed)]
    for flag in ("block_m", "block_n", "sp_dtype"):
        if getattr(args, flag) is not None:
            out += [f"--{flag.replace('_', '-')}", str(getattr(args, flag))]
    return out + (["--causal"] if args.causal else [])


def run_measure(args: argparse.Namespace) -> int:
    point = point_from(args)
    device = resolve_device(args.device) if args.device != "cuda" else "cuda"
    select_mode(device)
    from kernels.measure import DEFAULT_INTERPRETER_LIMIT, measure
    from kernels.records import write_record

    builds = [load_json(path, "--require-build") for path in args.require_build or []]
    try:
        record = measure(point, device, seed=args.seed, use_ncu=not args.no_ncu,
                         interpreter_limit=args.interpreter_limit or DEFAULT_INTERPRETER_LIMIT,
                         ncu_args=point_args(args),
                         validation=load_json(args.require_validation, "--require-validation"),
                         builds=builds, required_targets=args.required_targets)
    except ValueError as err:  # build results that do not cover this point
        raise SystemExit(f"--require-build: {err}") from None
    write_record(record, args.out)
    detail = record["reason"] or ", ".join(
        f"{key}={record[key]:.4g}" for key in ("time_ms", "max_abs_error", "traffic_counted_bytes")
        if record.get(key) is not None)
    print(f"{point.impl} B={point.batch} H={point.heads} T={point.tokens} d={point.head_dim} "
          f"{point.dtype} causal={point.causal} on {device}: {record['status']} ({detail}) "
          f"-> {args.out}")
    return 0


def load_json(path: str | None, flag: str):
    if path is None:
        return None
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        raise SystemExit(f"{flag} {path}: cannot read it: {err}") from None


def run_ncu_target(args: argparse.Namespace) -> int:
    """Warm up (compile), then exactly one call inside the profiler range ncu records."""
    import torch

    select_mode("cuda")
    from kernels.inputs import make_qkv
    from kernels.measure import call_of

    point = point_from(args)
    q, k, v = make_qkv(point.batch, point.heads, point.tokens, point.head_dim,
                       getattr(torch, point.dtype), "cuda", args.seed)
    call = call_of(point, q, k, v)
    call()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    call()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    return 0


def run_build(args: argparse.Namespace) -> int:
    select_mode("cuda")  # compiled Triton; building needs no GPU
    from kernels import build, sweep
    from kernels.atomic import write_text_atomic
    from kernels.targets import parse_target

    try:
        points = [sweep.point_from_name(name) for name in args.point]
        targets = [local_target() if name == "local" else name for name in args.target]
        for name in targets:
            parse_target(name)
    except ValueError as err:
        raise SystemExit(str(err)) from None
    result = build.build(points, targets, Path(args.artifacts), progress=print_build_record)
    write_text_atomic(args.out, json.dumps(result, indent=1))
    failed = sum(r["status"] != "ok" for r in result["variants"])
    print(f"{len(result['variants'])} builds ({len(targets)} targets), {failed} failed -> {args.out}")
    return 0


def local_target() -> str:
    from kernels.devices import local_target as target_of_this_gpu

    target = target_of_this_gpu()
    if target is None:
        raise ValueError("--target local: torch sees no GPU on this machine; name targets as sm_NN")
    return target


def print_build_record(record: dict) -> None:
    c = record["constants"]
    shape = " ".join(f"{k}={c[k]}" for k in ("HEAD_DIM", "BLOCK_M", "BLOCK_N", "ROW_BLOCK") if k in c)
    if record["status"] == "ok":
        detail = (f"{record['registers']} regs, {record['shared_bytes']:,} B shared, "
                  f"{record['blocks_per_sm']} blocks/SM, {record['compile_s']:.1f} s")
    else:
        detail = record["reason"][:160]
    print(f"{record['target']} {record['variant']} {shape}: {record['status']} ({detail})", flush=True)


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
    return 0 if args.exit_zero or all(r.as_expected for r in results) else 1


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    commands = {"validate": run_validate, "measure": run_measure, "build": run_build,
                "ncu-target": run_ncu_target}
    return commands[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
