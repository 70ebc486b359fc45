"""How a report page's notebook ended: rendered, or failed with its first error line. One
page that raises never takes the others down: its notebook rule ends well and writes an
outcome file saying why the page failed; the index links the pages that rendered and names
the failed ones, and the run still ends non-zero naming them.

    python -m reports.pages.outcome run TEMPLATE NOTEBOOK OUTCOME LOG [--replaces PAGE ...]
                                    [--time-limit SECONDS] [-- papermill's -p NAME VALUE ...]

``run`` runs papermill on TEMPLATE into NOTEBOOK (the executed notebook, kept for the reader
even when a cell raised), its output to LOG, makes NOTEBOOK independent of the run
(reports.stable) and writes OUTCOME (JSON: page, ok, error, log, notebook). It exits 0 when
the notebook ran, whether a cell raised or not (a failed page also removes the PAGEs an
earlier run published for it: they would show what this run could not); non-zero only when
papermill could not run it at all (no executed notebook: a fault of the installation, not
of the page). A notebook still running after --time-limit is stopped, its kernel with it,
and the page fails naming the limit (the notebook as far as it ran is kept, or the template
when papermill had written none). A failed page is never published (reports.pages.publish
asks ``unpublishable``)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from kernels.io.atomic import saying_a_full_disk, write_text_atomic
from kernels.warm.stop import descendants

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


def failed_pages_line(pages: list[dict]) -> str:
    """A run's closing line for the pages that failed in it (their outcomes), each with its
    first error line."""
    said = "; ".join(f"{page['page']} ({page['error']})" for page in pages)
    return (
        f"attnio: {len(pages)} report page(s) did not render: {said}; the index names "
        "them with their logs, and the next run renders them again"
    )


def is_ok(path: str | os.PathLike) -> bool:
    """Whether the outcome at ``path`` says its page rendered (False when it cannot be read)."""
    try:
        return read(path)["ok"]
    except OutcomeError:
        return False


def unpublishable(path: str | os.PathLike) -> str | None:
    """Why the page of the outcome at ``path`` may not be published (it failed, or its outcome
    cannot be read), or None when it rendered."""
    try:
        result = read(path)
    except OutcomeError as err:
        return str(err)
    return None if result["ok"] else f"the page {failure_line(result)} did not render, so it is not published"


def end_tree(process: subprocess.Popen) -> None:
    """papermill and everything it started: SIGTERM, then SIGKILL for what is left 5 s later."""
    # the notebook's kernel is papermill's child, in a session of its own: ending papermill's
    # group does not reach it
    tree = [process.pid, *descendants(process.pid)]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in tree:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                continue
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            continue
        if sig == signal.SIGTERM:
            time.sleep(0.2)  # the kernel's own end, then SIGKILL for anything that ignored it


def execute(command: list[str], log, time_limit: float | None) -> tuple[int, str | None]:
    """Run papermill: (exit status, why it was stopped or None). Past ``time_limit``
    seconds, or when this job is ended (Ctrl-C, a cancelled run), papermill and its kernel
    are ended."""
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)

    def cancelled(signum, frame) -> None:
        end_tree(process)
        raise SystemExit(128 + signum)

    previous = {sig: signal.signal(sig, cancelled) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        return process.wait(timeout=time_limit), None
    except subprocess.TimeoutExpired:
        end_tree(process)
        return process.returncode or 1, (
            f"stopped after the time limit of {time_limit:g} s per report job (limits.rule_seconds.report)"
        )
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run(
    template: str,
    notebook: str,
    out: str,
    log: str,
    papermill_args: list[str],
    replaces: list[str] = (),
    time_limit: float | None = None,
) -> int:
    """The notebook rule's work (module docstring); returns the exit status. papermill
    writes the executed notebook under a temporary name, renamed once whole: a run stopped
    (or out of room) midway leaves nothing cut short under the final name."""
    page = Path(out).name.removesuffix(".outcome.json")
    Path(notebook).unlink(missing_ok=True)  # an old run's notebook would say the wrong thing
    partial = Path(notebook).with_name(f".{Path(notebook).stem}.running.ipynb")
    partial.unlink(missing_ok=True)
    Path(log).parent.mkdir(parents=True, exist_ok=True)

    def executed() -> int:
        with open(log, "w", encoding="utf-8") as handle:
            status, overdue = execute(
                [sys.executable, "-m", "papermill", template, str(partial), "-k", "python3", *papermill_args],
                handle,
                time_limit,
            )
        if overdue and not partial.is_file():  # stopped before papermill wrote anything
            shutil.copyfile(template, partial)
        if not partial.is_file():
            print(f"error: papermill did not run {template} (status {status}; see {log})", file=sys.stderr)
            return status or 1
        return finish(page, partial, notebook, out, log, status, overdue, replaces)

    try:
        return saying_a_full_disk(executed)
    finally:
        partial.unlink(missing_ok=True)


def finish(
    page: str, partial: Path, notebook: str, out: str, log: str, status: int, overdue, replaces
) -> int:
    """The executed notebook (at ``partial``) made stable and put in place, and its outcome."""
    try:
        executed = json.loads(partial.read_text(encoding="utf-8"))
    except ValueError:
        executed = {}
    error = overdue or first_error(executed)
    ok = status == 0 and error is None
    if not ok and error is None:
        error = last_line(log)
    with open(log, "a", encoding="utf-8") as handle:
        done = subprocess.run(
            [sys.executable, "-m", "reports.stable", str(partial)],
            stdout=handle,
            stderr=subprocess.STDOUT,
            check=False,
        )
        if not ok:
            print(f"attnio: the page {page} failed: {error}", file=handle)
    if done.returncode != 0 and ok:
        print(f"error: reports.stable could not rewrite {notebook} (see {log})", file=sys.stderr)
        return done.returncode
    os.replace(partial, notebook)
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
    running.add_argument("--time-limit", type=float, help="seconds the notebook may run (default: none)")
    ours, papermill = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    args = parser.parse_args(ours)
    return run(
        args.template, args.notebook, args.outcome, args.log, papermill, args.replaces, args.time_limit
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
