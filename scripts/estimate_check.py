"""A benchmark, not a test (`make estimate-check`): the ci study run alone in a scratch copy
of this checkout, and the budget rule's estimates of it, made before the run (calibrated: no
benchmark record yet) and after it (from the run's own records), each held to a factor of 1.5
of what the run took. An estimate of time can only be judged on a
machine that does nothing else: the run's contention (kernels.measure.contention) is printed
beside the verdict, and a busy run says that its verdict does not count.

    .venv/bin/python scripts/estimate_check.py [--keep DIR] [--configfile FILE ...]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kernels.measure.contention import watched
from kernels.models import budget

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ["config/config.yaml", "config/presets/ci.yaml"]  # the ci study, unless --configfile
FACTOR = 1.5


def copy_checkout(dest: Path) -> None:
    """Tracked and untracked files that git does not ignore, as a fresh clone would hold them."""
    listing = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.decode()  # fmt: skip
    for name in filter(None, listing.split("\0")):
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)


def snakemake(workdir: Path, *args: str) -> None:
    env = os.environ | {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    command = [sys.executable, "-m", "snakemake", "--directory", str(workdir), "--cores", "2", *args]
    done = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"snakemake {' '.join(args)} failed:\n{done.stderr[-3000:]}")


def study_cpu_seconds(workdir: Path) -> float:
    """The study's CPU time so far: of the processes this one waited for (Snakemake and its
    jobs), and the warm workers' per job from the run's table of its benchmark records
    (results/benchmarks.csv, kernels.io.benchmarks): a worker runs in a session of its own, so
    its time is not a child's of this process, and it has ended when the run ends."""
    import csv
    import resource

    from kernels.io.benchmarks import WORKER

    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    table = workdir / "results" / "benchmarks.csv"
    rows = list(csv.DictReader(table.open())) if table.exists() else []
    workers = sum(float(row["cpu_s"] or 0) for row in rows if row["measured_in"] == WORKER)
    return used.ru_utime + used.ru_stime + workers


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="run in this folder and keep it (default: a temporary one)")
    parser.add_argument("--configfile", nargs="+", default=CONFIG, help="the study (default: the ci preset)")
    args = parser.parse_args()
    workdir = args.keep or Path(tempfile.mkdtemp(prefix="attnio-estimate-"))
    workdir.mkdir(parents=True, exist_ok=True)
    copy_checkout(workdir)
    before = estimate(workdir, args.configfile)
    started = time.perf_counter()
    with watched(2, own_seconds=lambda: study_cpu_seconds(workdir)) as load:
        snakemake(workdir, "--configfile", *args.configfile)
    took = time.perf_counter() - started
    after = estimate(workdir, args.configfile)
    within = True
    for when, found in (("before the run (calibrated)", before), ("after it (its records)", after)):
        print(
            f"the estimate {when} ({found['measured_here_s']:.0f} s to make):",
            *budget.summary(found),
            sep="\n",
        )
        ratio = found["total_s"] / took
        within = within and 1 / FACTOR <= ratio <= FACTOR
        print(f"the study took {took:.0f} s, the estimate {when}: {found['total_s']:.0f} s ({ratio:.2f}x)")
    print(load["reason"])
    if not args.keep:
        shutil.rmtree(workdir)
    if load["verdict"] == "busy":
        print("the machine was busy while the study ran: this verdict does not count; run it again alone")
        return 2
    print(f"{'within' if within else 'NOT within'} a factor of {FACTOR}")
    return 0 if within else 1


def estimate(workdir: Path, config: list[str]) -> dict:
    snakemake(workdir, "budget", "--forcerun", "budget", "--configfile", *config)
    return json.loads((workdir / "results" / "budget.json").read_text())


if __name__ == "__main__":
    raise SystemExit(main())
