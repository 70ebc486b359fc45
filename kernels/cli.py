"""attnio's command line: validate the implementations, measure one sweep point, compile the
Triton kernels for GPU targets, and compute the tile-softmax error map.

The Triton mode is chosen from ``--device`` before any Triton module is imported: cpu runs
the kernels through Triton's interpreter, cuda compiles them. ``--help`` imports neither
torch nor triton.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kernels.spec import (
    BLOCK_SIZES,
    CALL_BUDGET_SECONDS,
    DEFAULT_BLOCK,
    DEFAULT_INPUTS,
    DEFAULT_INTERPRETER_LIMIT,
    DEFAULT_TARGETS,
    DEVICES,
    DTYPES,
    GPU_TARGETS,
    HEAD_DIMS,
    IMPLEMENTATIONS,
    INPUTS,
    JOB_LIMIT_SECONDS,
)
from kernels.study.point import Point, add_cli_arguments, launch_pair, positive_int, seed_int

DEVICE_HELP = "auto: cuda when torch sees a GPU, else cpu (Triton through its interpreter)"


def output_file(text: str) -> str:
    """A file to write: refused at once when it names a folder, or a folder that a file
    blocks, so that no work is done for a result that cannot be written."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder; name a file in it")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise argparse.ArgumentTypeError(f"{text}: {parent} is a file, not a folder")
            break
    return text


def resolve_device(name: str) -> str:
    """``auto`` means cuda when torch sees a GPU; an explicit cuda without one is an error."""
    import torch

    from kernels.study import device

    name = device.resolve(name)
    if name == "cuda" and not torch.cuda.is_available():
        raise SystemExit(
            "--device cuda: torch.cuda.is_available() is False on this machine; "
            "use --device cpu to run the kernels through Triton's interpreter"
        )
    return name


def select_mode(device: str) -> None:
    from kernels.impl import mode

    try:
        mode.set_interpret(device == "cpu")
    except RuntimeError as err:
        raise SystemExit(f"--device {device}: {err}") from None


# --- the parser ----------------------------------------------------------------------------


class _Formatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    pass


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m kernels", description=__doc__, formatter_class=_Formatter
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, text: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=text, description=text, formatter_class=_Formatter)

    add_validate_arguments(command("validate", "compare implementations with the float64 reference"))
    add_measure_arguments(command("measure", "measure one sweep point into a JSON record"))
    add_build_arguments(
        command("build", "compile the Triton kernels of sweep points for GPU targets (no GPU needed)")
    )
    add_tile_errors_arguments(
        command("tile-errors", "tile-local and fused kernel against float64 over T and BLOCK_N (CSV)")
    )
    add_ceilings_arguments(command("ceilings", "the machine's copy bandwidth and matrix-product rate (JSON)"))
    add_predict_arguments(
        command("predict", "predicted DRAM bytes and time on GPUs you may not have (no torch, no GPU)")
    )
    add_preflight_arguments(
        command(
            "preflight",
            "compile every launch a GPU plan makes for the target and name those that cannot "
            "run (no GPU needed)",
        )
    )
    add_cli_arguments(command("ncu-target", "(internal) one call of a point for Nsight Compute"))
    for name in ("measure", "ncu-target"):
        sub.choices[name].add_argument("--seed", type=seed_int, default=0, help="inputs' random seed")
    sub.choices["ncu-target"].add_argument(
        "--launch", type=launch_pair, help="the fused kernel's num_warps,num_stages, as measure chose them"
    )
    parser.epilog = defaults_summary(sub.choices)
    return parser


def defaults_summary(commands: dict[str, argparse.ArgumentParser]) -> str:
    """Every command's options with their defaults (``COMMAND --help`` says more)."""
    lines = ["options and defaults (python -m kernels COMMAND --help for more):"]
    for name, cmd in commands.items():
        flags = []
        for action in cmd._actions:
            if not action.option_strings or action.dest == "help":
                continue
            flag = action.option_strings[-1]
            if action.required:
                flags.append(f"{flag} (required)")
            elif isinstance(action, argparse._StoreTrueAction):
                flags.append(flag)
            else:
                default = action.default
                shown = " ".join(map(str, default)) if isinstance(default, list) else default
                flags.append(f"{flag}={shown}" if default is not None else flag)
        lines.append(f"  {name}: " + ", ".join(flags))
    return "\n".join(lines)


