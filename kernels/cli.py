"""attnio's command line: validate the implementations, measure one sweep point, compile the
Triton kernels for GPU targets, and compute the tile-softmax error map.

The Triton mode is chosen from ``--device`` before any Triton module is imported: cpu runs
the kernels through Triton's interpreter, cuda compiles them. ``--help`` imports neither
torch nor triton.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import sys
import tempfile
from pathlib import Path

from kernels import catalog
from kernels.measure.timing import CPU_MAX_SECONDS
from kernels.planning.point import (
    Point,
    add_cli_arguments,
    batch_int,
    heads_int,
    impl_name,
    launch_pair,
    positive_int,
    seed_int,
    tokens_int,
)
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
    GRADIENTS,
    HEAD_DIMS,
    INPUTS,
    JOB_LIMIT_SECONDS,
    MAX_GRID_YZ,
    MAX_TOKENS,
    REFERENCE,
    STAGE_MIN_SECONDS,
)

DEVICE_HELP = "auto: cuda when torch sees a GPU, else cpu (Triton through its interpreter)"


# mkstemp's names for an atomic write (kernels.io.atomic): ".NAME.XXXXXXXX.tmp"
TEMPORARY_NAME_EXTRA = len("..") + 8 + len(".tmp")


def _writable(text: str, folder: bool) -> str:
    """``text`` as a file (or folder) this process can create: refused at once, while the
    arguments are parsed, so that no work is done for a result that cannot be written."""
    what = "folder" if folder else "file"
    if not text.strip():
        raise argparse.ArgumentTypeError(f"an empty path: name a {what}")
    path = Path(text)
    if len(os.fsencode(text)) >= 4096:
        raise argparse.ArgumentTypeError(
            f"a path of {len(os.fsencode(text)):,} bytes: at most 4,095 (PATH_MAX)"
        )
    if folder:
        if path.exists() and not path.is_dir():
            raise argparse.ArgumentTypeError(f"{text} is a file, not a folder")
    elif path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder; name a file in it")
    elif path.exists() and not path.is_file():
        raise argparse.ArgumentTypeError(
            f"{text} exists and is not a regular file (a device, pipe or socket)"
        )
    start = path if folder else path.parent
    existing = next(p for p in (start, *start.parents) if p.exists() or p == Path(p.anchor or "."))
    if not existing.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: {existing} is a file, not a folder")
    try:
        name_max = os.pathconf(existing, "PC_NAME_MAX")
    except (OSError, ValueError):
        name_max = 255
    for part in path.parts:
        size = len(os.fsencode(part))
        final = part == path.name and not folder
        most = name_max - (TEMPORARY_NAME_EXTRA if final else 0)
        if size > most:
            why = f"{name_max} per name, less {TEMPORARY_NAME_EXTRA} for the atomic write's temporary name"
            raise argparse.ArgumentTypeError(
                f"{text[:60]}…: the name {part[:40]}… is {size:,} bytes; at most {most} here "
                f"({why if final else 'the file system limit'})"
            )
    try:
        fd, probe = tempfile.mkstemp(prefix=".attnio-probe-", dir=existing)
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise argparse.ArgumentTypeError(
            f"{text}: cannot create files in {existing} ({err.strerror})"
        ) from None
    return text


def _checked(text: str, folder: bool) -> str:
    try:
        return _writable(text, folder)
    except OSError as err:  # a folder on the way that cannot even be looked into
        raise argparse.ArgumentTypeError(f"{text}: {err.strerror or err}") from None


def output_file(text: str) -> str:
    """A file to write: refused at once when it cannot be written (a folder, in a folder
    that a file blocks or this process may not write, a name too long)."""
    return _checked(text, folder=False)


def output_folder(text: str) -> str:
    """A folder to write into (made where missing): refused at once when it cannot be."""
    return _checked(text, folder=True)


def positive_seconds(text: str) -> float:
    """A time in seconds: a finite number above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text}: must be a finite number of seconds above 0")
    return value


def resolve_device(name: str) -> str:
    """``auto`` means cuda when torch sees a GPU. An explicit cuda is kept as asked, also
    without a GPU: each command then writes its outputs saying why nothing ran
    (``device_absent``), never falling back to the CPU."""
    from kernels.planning import device

    return device.resolve(name)


