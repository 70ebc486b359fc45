"""The GPU scripts' rehearsal: every command of a Snakemake plan checked on any machine,
through the parsers the real run uses, so that a wrong flag fails here and not on the GPU.

The plan is what ``snakemake --dry-run --printshellcmds`` prints with the real run's
arguments. Each shell command is split into its simple commands (at ``&&``, ``||``, ``;``,
``|``; redirections and leading ``VAR=value`` left out), and each is checked:

- ``python -m kernels ...``: parsed by ``kernels.cli.build_parser()`` (which imports neither
  torch nor triton);
- ``ncu ...``: its options against those Nsight Compute takes here, and the program it runs
  (``python -m kernels ncu-target ...``) as above;
- ``python -m pytest ...``: run with ``--collect-only`` (and without ``--junitxml``), so that
  pytest parses the same arguments and selects the same tests; a name ``-k`` leaves out must
  be a test that is collected without it;
- ``python -m MODULE``: the module can be imported; any other program: it is on PATH.

    python scripts/rehearse.py PLAN.txt       (a dry run's output; - for stdin)
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

SEPARATORS = {"&&", "||", ";", "|"}
REDIRECT = re.compile(r"^\d*(>>?|<)(&\d+)?$")
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
# Nsight Compute options the rules may use: None takes no value, a set lists the values it
# allows, str takes any value.
NCU_OPTIONS: dict[str, object] = {
    "--clock-control": {"base", "none", "reset"},
    "--profile-from-start": {"on", "off", "yes", "no"},
    "--metrics": str,
    "--section": str,
    "--export": str,
    "-o": str,
    "--force-overwrite": None,
    "-f": None,
    "--import": str,
    "-i": str,
    "--csv": None,
    "--print-units": {"auto", "base"},
    "--page": {"details", "raw", "source", "session"},
    "--kernel-name": str,
    "-k": str,
    "--kernel-name-base": {"function", "demangled", "mangled"},
    "--launch-count": str,
    "-c": str,
    "--launch-skip": str,
    "-s": str,
    "--target-processes": {"application-only", "all"},
    "--replay-mode": {"kernel", "application", "range", "app-range"},
    "--cache-control": {"all", "none"},
    "--nvtx": None,
    "--quiet": None,
}


@dataclass
class Report:
    checked: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def count(self, kind: str) -> None:
        self.checked[kind] = self.checked.get(kind, 0) + 1

    def text(self) -> str:
        done = ", ".join(f"{n} {kind}" for kind, n in sorted(self.checked.items())) or "nothing"
        lines = [f"checked: {done}; {len(self.problems)} problem(s)"]
        return "\n".join(lines + [f"  problem: {p}" for p in self.problems])


def shell_commands(plan: str) -> list[tuple[str, str]]:
    """(rule, shell command) for each job of a dry run printed with --printshellcmds."""
    found, rule = [], "?"
    for line in plan.splitlines():
        heading = re.match(r"^(?:local)?(?:rule|checkpoint) (\S+):$", line.strip())
        if heading:
            rule = heading.group(1)
        elif line.startswith("Shell command: "):
            command = line.removeprefix("Shell command: ").strip()
            if command and command != "None":
                found.append((rule, command))
    return found


def simple_commands(command: str) -> list[list[str]]:
    """The simple commands of a shell command line, each without its redirections and
    leading variable assignments."""
    words = shlex.split(command)
    commands, current, skip = [], [], False
    for word in words:
        if skip:
            skip = False
        elif word in SEPARATORS:
            commands.append(current)
            current = []
        elif REDIRECT.match(word):
            skip = not word.endswith(tuple("0123456789"))  # "> file" takes the next word
        elif not current and ASSIGNMENT.match(word):
            continue
        else:
            current.append(word)
    commands.append(current)
    return [c for c in commands if c]


def _is_python(word: str) -> bool:
    return re.fullmatch(r"python(3(\.\d+)?)?", Path(word).name) is not None


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its package is missing
        return False


def parse_kernels(args: list[str]) -> str | None:
    """None when ``python -m kernels ARGS`` parses, else argparse's message."""
    from kernels.cli import build_parser

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            build_parser().parse_args(args)
    except SystemExit as stop:
        if stop.code:
            return err.getvalue().strip().splitlines()[-1] if err.getvalue().strip() else str(stop)
    return None


