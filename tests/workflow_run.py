"""Run the real workflow from this checkout in a scratch working directory."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def env() -> dict:
    path = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    clean = {k: v for k, v in os.environ.items() if k != "ATTNIO_INTERPRET"}
    return clean | {"PATH": path}


def command(workdir: Path, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(ROOT / "Snakefile"),
        "--directory",
        str(workdir),
        *args,
    ]


def snakemake(
    workdir: Path, *args: str, timeout: int = 600, environment: dict | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        command(workdir, *args),
        capture_output=True,
        text=True,
        timeout=timeout,
        env=environment or env(),
        cwd=workdir,
    )


def start(workdir: Path, *args: str) -> subprocess.Popen:
    """A run in the background, in a session of its own so that a test can signal all of it."""
    return subprocess.Popen(
        command(workdir, *args),
        env=env(),
        cwd=workdir,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