def device_absent(device: str) -> str | None:
    from kernels.measure.gates import device_absent as why

    return why(device)


def select_mode(device: str) -> None:
    from kernels.impl import mode

    try:
        mode.set_interpret(device == "cpu")
    except RuntimeError as err:
        raise SystemExit(f"--device {device}: {err}") from None


# --- the parser ----------------------------------------------------------------------------


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Each option's default once: appended where the help does not already say it, and
    never a "None" (an option without a default says what it means when absent)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (
            not action.option_strings
            or "default" in text
            or default is None
            or default is argparse.SUPPRESS
            or isinstance(default, bool)
        ):
            return text
        shown = " ".join(map(str, default)) if isinstance(default, list) else str(default)
        return f"{text} (default: {shown.replace('%', '%%')})".lstrip()


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
    for name, writes in LIMITED_COMMANDS.items():
        add_time_limit(sub.choices[name], name, writes)
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
            elif isinstance(action, argparse.BooleanOptionalAction):
                on, off = action.option_strings
                flags.append(f"{on if action.default else off} (or {off if action.default else on})")
            else:
                default = action.default
                shown = " ".join(map(str, default)) if isinstance(default, list) else default
                flags.append(f"{flag}={shown}" if default not in (None, []) else flag)
        lines.append(f"  {name}: " + ", ".join(flags))
    return "\n".join(lines)


