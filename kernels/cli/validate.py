"""``validate``: compare implementations with the float64 reference, forward and (--backward) gradients."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from dataclasses import replace

from kernels import catalog
from kernels.cli.arguments import (
    DEVICE_HELP,
    device_absent,
    load_json,
    output_file,
    resolve_device,
    select_mode,
    time_limit_reason,
)
from kernels.planning.point import (
    Point,
    batch_int,
    heads_int,
    impl_name,
    seed_int,
    tokens_int,
)
from kernels.spec import (
    BLOCK_SIZES,
    DEFAULT_BLOCK,
    DEFAULT_INPUTS,
    DEVICES,
    DTYPES,
    GRADIENTS,
    HEAD_DIMS,
    INPUTS,
    MAX_GRID_YZ,
    MAX_TOKENS,
    REFERENCE,
)


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
        "--query-tokens",
        type=tokens_int,
        help="queries of --tokens shapes against their T keys, at most T (default: T; 1: decode)",
    )
    cmd.add_argument(
        "--kv-heads", type=heads_int, help="K/V heads of --tokens shapes, dividing --heads (default: H)"
    )
    cmd.add_argument(
        "--backward",
        action="store_true",
        help="also each implementation's gradients dQ, dK, dV against the float64 definition's, on the "
        "backward cases (with --tokens: on those shapes); a path without a backward is expected to refuse. "
        "With --kv-heads: the paths that take it and have a backward; not with --query-tokens",
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


def run_validate(args: argparse.Namespace) -> int:
    if (args.head_dim or args.query_tokens or args.kv_heads) and not args.tokens:
        raise SystemExit(
            "--head-dim, --query-tokens and --kv-heads need --tokens (they replace the default shapes)"
        )
    if args.backward and args.query_tokens:
        raise SystemExit(
            f"--backward with --query-tokens {args.query_tokens}: a backward needs as many queries as "
            "keys (fewer are an inference shape, forward only); validate the forward alone, or leave "
            "--query-tokens out (--kv-heads has a backward)"
        )
    if args.gradient != "normal" and not (args.backward and args.tokens):
        raise SystemExit(
            f"--gradient {args.gradient} needs --backward and --tokens (it sets the upstream gradient "
            "of the --tokens shapes' backward; the default backward cases bring their own)"
        )
    device = resolve_device(args.device)
    select_mode(device)
    from kernels.impl import mode
    from kernels.measure import gates, validate
    from kernels.planning import cases as cases_of

    args.impl = registered_impls(args.impl)

    shapes = given_shapes(args) if args.tokens else cases_of.shapes_for(device)
    backward_shapes = cases_of.backward_shapes(
        args.backward, shapes, bool(args.tokens), args.gradient, device
    )
    causals = {"both": (False, True), "true": (True,), "false": (False,)}[args.causal]
    absent = device_absent(device)
    if absent:
        return validate_unavailable(args, absent, shapes, causals, backward_shapes)
    too_large = gates.validation_too_large(args.impl, args.dtype, shapes + backward_shapes, device)
    if too_large:
        raise SystemExit(too_large)
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
    if args.json:  # if this process dies before it writes them: every case an error
        from kernels.io import last_words
        from kernels.measure import not_run

        unrun = not_run.not_run("", "error", **args.cases)
        last_words.leave("validation", [r.to_dict() for r in unrun], args.json)

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


def given_shapes(args: argparse.Namespace) -> tuple:
    """The --tokens shapes (with --query-tokens and --kv-heads where given), each checked as a
    point checks them; an implementation of --impl that does not take them is refused."""
    from kernels.planning.cases import Shape, takes

    shapes = []
    for t in args.tokens:
        for d in args.head_dim or [64]:
            inference = {"query_tokens": args.query_tokens, "kv_heads": args.kv_heads}
            try:  # a point says what query_tokens and kv_heads may be; T and H are the square problem
                point = Point(REFERENCE, args.batch, args.heads, t, d, "float32", False, **inference)
            except ValueError as err:
                raise SystemExit(f"validate --tokens {t}: {err}") from None
            shape = Shape(args.batch, args.heads, t, d, inputs=args.inputs)
            shapes.append(replace(shape, query_tokens=point.query_tokens, kv_heads=point.kv_heads))
    refused = [name for name in args.impl if not all(takes(name, shape) for shape in shapes)]
    if refused:
        raise SystemExit(
            f"--impl {' '.join(refused)}: {catalog.get(refused[0]).shape_refusal(*shapes[0].inference)}; "
            "leave it out, or --query-tokens and --kv-heads"
        )
    return tuple(shapes)


def registered_impls(asked: list[str] | None) -> list[str]:
    """--impl's names, each registered (default: every one); read once the mode is fixed."""
    try:
        return [catalog.get(name).name for name in asked] if asked else list(catalog.names())
    except ValueError as err:
        raise SystemExit(f"--impl: {err}") from None


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
