"""DRAM and L2 traffic of one call, measured by Nsight Compute on a GPU.

``ncu`` re-runs one call of the point in a child process (``python -m kernels
ncu-target ...``) that warms up first (compiling every kernel), then opens the profiler
range around exactly one call: only that call's kernels are profiled, never the warm-up
or a benchmark's cache-flush kernels. Nothing here changes clocks: ``--clock-control none``.
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
import sys

from kernels.spec import NCU_METRICS

METRICS = NCU_METRICS
NULL = {
    "dram_bytes": None,
    "dram_read_bytes": None,
    "dram_write_bytes": None,
    "l2_bytes": None,
    "ncu_time_ms": None,
    "ncu_kernels": None,
}


def unavailable(reason: str) -> dict:
    return NULL | {"dram_reason": reason}


def parse_csv(text: str) -> list[dict]:
    """One dict per profiled kernel launch: its name and the metrics in bytes and ns."""
    start = text.find('"ID"')
    if start < 0:
        raise ValueError("no CSV table in ncu's output")
    launches: dict[str, dict] = {}
    for row in csv.DictReader(io.StringIO(text[start:])):
        name = row.get("Metric Name")
        if name not in METRICS:
            continue
        launch = launches.setdefault(row["ID"], {"kernel": row["Kernel Name"]})
        launch[METRICS[name]] = float(row["Metric Value"].replace(",", ""))
    return list(launches.values())


def summarize(launches: list[dict]) -> dict:
    read = sum(k.get("dram_read_bytes", 0.0) for k in launches)
    write = sum(k.get("dram_write_bytes", 0.0) for k in launches)
    return {
        "dram_bytes": int(read + write),
        "dram_read_bytes": int(read),
        "dram_write_bytes": int(write),
        "l2_bytes": int(sum(k.get("l2_bytes", 0.0) for k in launches)),
        "ncu_time_ms": sum(k.get("ncu_time_ns", 0.0) for k in launches) / 1e6,
        "ncu_kernels": launches,
        "dram_reason": None,
    }


def profile(target_args: list[str], timeout_s: int = 600) -> dict:
    """Run the point's call under ncu; null fields with the reason when that is impossible."""
    ncu = shutil.which("ncu")
    if ncu is None:
        return unavailable("ncu (Nsight Compute) not found on PATH")
    command = [
        ncu,
        "--clock-control",
        "none",
        "--profile-from-start",
        "off",
        "--csv",
        "--print-units",
        "base",
        "--metrics",
        ",".join(METRICS),
        sys.executable,
        "-m",
        "kernels",
        "ncu-target",
        *target_args,
    ]
    env = dict(os.environ, ATTNIO_INTERPRET="0")
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        return unavailable(f"ncu did not finish within {timeout_s} s")
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        return unavailable(f"ncu exited {done.returncode}: {' | '.join(tail)}")
    try:
        launches = parse_csv(done.stdout)
    except ValueError as err:
        return unavailable(str(err))
    if not launches:
        return unavailable("ncu profiled no kernel (missing permissions to GPU counters?)")
    return summarize(launches)
