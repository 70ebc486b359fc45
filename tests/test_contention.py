"""A point timed while other processes held the CPUs its threads need is marked busy, with
the evidence and the reason (kernels.measure.contention); the tables keep its times with the
verdict beside them, and the pages that show them name it. The real measurement runs beside a
competing process of this test's own, both pinned to one CPU."""

import json
import os
import subprocess
import sys

import pytest
from workflow_run import env

from kernels.io.tables import tables, timed_stage_table
from kernels.measure.contention import cpu_ticks, verdict
from reports.pages.common import busy_note

STAT = """cpu  900 0 300 5000 20 0 10 40 0 0
cpu0 400 0 100 2500 10 0 5 20 0 0
cpu1 500 0 200 2500 10 0 5 20 0 0
cpu7 999 0 999 999 0 0 0 999 0 0
intr 12345
ctxt 678
"""


def test_the_ticks_of_the_jobs_cpus_only(tmp_path):
    """Busy is everything but idle, iowait and steal; a CPU outside the affinity is not
    counted."""
    stat = tmp_path / "stat"
    stat.write_text(STAT)
    assert cpu_ticks({0, 1}, stat) == (400 + 100 + 5 + 500 + 200 + 5, 20 + 20)
    assert cpu_ticks({0}, tmp_path / "absent") is None


@pytest.mark.parametrize(
    ("busy_s", "stolen_s", "cpus", "threads", "expected"),
    [
        (2.02, 0.0, 2, 2, "quiet"),  # the job's own 2 CPU-seconds and a little bookkeeping
        (3.0, 0.0, 2, 2, "busy"),  # one other process on one of the two CPUs it needs: 50 %
        (34.0, 0.0, 64, 2, "quiet"),  # 32 of 64 CPUs busy elsewhere: plenty left for 2 threads
        (65.0, 0.0, 64, 2, "busy"),  # 63 CPUs busy elsewhere: every other one and one of the two
        (2.0, 0.5, 2, 2, "busy"),  # a hypervisor took a quarter of the CPUs' time
    ],
)
def test_the_verdict_holds_what_others_took_against_what_the_threads_need(
    busy_s, stolen_s, cpus, threads, expected
):
    found = verdict(1.0, 2.0, busy_s, stolen_s, cpus, threads)
    assert found["verdict"] == expected, found
    assert found["reason"].startswith("other processes kept") and "(/proc/stat)" in found["reason"]
    assert ("busy past" in found["reason"]) == (expected == "busy")


# the job and its competitor share one CPU of the test's affinity, on any machine (and leave
# the others to the suite's other tests)
CPUS = set(sorted(os.sched_getaffinity(0))[:1])


def pinned() -> None:
    os.sched_setaffinity(0, CPUS)


def spinners(count: int) -> list[subprocess.Popen]:
    spin = [sys.executable, "-c", "while True: pass"]
    return [subprocess.Popen(spin, preexec_fn=pinned) for _ in range(count)]


def test_a_point_timed_beside_competing_processes_is_busy_and_marked(tmp_path):
    out = tmp_path / "record.json"
    point = ["--impl", "torch_naive", "--tokens", "256", "--head-dim", "64", "--dtype", "float32"]
    point += ["--cpu-seconds", "0.3", "--stage-seconds", "0.1"]  # the ci study's windows
    threads = len(CPUS)
    competing = spinners(len(CPUS))  # each CPU the job's threads need is wanted twice
    try:
        done = subprocess.run(
            [sys.executable, "-m", "kernels", "measure", *point, "--device", "cpu", "--threads", str(threads)]
            + ["--no-ncu", "--out", str(out)],
            capture_output=True,
            text=True,
            timeout=300,  # a hang guard: about 4 s beside the competitors
            env=env() | {"ATTNIO_WORKER": "0"},
            preexec_fn=pinned,
        )
    finally:
        for process in competing:
            process.kill()
            process.wait()
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads(out.read_text())
    contention = record["contention"]
    assert record["status"] == "ok" and contention["verdict"] == "busy", contention
    assert contention["taken_share"] > 0.15 and contention["threads"] == threads
    metrics, _ = tables([record])
    row = metrics.iloc[0]  # kept as measured, marked
    assert row["time_ms"] == record["time_ms"] and row["contention_verdict"] == "busy"
    assert timed_stage_table([record])["contention_verdict"].eq("busy").all()
    said = busy_note(metrics)
    assert said.startswith("**Timed on a busy machine:** 1 of the 1 timed points (torch_naive float32 T=256)")
