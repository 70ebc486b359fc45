"""Run the real workflow from this checkout in a scratch working directory, or from a copy
of the checkout made with checkout_copy."""

import os
import shutil
import signal
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def env(python: str = sys.executable) -> dict:
    path = os.path.dirname(python) + os.pathsep + os.environ.get("PATH", "")
    clean = {k: v for k, v in os.environ.items() if k != "ATTNIO_INTERPRET"}
    return clean | {"PATH": path}


def without_torch(folder: Path) -> dict:
    """An environment for subprocesses in which importing torch or triton fails (packages of
    those names, made in ``folder``, that raise)."""
    for name in ("torch", "triton"):
        (folder / name).mkdir(parents=True, exist_ok=True)
        (folder / name / "__init__.py").write_text(
            f"raise ImportError('{name} is not available in this test')\n"
        )
    return env() | {"PYTHONPATH": str(folder)}


def spaced_python(folder: Path) -> str:
    """This environment's python reached through a path with a space and a non-ASCII letter
    (a link to the environment, as a checkout in "OneDrive - Company" has its .venv): its
    sys.executable, and every rule's python, then has one."""
    link = folder / "py env ü"
    link.symlink_to(sys.prefix, target_is_directory=True)
    return str(link / "bin" / "python")


def checkout_copy(dest: Path) -> Path:
    """The checkout's files as a clone of it with these changes would have them: tracked and
    untracked ones, none that git ignores (no results/, no .venv)."""
    listing = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listing.split("\0")):
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


def command(workdir: Path, *args: str, python: str = sys.executable) -> list[str]:
    """The workflow of the checkout at workdir when it is one, else this checkout's."""
    snakefile = workdir / "Snakefile" if (workdir / "Snakefile").exists() else ROOT / "Snakefile"
    return [
        python,
        "-m",
        "snakemake",
        "--snakefile",
        str(snakefile),
        "--directory",
        str(workdir),
        *args,
    ]


def snakemake(
    workdir: Path,
    *args: str,
    timeout: int = 600,
    environment: dict | None = None,
    python: str = sys.executable,
) -> subprocess.CompletedProcess:
    return subprocess.run(
        command(workdir, *args, python=python),
        capture_output=True,
        text=True,
        timeout=timeout,
        env=environment or env(python),
        cwd=workdir,
    )


def start(workdir: Path, *args: str, environment: dict | None = None) -> subprocess.Popen:
    """A run in the background, in a session of its own so that a test can signal all of it."""
    return subprocess.Popen(
        command(workdir, *args),
        env=environment or env(),
        cwd=workdir,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        # Ctrl-C works on the run even when the suite itself was started in the background
        # (which makes a shell ignore SIGINT for it and its children)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def fresh_venv(path: Path, own_pip: bool = True) -> Path:
    """A new virtual environment that sees this one's dependencies (torch is gigabytes) but
    not its editable attnio: a .pth line adds site-packages without running its .pth files.
    ``own_pip=False``: no pip of its own, so this one's pip and setuptools build in it."""
    flags = [] if own_pip else ["--without-pip"]
    subprocess.run([sys.executable, "-m", "venv", *flags, str(path)], check=True, timeout=300)
    python = path / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(site, "attnio-test-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def worker_processes(folder: Path) -> list[int]:
    """Live processes whose command line names this run folder of warm workers (keepers and
    workers: kernels.warm), other than this one."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            line = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (proc / "stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if str(folder) in line and "kernels.warm" in line and state != "Z":
            found.append(int(proc.name))
    return found


_CEILINGS: dict[str, bytes] = {}
# the run's folder that both test workers see (tests/conftest.py sets it; None: this process's own)
SHARED: Path | None = None


def _measured_ceilings(workdir: Path) -> bytes:
    """The ceilings command's output, run once per suite run: the first test worker to ask
    makes it under a lock in the run's shared folder, the other reads it."""
    import fcntl

    shared = (SHARED or workdir) / "seeded-ceilings.json"
    with open(f"{shared}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not shared.exists():
            out = workdir / "ceilings-once.json"
            subprocess.run(
                [sys.executable, "-m", "kernels", "ceilings", "--device", "cpu", "--out", str(out)],
                env=env() | {"ATTNIO_WORKER": "0"},
                capture_output=True,
                check=True,
                timeout=300,
            )
            os.replace(out, shared)
    return shared.read_bytes()


def seed_ceilings(workdir: Path) -> Path:
    """results/ceilings.json in workdir, measured once per suite run without the sweep's
    operation rates (a few seconds instead of the workflow's ceilings job, about a minute on
    two busy cores): for a test whose question is not the ceilings. Snakemake then takes the
    file as made (no metadata of its own, no inputs newer than it) and runs no ceilings job;
    the ceilings job itself is tested on the shared ci study (test_workflow.py)."""
    if "json" not in _CEILINGS:
        _CEILINGS["json"] = _measured_ceilings(workdir)
    seeded = workdir / "results" / "ceilings.json"
    seeded.parent.mkdir(parents=True, exist_ok=True)
    seeded.write_bytes(_CEILINGS["json"])
    return seeded
