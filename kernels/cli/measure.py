"""``measure``: one sweep point into a JSON record (kernels.measure.run decides what is run and how)."""

from __future__ import annotations

import argparse

from kernels.cli.arguments import (
    DEVICE_HELP,
    add_timing_arguments,
    chosen_windows,
    load_json,
    output_file,
    point_from,
    positive_seconds,
    read_ceilings,
    resolve_device,
    select_mode,
    usable_threads,
)
from kernels.planning.point import (
    Point,
    add_cli_arguments,
    positive_int,
    seed_int,
)
from kernels.spec import (
    CALL_BUDGET_SECONDS,
    DEFAULT_INTERPRETER_LIMIT,
    DEVICES,
    JOB_LIMIT_SECONDS,
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
    cmd.add_argument("--seed", type=seed_int, default=0, help="inputs' random seed")
    cmd.add_argument("--out", required=True, type=output_file, help="JSON record to write (atomically)")


def described(point: Point) -> str:
    """The point in the summary line: every field its name holds, the inference dimensions,
    blocks, num_splits and the pass where its name shows them (not at the square problem's
    defaults), so that two points the line could confuse are two points' names apart."""
    said = [point.impl, f"B={point.batch}", f"H={point.heads}"]
    said += [f"kv_heads={point.kv_heads}"] if point.kv_heads is not None else []
    said += [f"T={point.tokens}"]
    said += [f"query_tokens={point.query_tokens}"] if point.query_tokens is not None else []
    said += [f"d={point.head_dim}", point.dtype, f"causal={point.causal}", f"inputs={point.inputs}"]
    said += [f"blocks={point.block_m}×{point.block_n}"] if point.block_m is not None else []
    said += [f"num_splits={point.num_splits}"] if point.num_splits is not None else []
    said += [f"pass={point.direction}"] if point.backward else []
    return " ".join(said)


def run_measure(args: argparse.Namespace) -> int:
    device = resolve_device(args.device)  # cuda without a GPU: a skipped record says so
    select_mode(device)  # before the point's implementation (a plugin's kernels) is imported
    point = point_from(args)
    from kernels.io import last_words
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
    failed = base_record(point, device, args.seed) | {"status": "failed"}
    last_words.leave("record", failed, args.out)  # if this process dies before it writes one
    timed_out = failed | {
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
        f"{described(point)} on {device} ({record['threads']} threads): {record['status']} "
        f"({detail}) -> {args.out}"
    )
    if record.get("stage_times"):
        stages = record["stage_times"]
        timed = ", ".join(f"{s['stage']} {s['time_ms']:.3g}/{s['cold_time_ms']:.3g}" for s in stages)
        print(f"stages, warm/cold ms: {timed}")
    return 0