def add_validate_arguments(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("--impl", nargs="+", choices=IMPLEMENTATIONS, default=list(IMPLEMENTATIONS))
    cmd.add_argument("--device", choices=DEVICES, default="auto", help=DEVICE_HELP)
    cmd.add_argument("--dtype", nargs="+", choices=DTYPES, default=list(DTYPES))
    cmd.add_argument("--causal", choices=("both", "true", "false"), default="both")
    cmd.add_argument(
        "--tokens",
        nargs="+",
        type=positive_int,
        help="replace the default shapes by these T (with --head-dim)",
    )
    cmd.add_argument(
        "--head-dim", nargs="+", type=int, choices=HEAD_DIMS, help="head dims for --tokens (default 64)"
    )
    cmd.add_argument("--batch", type=positive_int, default=1, help="B for --tokens shapes")
    cmd.add_argument("--heads", type=positive_int, default=2, help="H for --tokens shapes")
    cmd.add_argument("--inputs", choices=INPUTS, default=DEFAULT_INPUTS, help="what --tokens shapes hold")
    cmd.add_argument("--block-m", type=int, choices=BLOCK_SIZES, default=DEFAULT_BLOCK)
    cmd.add_argument("--block-n", type=int, choices=BLOCK_SIZES, default=DEFAULT_BLOCK)
    cmd.add_argument("--seed", type=seed_int, default=0)
    cmd.add_argument(
        "--json", metavar="PATH", type=output_file, help="also write every result as JSON (atomically)"
    )
    cmd.add_argument(
        "--preflight",
        metavar="JSON",
        help="findings of `preflight` for this GPU: the cases whose launches cannot run here are "
        "left out (verdict unfit, with the reason) instead of failing at launch",
    )
    cmd.add_argument("--quiet", action="store_true", help="print the table only at the end")
    cmd.add_argument(
        "--exit-zero",
        action="store_true",
        help="exit 0 even when a verdict is unexpected (the JSON records it)",
    )


def add_measure_arguments(cmd: argparse.ArgumentParser) -> None:
    add_cli_arguments(cmd)
    cmd.add_argument("--device", choices=DEVICES, default="auto", help=DEVICE_HELP)
    cmd.add_argument(
        "--interpreter-limit",
        type=positive_int,
        default=DEFAULT_INTERPRETER_LIMIT,
        help="largest B·H·T² the interpreter runs; bigger points are skipped",
    )
    cmd.add_argument("--no-ncu", action="store_true", help="skip Nsight Compute on a GPU")
    cmd.add_argument(
        "--require-validation",
        metavar="JSON",
        help="validation results (validate --json); if any verdict was "
        "unexpected, the point is recorded as skipped instead of measured",
    )
    cmd.add_argument(
        "--require-build",
        nargs="+",
        metavar="JSON",
        help="build results (build --out) covering this point; if a kernel it "
        "launches failed to build for a required target, the point is skipped",
    )
    cmd.add_argument(
        "--required-targets",
        nargs="+",
        metavar="TARGET",
        help="the targets --require-build must hold for (default: all it built)",
    )
    cmd.add_argument(
        "--threads",
        type=positive_int,
        help="torch's thread count (at most the cores this process may use; default: torch's own)",
    )
    cmd.add_argument(
        "--ceilings",
        metavar="JSON",
        help="the machine's measured rates (python -m kernels ceilings); a point predicted to "
        "take longer than --budget-seconds per call is then skipped",
    )
    cmd.add_argument("--budget-seconds", type=float, default=CALL_BUDGET_SECONDS, help="see --ceilings")
    cmd.add_argument(
        "--time-limit",
        type=float,
        default=JOB_LIMIT_SECONDS,
        help="seconds after which the measurement stops and the record says failed (0: none)",
    )
    cmd.add_argument("--out", required=True, type=output_file, help="JSON record to write (atomically)")


def add_ceilings_arguments(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("--device", choices=DEVICES, default="auto", help=DEVICE_HELP)
    cmd.add_argument("--threads", type=positive_int, help="torch's thread count (default: torch's own)")
    cmd.add_argument("--out", required=True, type=output_file, help="JSON to write (atomically)")


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
        "--out", required=True, type=output_file, help="JSON with one record per variant and target"
    )
    cmd.add_argument(
        "--artifacts",
        required=True,
        help="folder for TTIR, PTX, cubin, SASS and resource dumps (one sub-folder per target)",
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
    cmd.add_argument(
        "--target",
        nargs="+",
        choices=[*GPU_TARGETS, "local"],
        default=["sm_90"],
        help="GPU targets, or 'local' for this machine's GPU",
    )
    cmd.add_argument("--out", required=True, type=output_file, help="JSON with every launch's finding")
    cmd.add_argument(
        "--artifacts", help="folder for the compiled variants' TTIR, PTX, cubin and SASS (default: none kept)"
    )
    cmd.add_argument(
        "--jobs", type=positive_int, default=1, help="compiles side by side (processes; at most the cores)"
    )


def add_predict_arguments(cmd: argparse.ArgumentParser) -> None:
    from kernels.study.gpus import GPUS

    cmd.add_argument("--batch", type=positive_int, default=1, help="B")
    cmd.add_argument("--heads", type=positive_int, default=1, help="H")
    cmd.add_argument("--tokens", type=positive_int, nargs="+", required=True, help="T (one or more)")
    cmd.add_argument("--head-dim", type=int, choices=HEAD_DIMS, required=True, help="d")
    cmd.add_argument("--dtype", choices=DTYPES, default="float16")
    cmd.add_argument("--causal", action="store_true", help="mask future keys")
    cmd.add_argument("--block-m", type=int, choices=BLOCK_SIZES, default=DEFAULT_BLOCK)
    cmd.add_argument("--block-n", type=int, choices=BLOCK_SIZES, default=DEFAULT_BLOCK)
    cmd.add_argument("--gpu", nargs="+", choices=list(GPUS), default=list(GPUS), help="GPUs to predict for")
    cmd.add_argument("--json", action="store_true", help="print JSON instead of a table")


def add_tile_errors_arguments(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("--device", choices=DEVICES, default="auto", help=DEVICE_HELP)
    cmd.add_argument("--seed", type=seed_int, default=0)
    cmd.add_argument("--out", required=True, type=output_file, help="CSV to write (atomically)")


# --- the handlers --------------------------------------------------------------------------


def load_json(path: str | None, flag: str):
    from kernels.io.records import DamagedRecordError
    from kernels.io.records import load_json as load

    if path is None:
        return None
    try:
        return load(path, strict=False)
    except DamagedRecordError as err:
        raise SystemExit(f"{flag} {err}") from None


def point_from(args: argparse.Namespace) -> Point:
    try:
        return Point.from_cli(args)
    except ValueError as err:
        raise SystemExit(str(err)) from None


def usable_threads(asked: int | None) -> int | None:
    """``asked``, but no more than the cores this process may run on."""
    import os

    if asked is None:
        return None
    return min(asked, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else asked)


def run_measure(args: argparse.Namespace) -> int:
    point = point_from(args)
    device = resolve_device(args.device) if args.device != "cuda" else "cuda"
    select_mode(device)
    from kernels.io.records import write_record
    from kernels.measure.deadline import deadline
    from kernels.measure.run import base_record, measure, now

    builds = [load_json(path, "--require-build") for path in args.require_build or []]
    validation = load_json(args.require_validation, "--require-validation")
    ceilings = load_json(args.ceilings, "--ceilings")
    threads = usable_threads(args.threads)
    if threads:
        import torch

        torch.set_num_threads(threads)
    timed_out = base_record(point, device, args.seed) | {
        "status": "failed",
        "reason": f"stopped after the time limit of {args.time_limit:g} s per measure job (--time-limit)",
    }
    on_expiry = lambda: write_record(timed_out | {"finished_at": now()}, args.out)  # noqa: E731
    with deadline(args.time_limit, on_expiry) as lock:
        try:
            record = measure(
                point,
                device,
                seed=args.seed,
                threads=threads,
                use_ncu=not args.no_ncu,
                interpreter_limit=args.interpreter_limit,
                ncu_args=point.cli_args() + ["--seed", str(args.seed)],
                validation=validation,
                builds=builds,
                required_targets=args.required_targets,
                ceilings=ceilings,
                budget_seconds=args.budget_seconds,
            )
        except ValueError as err:  # build results that do not cover this point
            raise SystemExit(f"--require-build: {err}") from None
        with lock:
            write_record(record, args.out)
    detail = record["reason"] or ", ".join(
        f"{key}={record[key]:.4g}"
        for key in ("time_ms", "max_abs_error", "traffic_counted_bytes")
        if record.get(key) is not None
    )
    print(
        f"{point.impl} B={point.batch} H={point.heads} T={point.tokens} d={point.head_dim} "
        f"{point.dtype} causal={point.causal} inputs={point.inputs} on {device} "
        f"({record['threads']} threads): {record['status']} ({detail}) -> {args.out}"
    )
    return 0


def run_ceilings(args: argparse.Namespace) -> int:
    device = resolve_device(args.device)
    import torch

    from kernels.io.atomic import write_text_atomic
    from kernels.measure import ceilings

    threads = usable_threads(args.threads)
    if threads:
        torch.set_num_threads(threads)
    found = ceilings.measure(device)
    write_text_atomic(args.out, json.dumps(found, indent=1) + "\n")
    print(
        f"{found['device_name']} ({found['threads']} threads): copy {found['copy_gbps']:.1f} GB/s, "
        f"{found['matmul_dtype']} matrix product {found['matmul_tflops'] * 1e3:.0f} GFLOP/s -> {args.out}"
    )
    return 0


def run_ncu_target(args: argparse.Namespace) -> int:
    """Warm up (compile), then exactly one call inside the profiler range ncu records."""
    import torch

    select_mode("cuda")
    from kernels.impl.inputs import make_qkv
    from kernels.measure.run import call_of

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


def run_build(args: argparse.Namespace) -> int:
    select_mode("cuda")  # compiled Triton; building needs no GPU
    from kernels.build import compile as build
    from kernels.build.targets import parse_target
    from kernels.io.atomic import write_text_atomic

    try:
        points = [Point.from_name(name) for name in args.point]
        targets = [local_target() if name == "local" else name for name in args.target]
        for name in targets:
            parse_target(name)
    except ValueError as err:
        raise SystemExit(str(err)) from None
    result = build.build(
        points, targets, Path(args.artifacts), progress=print_build_record, candidates=args.candidates
    )
    write_text_atomic(args.out, json.dumps(result, indent=1))
    failed = sum(r["status"] != "ok" for r in result["variants"])
    print(f"{len(result['variants'])} builds ({len(targets)} targets), {failed} failed -> {args.out}")
    return 0


def local_target() -> str:
    from kernels.study.device import local_target as target_of_this_gpu

    target = target_of_this_gpu()
    if target is None:
        raise ValueError("--target local: torch sees no GPU on this machine; name targets as sm_NN")
    return target


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


def run_validate(args: argparse.Namespace) -> int:
    device = resolve_device(args.device)
    select_mode(device)
    from kernels.impl import mode
    from kernels.measure import validate

    if args.head_dim and not args.tokens:
        raise SystemExit("--head-dim needs --tokens (it replaces the default shapes)")
    if args.tokens:
        shapes = tuple(
            validate.Shape(args.batch, args.heads, t, d, inputs=args.inputs)
            for t in args.tokens
            for d in (args.head_dim or [64])
        )
    else:
        shapes = validate.CUDA_SHAPES if device == "cuda" else validate.CPU_SHAPES
    causals = {"both": (False, True), "true": (True,), "false": (False,)}[args.causal]
    print(
        f"# validate on {device} ({mode.describe()}), blocks {args.block_m}x{args.block_n}, seed {args.seed}",
        flush=True,
    )
    progress = (
        None if args.quiet else (lambda r: print(validate.format_table([r]).splitlines()[1], flush=True))
    )
    from kernels.study.cases import unfit_cases

    found = load_json(args.preflight, "--preflight")
    unfit = unfit_cases(found) if found else {}
    results = validate.validate(
        unfit=unfit,
        impls=tuple(args.impl),
        dtypes=tuple(args.dtype),
        causals=causals,
        shapes=shapes,
        device=device,
        block_m=args.block_m,
        block_n=args.block_n,
        seed=args.seed,
        progress=progress,
    )
    print(validate.format_table(results))
    print(validate.summary(results))
    if args.json:
        from kernels.io.atomic import write_text_atomic

        write_text_atomic(args.json, json.dumps([r.to_dict() for r in results], indent=1))
    return 0 if args.exit_zero or all(r.as_expected for r in results) else 1


def run_preflight(args: argparse.Namespace) -> int:
    select_mode("cuda")  # compiled Triton; no GPU needed
    from kernels.build import preflight
    from kernels.build.targets import parse_target
    from kernels.io.atomic import write_text_atomic

    try:
        points = [Point.from_name(name) for name in args.point]
        targets = [local_target() if name == "local" else name for name in args.target]
        for name in targets:
            parse_target(name)
    except ValueError as err:
        raise SystemExit(str(err)) from None
    planned = preflight.study_plan(points) + (preflight.gpu_test_plan() if args.gpu_tests else [])
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


def run_tile_errors(args: argparse.Namespace) -> int:
    device = resolve_device(args.device)
    select_mode(device)
    from kernels.measure import tile_errors

    rows = tile_errors.tile_errors(device, seed=args.seed)
    tile_errors.write(rows, args.out)
    print(f"{len(rows)} errors on {device} -> {args.out}")
    return 0


def run_predict(args: argparse.Namespace) -> int:
    from kernels.study import predict
    from kernels.study.gpus import GPUS

    points = []
    for tokens in args.tokens:
        try:
            shape = dict(batch=args.batch, heads=args.heads, tokens=tokens, head_dim=args.head_dim)
            points.append(
                Point(
                    "triton_naive",
                    **shape,
                    dtype=args.dtype,
                    causal=args.causal,
                    block_m=args.block_m,
                    block_n=args.block_n,
                )
            )
        except ValueError as err:
            raise SystemExit(f"predict: {err}") from None
    rows = [predict.summary_row(p, GPUS[name]) for p in points for name in args.gpu]
    print(json.dumps(rows, indent=1) if args.json else predict.format_rows(rows))
    return 0


COMMANDS = {
    "validate": run_validate,
    "measure": run_measure,
    "build": run_build,
    "tile-errors": run_tile_errors,
    "ceilings": run_ceilings,
    "predict": run_predict,
    "ncu-target": run_ncu_target,
    "preflight": run_preflight,
}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return COMMANDS[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
