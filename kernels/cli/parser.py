"""The parser: every command's arguments, each option's default said once, and a summary of them all."""

from __future__ import annotations

import argparse

from kernels.cli.arguments import LIMITED_COMMANDS, add_time_limit

DESCRIPTION = """attnio's command line: validate the implementations, measure one sweep point, compile the
Triton kernels for GPU targets, and compute the tile-softmax error map.

The Triton mode is chosen from ``--device`` before any Triton module is imported: cpu runs
the kernels through Triton's interpreter, cuda compiles them. ``--help`` imports neither
torch nor triton.
"""


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
    from kernels.cli.commands import COMMANDS

    parser = argparse.ArgumentParser(
        prog="python -m kernels", description=DESCRIPTION, formatter_class=_Formatter
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, command in COMMANDS.items():
        cmd = sub.add_parser(name, help=command.help, description=command.help, formatter_class=_Formatter)
        command.add_arguments(cmd)
    for name, writes in LIMITED_COMMANDS.items():
        add_time_limit(sub.choices[name], name, writes)
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
