"""Arguments and helpers every command shares: paths refused before any work, seconds, the
device and Triton's mode, JSON and ceilings read back, points and targets by name, timing
windows and time limits."""

from __future__ import annotations

import argparse
import math
import os
import tempfile
from pathlib import Path

from kernels.measure.timing import CPU_MAX_SECONDS
from kernels.planning.point import (
    Point,
)
from kernels.spec import (
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
