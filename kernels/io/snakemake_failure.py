"""Why a Snakemake run failed, in one line: what a run started from our code (the budget's
calibration, kernels.estimate) prints names the job that failed and its log, or the error
that stopped it before any job; the line is that log's last error line with the log's path,
or that error's message. Standard library only."""

from __future__ import annotations

import os
import re
from pathlib import Path

JOB_FAILED = re.compile(r"^Error in rule (?P<rule>\w+):$")
JOB_LOG = re.compile(r"^\s+log: (?P<logs>.+?)(?: \(check log file\(s\) for error details\))?$")
# Snakemake's error before any job: "WorkflowError in file ..., line 60:" then its message
STOPPED = re.compile(r"^(?P<kind>\w*(?:Error|Exception))(?: in file .*)?:$")
# a line that says an error: Python's last traceback line ("ModuleNotFoundError: ...", a
# qualified name too), or our scripts' closing "error: ..." (kernels.io.script_log)
ERROR = re.compile(r"^(?:[\w.]*(?:Error|Exception|Interrupt|Exit)\b.*|error: .+)$")
WARNING = "attnio: "  # the planner's warnings (a plugin left out, naming why)


def last_error_line(text: str) -> str | None:
    """The last line of ``text`` that says an error, else its last line that is not blank."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return next((line for line in reversed(lines) if ERROR.match(line)), lines[-1] if lines else None)


def failed_job(lines: list[str], folder: str | os.PathLike) -> str | None:
    """The first failed job of a run's output: its rule, its log's last error line, its log."""
    for at, line in enumerate(lines):
        if not (found := JOB_FAILED.match(line)):
            continue
        for detail in lines[at + 1 :]:
            if detail and not detail.startswith(" "):
                break
            if logs := JOB_LOG.match(detail):
                log = Path(folder, logs["logs"].split(", ")[0])
                said = last_error_line(log.read_text(errors="replace")) if log.is_file() else None
                return f"its {found['rule']} job failed: {said or 'its log says nothing'} (log: {log})"
        return f"its {found['rule']} job failed, leaving no log"
    return None


def stopped(lines: list[str]) -> str | None:
    """The error that stopped a run before any job (its message's first line), with the
    planner's warnings before it (a plugin left out names why)."""
    for at, line in enumerate(lines):
        if (found := STOPPED.match(line)) and at + 1 < len(lines) and lines[at + 1].strip():
            warned = [w.removeprefix(WARNING) for w in lines[:at] if w.startswith(WARNING)]
            after = f" (after: {'; '.join(warned)})" if warned else ""
            return f"{found['kind']}: {lines[at + 1].strip()}{after}"
    return None


def why_failed(output: str, folder: str | os.PathLike) -> str:
    """One line saying why the run that printed ``output`` in ``folder`` failed."""
    lines = output.splitlines()
    return failed_job(lines, folder) or stopped(lines) or last_error_line(output) or "it printed nothing"