def add_validate_arguments(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument(
        "--impl",
        nargs="+",
        type=impl_name,
        help="registered implementations (default: every one, ours and plugins')",
    )
    cmd.add_argument("--device", choices=DEVICES, default="auto", help=DEVICE_HELP)
    cmd.add_argument("--dtype", nargs="+", choices=DTYPES, default=list(DTYPES))
    cmd.add_argument("--causal", choices=("both", "true", "false"), default="both")
    cmd.add_argument(
        "--tokens",
        nargs="+",
        type=tokens_int,
        help=f"replace the default shapes by these T (with --head-dim; at most {MAX_TOKENS:,})",
    )
    cmd.add_argument(
        "--head-dim", nargs="+", type=int, choices=HEAD_DIMS, help="head dims for --tokens (default: 64)"
    )
    cmd.add_argument("--batch", type=batch_int, default=1, help="B for --tokens shapes")
    cmd.add_argument(
        "--heads", type=heads_int, default=2, help=f"H for --tokens shapes (at most {MAX_GRID_YZ:,})"
    )
    cmd.add_argument("--inputs", choices=INPUTS, default=DEFAULT_INPUTS, help="what --tokens shapes hold")
    cmd.add_argument(
        "--backward",
        action="store_true",
        help="also each implementation's gradients dQ, dK, dV against the float64 definition's, on the "
        "backward cases (with --tokens: on those shapes); a path without a backward is expected to refuse",
    )
    cmd.add_argument(
        "--gradient",
        choices=GRADIENTS,
        default="normal",
        help="the upstream gradient dO of --tokens shapes' backward (large: overflows a float16 dP)",
    )
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
    cmd.add_argument(
        "--budget-seconds",
        type=positive_seconds,
        default=CALL_BUDGET_SECONDS,
        help="see --ceilings; without --ceilings, a point too large for a very slow machine is held "
        "against a quick measurement of this one, taken generously",
    )
    cmd.add_argument(
        "--time-limit",
        type=positive_seconds,
        default=JOB_LIMIT_SECONDS,
        help="seconds after which the measurement stops and the record says failed",
    )
    add_timing_arguments(cmd)
    cmd.add_argument("--out", required=True, type=output_file, help="JSON record to write (atomically)")


def add_timing_arguments(cmd: argparse.ArgumentParser) -> None:
    """Config ``timing``: how long a CPU times a call, a stage and (kernels.spec.rate_seconds)
    a ceiling's rate."""
    cmd.add_argument(
        "--cpu-seconds",
        type=positive_seconds,
        help=f"on a CPU, the most seconds a call is timed, stable or not (default {CPU_MAX_SECONDS:g})",
    )
    cmd.add_argument(
        "--stage-seconds",
        type=positive_seconds,
        help="on a CPU, the least seconds the stages' warm and cold passes take, and a rate "
        f"in proportion (default {STAGE_MIN_SECONDS['cpu']:g})",
    )


def chosen_windows(args: argparse.Namespace):
    """The timing windows --cpu-seconds and --stage-seconds ask for, the defaults for the rest."""
    from kernels.measure.timing import Windows, default_windows

    default = default_windows()
    return Windows(args.cpu_seconds or default.cpu_seconds, args.stage_seconds or default.stage_seconds)


# The commands besides measure that take --time-limit, and what each leaves when it passes.
LIMITED_COMMANDS = {
    "validate": "the cases not run are written with verdict timeout and the reason",
    "build": "its job fails, naming the limit",
    "preflight": "its job fails, naming the limit",
    "ceilings": "the ceilings are written with their rates null and the reason",
    "tile-errors": "its job fails, naming the limit",
}


def add_time_limit(cmd: argparse.ArgumentParser, name: str, writes: str) -> None:
    cmd.add_argument(
        "--time-limit",
        type=positive_seconds,
        help=f"seconds after which the {name} job stops ({writes}); the workflow sets "
        f"limits.rule_seconds.{name.replace('-', '_')}. Default: none",
    )


def time_limit_reason(args: argparse.Namespace) -> str:
    key = args.command.replace("-", "_")
    return (
        f"stopped after the time limit of {args.time_limit:g} s per {args.command} job "
        f"(--time-limit, limits.rule_seconds.{key})"
    )


def product_shape(text: str) -> dict:
    from kernels.planning.sweep import parse_product_shape

    try:
        return parse_product_shape(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def add_ceilings_arguments(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("--device", choices=DEVICES, default="auto", help=DEVICE_HELP)
    cmd.add_argument(
        "--products",
        nargs="*",
        type=product_shape,
        default=[],
        metavar="DTYPE:D:SHORTEST:LONGEST",
        help="the products to time in the stages' shapes, for the expected times (the workflow "
        "passes the sweep's: kernels.planning.sweep.product_shapes); none: no operation rates",
    )
    cmd.add_argument("--threads", type=positive_int, help="torch's thread count (default: torch's own)")
    add_timing_arguments(cmd)
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


def read_ceilings(path: str | None, flag: str = "--ceilings"):
    """The ceilings file held to its schema (kernels/io/ceilings.schema.json), as the workflow
    holds results/ceilings.json: one without its levels, or with a rate that is zero,
    negative or NaN, is refused naming the field, never used to predict."""
    from kernels.io.records import DamagedRecordError, read_leaf

    if path is None:
        return None
    try:
        return read_leaf(path, "ceilings")
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
    device = resolve_device(args.device)  # cuda without a GPU: a skipped record says so
    select_mode(device)  # before the point's implementation (a plugin's kernels) is imported
    point = point_from(args)
    from kernels.io.records import write_record
    from kernels.measure.deadline import deadline
    from kernels.measure.run import base_record, measure, now
    from kernels.measure.timing import windows

    builds = [load_json(path, "--require-build") for path in args.require_build or []]
    validation = load_json(args.require_validation, "--require-validation")
    ceilings = read_ceilings(args.ceilings)
    threads = usable_threads(args.threads)
    if threads:
        import torch

        torch.set_num_threads(threads)
    timed_out = base_record(point, device, args.seed) | {
        "status": "failed",
        "reason": f"stopped after the time limit of {args.time_limit:g} s per measure job (--time-limit)",
    }
    on_expiry = lambda: write_record(timed_out | {"finished_at": now()}, args.out)  # noqa: E731
    with deadline(args.time_limit, on_expiry) as lock, windows(chosen_windows(args)):
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
    if record.get("stage_times"):
        stages = record["stage_times"]
        timed = ", ".join(f"{s['stage']} {s['time_ms']:.3g}/{s['cold_time_ms']:.3g}" for s in stages)
        print(f"stages, warm/cold ms: {timed}")
    return 0


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


def points_named(names: list[str]) -> list[Point]:
    """--point NAME ...: each read back into its point, a bad one named."""
    points = []
    for name in names:
        try:
            points.append(Point.from_name(name))
        except ValueError as err:
            raise ValueError(f"--point {name}: {err}") from None
    return points


def local_target() -> str:
    from kernels.planning.device import local_target as target_of_this_gpu

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
    if args.head_dim and not args.tokens:
        raise SystemExit("--head-dim needs --tokens (it replaces the default shapes)")
    if args.gradient != "normal" and not (args.backward and args.tokens):
        raise SystemExit(
            f"--gradient {args.gradient} needs --backward and --tokens (it sets the upstream gradient "
            "of the --tokens shapes' backward; the default backward cases bring their own)"
        )
    device = resolve_device(args.device)
    select_mode(device)
    from kernels.impl import mode
    from kernels.measure import validate

    args.impl = registered_impls(args.impl)

    if args.tokens:
        shapes = tuple(
            validate.Shape(args.batch, args.heads, t, d, inputs=args.inputs)
            for t in args.tokens
            for d in (args.head_dim or [64])
        )
    else:
        shapes = validate.CUDA_SHAPES if device == "cuda" else validate.CPU_SHAPES
    backward_shapes = backward_shapes_of(args, shapes, device)
    causals = {"both": (False, True), "true": (True,), "false": (False,)}[args.causal]
    absent = device_absent(device)
    if absent:
        return validate_unavailable(args, absent, shapes, causals, backward_shapes)
    refuse_validation_too_large(args, shapes + backward_shapes, device)
    print(
        f"# validate on {device} ({mode.describe()}), blocks {args.block_m}x{args.block_n}, seed {args.seed}",
        flush=True,
    )
    args.finished = []  # what a time limit keeps (write_validation)
    args.cases = dict(
        impls=tuple(args.impl),
        dtypes=tuple(args.dtype),
        causals=causals,
        shapes=shapes,
        block_m=args.block_m,
        block_n=args.block_n,
        seed=args.seed,
    )
    cases = dict(args.cases)
    args.cases["backward_shapes"] = backward_shapes

    def progress(result) -> None:
        args.finished.append(result)
        if not args.quiet:
            print(validate.format_table([result]).splitlines()[1], flush=True)

    from kernels.planning.cases import unfit_cases

    found = load_json(args.preflight, "--preflight")
    unfit = unfit_cases(found) if found else {}
    results = validate.validate(unfit=unfit, device=device, progress=progress, **cases)
    if backward_shapes:
        from kernels.measure.validate_backward import validate_backward

        unfit = unfit_cases(found, "validate_backward") if found else {}
        cases["shapes"] = backward_shapes
        results += validate_backward(unfit=unfit, device=device, progress=progress, **cases)
    print(validate.format_table(results))
    print(validate.summary(results))
    with getattr(args, "write_lock", contextlib.nullcontext()):
        write_validation(args, results)
    return 0 if args.exit_zero or all(r.as_expected for r in results) else 1


def write_validation(args: argparse.Namespace, results=None, timed_out: bool = False) -> None:
    """--json's verdicts; ``timed_out``: those finished before the time limit, every other
    case with verdict timeout and the reason (kernels.measure.not_run.timed_out)."""
    from kernels.io.atomic import write_text_atomic
    from kernels.measure import not_run, validate

    if timed_out:
        results = not_run.timed_out(time_limit_reason(args), list(args.finished), **args.cases)
        print(validate.summary(results), file=sys.stderr, flush=True)
    if args.json:
        write_text_atomic(args.json, json.dumps([r.to_dict() for r in results], indent=1))


def registered_impls(asked: list[str] | None) -> list[str]:
    """--impl's names, each registered (default: every one); read once the mode is fixed."""
    try:
        return [catalog.get(name).name for name in asked] if asked else list(catalog.names())
    except ValueError as err:
        raise SystemExit(f"--impl: {err}") from None


def backward_shapes_of(args: argparse.Namespace, shapes, device: str) -> tuple:
    """--backward's shapes: --tokens' (with --gradient), or the device's backward cases."""
    from kernels.planning.cases import shapes_for

    if not args.backward:
        return ()
    if not args.tokens:
        return shapes_for(device, backward=True)
    return tuple(dataclasses.replace(shape, gradient=args.gradient) for shape in shapes)


def validate_unavailable(args: argparse.Namespace, reason: str, shapes, causals, backward_shapes=()) -> int:
    """cuda asked for without a GPU: every case is written with verdict unavailable and the
    reason, so that the points of the study are recorded as skipped, naming it."""
    from kernels.measure import not_run, validate

    print(f"# validate on {args.device}: nothing run: {reason}", file=sys.stderr, flush=True)
    results = not_run.unavailable(
        reason,
        impls=tuple(args.impl),
        dtypes=tuple(args.dtype),
        causals=causals,
        shapes=shapes,
        block_m=args.block_m,
        block_n=args.block_n,
        seed=args.seed,
        backward_shapes=backward_shapes,
    )
    if not args.quiet:
        print(validate.format_table(results))
    print(validate.summary(results))
    if args.json:
        from kernels.io.atomic import write_text_atomic

        write_text_atomic(args.json, json.dumps([r.to_dict() for r in results], indent=1))
    return 0


def refuse_validation_too_large(args: argparse.Namespace, shapes, device: str) -> None:
    """Shapes validation cannot hold in memory (the float64 reference keeps S and P whole),
    or, under the interpreter, that are larger than measure would run there: refused before
    anything is allocated, naming the flags."""
    from kernels.measure.gates import GIB, MEMORY_FRACTION, figure
    from kernels.measure.memory import available_bytes
    from kernels.models.cost import predicted_bytes

    triton = [name for name in args.impl if catalog.get(name).triton]
    have = available_bytes(device)
    for shape in shapes:
        flags = (
            f"--tokens {shape.tokens} --head-dim {shape.head_dim} --batch {shape.batch} --heads {shape.heads}"
        )
        need = max(
            predicted_bytes(Point(impl, shape.batch, shape.heads, shape.tokens, shape.head_dim, dtype, True))
            for impl in (REFERENCE, *args.impl)
            for dtype in args.dtype
        )
        if need > MEMORY_FRACTION * have:
            raise SystemExit(
                f"validate {flags}: needs about {figure(need / GIB)} GiB (the float64 reference keeps "
                f"S and P whole), {figure(have / GIB)} GiB available on {device}; give smaller --tokens"
            )
        scores = shape.batch * shape.heads * shape.tokens**2
        if device == "cpu" and triton and scores > DEFAULT_INTERPRETER_LIMIT:
            raise SystemExit(
                f"validate {flags}: B·H·T² = {scores:,} score elements, more than the Triton "
                f"interpreter is given in a study ({DEFAULT_INTERPRETER_LIMIT:,}, measure's "
                f"--interpreter-limit); give smaller --tokens, or leave {', '.join(triton)} out of --impl"
            )


def points_and_targets(args: argparse.Namespace) -> tuple[list[Point], list[str]]:
    """--point names and --target names (``local``: this machine's GPU), refused by name."""
    from kernels.build.targets import parse_target

    try:
        points = points_named(args.point)
        targets = [local_target() if name == "local" else name for name in args.target]
        for name in targets:
            parse_target(name)
    except ValueError as err:
        raise SystemExit(str(err)) from None
    return points, targets


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
                Point(
                    impl, **shape, dtype=args.dtype, causal=args.causal, block_m=blocks[0], block_n=blocks[1]
                )
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
        return 0
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


# What a command with --time-limit leaves when the limit passes, and its exit status: verdicts
# and ceilings say why they are missing (the study goes on, naming it); the others have
# nothing to record, so their job fails with the reason in its log.
ON_EXPIRY = {
    "validate": (lambda args: write_validation(args, timed_out=True), 0),
    "ceilings": (lambda args: write_ceilings_unavailable(args, time_limit_reason(args)), 0),
}
NOTHING_TO_RECORD = (lambda args: print(f"error: {time_limit_reason(args)}", file=sys.stderr, flush=True), 1)


def main(argv: list[str] | None = None) -> int:
    from kernels.io.atomic import saying_a_full_disk

    args = build_parser().parse_args(argv)
    return saying_a_full_disk(lambda: run_command(args))


def run_command(args: argparse.Namespace) -> int:
    if getattr(args, "time_limit", None) is None or args.command == "measure":
        return COMMANDS[args.command](args)
    from kernels.measure.deadline import deadline

    write, status = ON_EXPIRY.get(args.command, NOTHING_TO_RECORD)
    with deadline(args.time_limit, lambda: write(args), exit_status=status) as lock:
        args.write_lock = lock
        return COMMANDS[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
