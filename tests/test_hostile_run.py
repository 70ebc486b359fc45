"""Plugins that move the process measuring them, through the real workflow, with warm workers
and without (ATTNIO_WORKER=0): each such point ends as a failed or skipped record naming what
happened, where its name says, and the run goes on; a SIGTERM to a run whose plugin hangs ends
it, on a loaded machine, within 30 s with nothing left running. (Real Snakemake runs: marked
integration, `make integration`.)"""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from hostile_plugins import write_hostile
from workflow_run import ROOT, env, seed_ceilings, snakemake, start, worker_processes

pytestmark = pytest.mark.integration

SETTINGS = {
    "device": "cpu",
    "build": {"candidates": False, "targets": ["sm_90"]},
    "timing": {"cpu_seconds": 0.3, "stage_seconds": 0.1},
    "plugins": ["hostile"],
}
SHAPE = {"tokens": [16], "head_dim": [16], "dtype": ["float32"], "causal": [True]}


def study(workdir: Path, impls: list[str], passes: list[str]) -> dict:
    write_hostile(workdir)
    seed_ceilings(workdir)
    config = SETTINGS | {"sweep": [SHAPE | {"impls": impls, "pass": passes}]}
    (workdir / "study.yaml").write_text(yaml.safe_dump(config))
    return env() | {"PYTHONPATH": os.pathsep.join([str(workdir), str(ROOT)])}


def rows(workdir: Path, table: str) -> dict[str, dict]:
    with open(workdir / "results" / f"{table}.csv") as handle:
        return {row["impl"]: row for row in csv.DictReader(handle)}


@pytest.mark.parametrize("worker", ["1", "0"])
def test_plugins_that_move_the_process_become_records_and_the_run_goes_on(tmp_path, worker):
    impls = ["h_chdir", "h_exit", "h_threads", "h_killbw", "torch_naive"]
    environment = study(tmp_path, impls, ["forward", "backward"]) | {"ATTNIO_WORKER": worker}
    started = time.monotonic()
    done = snakemake(
        tmp_path, "--cores", "2", "--configfile", "study.yaml", environment=environment, timeout=900
    )
    assert done.returncode == 0, done.stderr[-4000:]
    forward, backward = rows(tmp_path, "metrics"), rows(tmp_path, "backward")
    assert forward["torch_naive"]["status"] == backward["torch_naive"]["status"] == "ok"
    said = {impl: (forward[impl]["status"], forward[impl]["reason"]) for impl in impls[:4]}
    assert said["h_chdir"] == ("failed", "it changed the working folder (to /); a point's code must not")
    assert said["h_exit"][0] == "failed" and "exited with status 0 during this job" in said["h_exit"][1]
    assert said["h_threads"][0] == "failed" and "it left 50 thread(s) running" in said["h_threads"][1]
    # killed during its backward validation: every point of it skipped, naming the death
    for table in (forward, backward):
        assert table["h_killbw"]["status"] == "skipped"
        assert "died during this job of SIGKILL" in table["h_killbw"]["reason"]
    assert not Path("/results/points/h_chdir").exists()  # the record landed where its name says
    # the threads' 95 s did not hold a job open (a guard against a hang, not a speed claim)
    assert time.monotonic() - started < 600


def busy_processes(count: int) -> list[subprocess.Popen]:
    spin = "while True: pass"
    return [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(count)]


def test_a_sigterm_ends_a_run_whose_plugin_hangs_within_30_s_on_a_loaded_machine(tmp_path):
    environment = study(tmp_path, ["h_hang"], ["forward"])
    load = busy_processes(2)
    try:
        run = start(tmp_path, "--cores", "2", "--configfile", "study.yaml", environment=environment)
        log = tmp_path / "results" / "logs" / "measure" / "h_hang"
        deadline = time.monotonic() + 600
        while not (log.exists() and any(log.rglob("*.log"))):  # its measure job has started
            assert run.poll() is None and time.monotonic() < deadline, "the hanging job never started"
            time.sleep(0.5)
        time.sleep(3)  # well into the hang
        run.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        run.wait(60)
        left = []
        while time.monotonic() - sent < 30:
            left = [pid for pid in every_process_of(tmp_path)]
            if not left:
                break
            time.sleep(0.2)
        ended = time.monotonic() - sent
    finally:
        for process in load:
            process.kill()
    assert run.returncode != 0 and not left and ended < 30, (ended, left)


def every_process_of(workdir: Path) -> list[int]:
    """Live processes whose command line or working folder is the run's (jobs, workers)."""
    found = worker_processes(workdir / "results")
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            here = os.readlink(proc / "cwd")
            line = (proc / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if str(workdir) in here or str(workdir) in line:
            found.append(int(proc.name))
    return sorted(set(found))
