"""attnio's command line, one module per command (each thin: what a command decides lives in
kernels.measure, kernels.planning, kernels.models or kernels.build), its shared arguments in
``arguments`` and the table of commands in ``commands``. ``--help`` imports neither torch
nor triton."""

from __future__ import annotations

import argparse

from kernels.cli.arguments import read_ceilings, resolve_device
from kernels.cli.parser import build_parser

__all__ = ["build_parser", "main", "read_ceilings", "resolve_device", "run_command"]


def main(argv: list[str] | None = None) -> int:
    from kernels.io import last_words
    from kernels.io.atomic import saying_a_full_disk

    args = build_parser().parse_args(argv)
    try:
        return saying_a_full_disk(lambda: run_command(args))
    except SystemExit:
        last_words.retract()  # a refusal the command made itself: its status says it, no death
        raise


def run_command(args: argparse.Namespace) -> int:
    """The command, under its --time-limit where it has one (measure keeps its own)."""
    from kernels.cli.commands import COMMANDS

    command = COMMANDS[args.command]
    if getattr(args, "time_limit", None) is None or args.command == "measure":
        return command.run(args)
    from kernels.measure.deadline import deadline

    with deadline(
        args.time_limit, lambda: command.on_expiry(args), exit_status=command.expiry_status
    ) as lock:
        args.write_lock = lock
        return command.run(args)
