"""How a report page's notebook ended: rendered, or failed with its first error line. One
page that raises never takes the others down: its notebook rule ends well and writes an
outcome file saying why the page failed; the index links the pages that rendered and names
the failed ones, and the run still ends non-zero naming them.

    python -m reports.pages.outcome run TEMPLATE NOTEBOOK OUTCOME LOG [--replaces PAGE ...]
                                    [-- papermill's -p NAME VALUE ...]
    python -m reports.pages.outcome rendered OUTCOME

``run`` runs papermill on TEMPLATE into NOTEBOOK (the executed notebook, kept for the reader
even when a cell raised), its output to LOG, makes NOTEBOOK independent of the run
(reports.stable) and writes OUTCOME (JSON: page, ok, error, log, notebook). It exits 0 when
the notebook ran, whether a cell raised or not (a failed page also removes the PAGEs an
earlier run published for it: they would show what this run could not); non-zero only when
papermill could not run it at all (no executed notebook: a fault of the installation, not
of the page). ``rendered`` exits non-zero, naming the error, unless OUTCOME says the page
rendered."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from kernels.io.atomic import write_text_atomic

FIELDS = ("page", "ok", "error", "log", "notebook")


class OutcomeError(ValueError):
    """An outcome file that cannot be read: the message names it and why."""


def first_error(notebook: dict) -> str | None:
    """The notebook's first exception as one line, ``Name: message`` (the line a reader
    needs: the exception and what it says), or None when no cell raised."""
    for cell in notebook.get("cells", []):
        for output in cell.get("outputs", []) or []:
            if output.get("output_type") == "error":
                name = str(output.get("ename") or "Error")
                lines = str(output.get("evalue") or "").strip().splitlines()
                return f"{name}: {lines[0].strip()}" if lines else name
    return None


def last_line(log: str | os.PathLike) -> str | None:
    """The log's last line that says something (papermill ends with the exception it
    raised), or None."""
    try:
        text = Path(log).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else None


def outcome(page: str, ok: bool, error: str | None, log: str, notebook: str) -> dict:
    return {
        "page": page,
        "ok": ok,
        "error": None if ok else (error or "failed"),
        "log": log,
        "notebook": notebook,
    }


def write(path: str | os.PathLike, result: dict) -> None:
    write_text_atomic(path, json.dumps(result, indent=1, ensure_ascii=False) + "\n")


def read(path: str | os.PathLike) -> dict:
    """An outcome file; OutcomeError names it and what is wrong."""
    try:
        value = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise OutcomeError(f"{path}: not a page outcome ({err})") from None
    if (
        not isinstance(value, dict)
        or any(k not in value for k in FIELDS)
        or not isinstance(value["ok"], bool)
    ):
        needs = ", ".join(FIELDS)
        raise OutcomeError(f"{path}: not a page outcome (it needs {needs}; ok true or false)")
    return value


def failed(paths) -> list[dict]:
    """The outcomes among ``paths`` that say their page failed (missing or unreadable ones are
    left out: they are no failure of a page)."""
    found = []
    for path in paths:
        try:
            result = read(path)
        except OutcomeError:
            continue
        if not result["ok"]:
            found.append(result)
    return found


def failure_line(result: dict) -> str:
    """One failed page as the run's closing lines name it."""
    where = f"log: {result['log']}; executed notebook: {result['notebook']}"
    return f"{result['page']}: {result['error']} ({where})"


def is_ok(path: str | os.PathLike) -> bool:
    """Whether the outcome at ``path`` says its page rendered (False when it cannot be read)."""
    try:
        return read(path)["ok"]
    except OutcomeError:
        return False


def run(
    template: str, notebook: str, out: str, log: str, papermill_args: list[str], replaces: list[str] = ()
) -> int:
    """The notebook rule's work (module docstring); returns the exit status."""
    page = Path(out).name.removesuffix(".outcome.json")
    Path(notebook).unlink(missing_ok=True)  # an old run's notebook would say the wrong thing
    Path(log).parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w", encoding="utf-8") as handle:
        status = subprocess.run(
            [sys.executable, "-m", "papermill", template, notebook, "-k", "python3", *papermill_args],
            stdout=handle,
            stderr=subprocess.STDOUT,
            check=False,
        ).returncode
    if not Path(notebook).is_file():
        print(f"error: papermill did not run {template} (status {status}; see {log})", file=sys.stderr)
        return status or 1
    try:
        executed = json.loads(Path(notebook).read_text(encoding="utf-8"))
    except ValueError:
        executed = {}
    error = first_error(executed)
    ok = status == 0 and error is None
    if not ok and error is None:
        error = last_line(log)
    with open(log, "a", encoding="utf-8") as handle:
        done = subprocess.run(
            [sys.executable, "-m", "reports.stable", notebook],
            stdout=handle,
            stderr=subprocess.STDOUT,
            check=False,
        )
        if not ok:
            print(f"attnio: the page {page} failed: {error}", file=handle)
    if done.returncode != 0 and ok:
        print(f"error: reports.stable could not rewrite {notebook} (see {log})", file=sys.stderr)
        return done.returncode
    if not ok:
        for stale in replaces:
            Path(stale).unlink(missing_ok=True)
    write(out, outcome(page, ok, error, log, notebook))
    if not ok:
        print(f"attnio: the page {page} failed: {error} (see {log})", file=sys.stderr)
    return 0


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m reports.pages.outcome", description=__doc__.split("\n")[0]
    )
    commands = parser.add_subparsers(dest="command", required=True)
    running = commands.add_parser("run")
    for name in ("template", "notebook", "outcome", "log"):
        running.add_argument(name)
    running.add_argument("--replaces", action="append", default=[])
    commands.add_parser("rendered").add_argument("outcome")
    ours, papermill = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    args = parser.parse_args(ours)
    if args.command == "run":
        return run(args.template, args.notebook, args.outcome, args.log, papermill, args.replaces)
    try:
        result = read(args.outcome)
    except OutcomeError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    if not result["ok"]:
        said = failure_line(result)
        print(f"error: the page {said} did not render, so it is not published", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