def check_ncu(words: list[str], report: Report, where: str, pytest_ok: bool) -> None:
    """ncu's own options, then the program it profiles."""
    i = 1
    while i < len(words) and words[i].startswith("-"):
        option, _, inline = words[i].partition("=")
        if option not in NCU_OPTIONS:
            report.problems.append(f"{where}: ncu option {option} is not one Nsight Compute takes here")
            return
        kind = NCU_OPTIONS[option]
        if kind is None:
            i += 1
            continue
        value = inline or (words[i + 1] if i + 1 < len(words) else None)
        if value is None:
            report.problems.append(f"{where}: ncu option {option} needs a value")
            return
        if isinstance(kind, set) and value not in kind:
            report.problems.append(f"{where}: ncu {option} {value}: allowed are {', '.join(sorted(kind))}")
        i += 1 if inline else 2
    report.count("ncu")
    if i < len(words):
        check_command(words[i:], report, where, pytest_ok)


def pytest_collect(args: list[str]) -> tuple[int, list[str], str]:
    """pytest's exit status, the test ids it selects and its output, for ARGS with
    --collect-only added, --junitxml left out and the verbosity set to list one test id a
    line."""
    kept, skip = [], False
    for word in args:
        if skip:
            skip = False
        elif word in ("--junitxml", "--junit-xml"):
            skip = True
        elif not word.startswith(("--junitxml=", "--junit-xml=")) and not re.fullmatch(r"-[qv]+", word):
            kept.append(word)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *kept, "--collect-only", "-q", "-p", "no:cacheprovider"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    ids = [line for line in done.stdout.splitlines() if "::" in line and not line.startswith(" ")]
    return done.returncode, ids, done.stdout + done.stderr


def check_pytest(args: list[str], report: Report, where: str) -> None:
    code, ids, output = pytest_collect(args)
    if code != 0:
        tail = " | ".join(output.strip().splitlines()[-3:])
        report.problems.append(f"{where}: pytest --collect-only exited {code}: {tail}")
        return
    if "-k" in args:
        expression = args[args.index("-k") + 1]
        without = args[: args.index("-k")] + args[args.index("-k") + 2 :]
        _, every, _ = pytest_collect(without)
        names = {i.split("::")[-1].split("[")[0] for i in every}
        for name in re.findall(r"not\s+([A-Za-z_]\w*)", expression):
            if name not in names:
                report.problems.append(f"{where}: -k leaves out {name}, which is no test collected")
    report.count(f"pytest ({len(ids)} tests selected)")


def check_command(words: list[str], report: Report, where: str, pytest_ok: bool = True) -> None:
    program = words[0]
    if Path(program).name == "ncu":
        check_ncu(words, report, where, pytest_ok)
    elif _is_python(program) and words[1:2] == ["-m"] and len(words) > 2:
        module, args = words[2], words[3:]
        if module == "kernels":
            problem = parse_kernels(args)
            if problem:
                report.problems.append(f"{where}: python -m kernels {' '.join(args[:1])}: {problem}")
            else:
                report.count(f"python -m kernels {args[0]}")
        elif module == "pytest":
            if pytest_ok:
                check_pytest(args, report, where)
            else:
                report.count("pytest (not collected)")
        elif not _importable(module):
            report.problems.append(f"{where}: python -m {module}: no such module here")
        else:
            report.count(f"python -m {module}")
    elif shutil.which(program) is None and program not in {"test", "true", "false", "cd"}:
        report.problems.append(f"{where}: {program}: not on PATH")
    else:
        report.count(Path(program).name)


def check_plan(plan: str, pytest_ok: bool = True) -> Report:
    report = Report()
    commands = shell_commands(plan)
    if "Job stats:" in plan and "Shell command:" not in plan:
        report.problems.append("the plan names no job's command: was it printed with --printshellcmds?")
    for rule, command in commands:
        try:
            pieces = simple_commands(command)
        except ValueError as err:
            report.problems.append(f"rule {rule}: cannot split {command!r}: {err}")
            continue
        for words in pieces:
            check_command(words, report, f"rule {rule}", pytest_ok)
    return report


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    plan = sys.stdin.read() if argv[0] == "-" else Path(argv[0]).read_text()
    report = check_plan(plan)
    print(report.text())
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
