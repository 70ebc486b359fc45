"""A small study through a real SLURM: a one-node cluster on loopback, the slurm profile,
and squeue to confirm the jobs ran as SLURM jobs and the timed ones had the node alone."""

import os
import re
import subprocess
import sys

import pandas as pd
import pytest
from slurm_cluster import cluster, missing_tools
from workflow_run import ROOT, env

pytestmark = [
    pytest.mark.integration,  # make integration, which CI runs after make test
    pytest.mark.skipif(
        bool(missing_tools()) or os.geteuid() != 0,
        reason=f"SLURM is not installed here (missing: {', '.join(missing_tools())}) or not root; "
        "install with: apt-get install --no-install-recommends slurmctld slurmd slurm-client munge",
    ),
]


# The ci preset's settings with a one-point sweep: each kind of SLURM job once, timed
# (ceilings and the torch point: a node of their own) and not timed (the validation and the
# provenance: shared). What runs is not the question here (the interpreted Triton paths and
# the builds are tested without SLURM, the full ci sweep in the shared study): a Triton point
# would only add its interpreted validation, which the exclusive ceilings wait behind.
SMALL = """build: {targets: []}
sweep:
  - impls: [torch_naive]
    tokens: [16]
    head_dim: [16]
    dtype: [float16]
    causal: [true]
    blocks: [[16, 32]]
"""


def test_a_small_study_runs_through_slurm(tmp_path):
    slurm_dir = tmp_path / "slurm"
    slurm_dir.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    small = tmp_path / "small.yaml"
    small.write_text(SMALL)
    with cluster(slurm_dir) as slurm_env:
        run_env = env() | {"SLURM_CONF": slurm_env["SLURM_CONF"]}
        command = [
            sys.executable,
            "-m",
            "snakemake",
            "--snakefile",
            str(ROOT / "Snakefile"),
            "--directory",
            str(work),
            "--profile",
            str(ROOT / "profiles" / "slurm"),
            "--configfile",
            str(ROOT / "config" / "config.yaml"),
            str(ROOT / "config" / "presets" / "ci.yaml"),
            str(small),
            "--default-resources",
            "slurm_partition=debug",
            "runtime=10",
            "mem_mb=1000",
            "cpus_per_task=1",
            "--slurm-status-command",
            "squeue",
            "--slurm-init-seconds-before-status-checks",
            "1",
            "--seconds-between-status-checks",
            "1",
            "collect",  # every SLURM job; the reports (local rules) are tested elsewhere
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=900, env=run_env, cwd=work)
        assert done.returncode == 0, done.stderr[-4000:]
        queue = subprocess.run(  # state, the job's comment (rule and wildcards), OverSubscribe
            ["squeue", "-h", "-t", "all", "-o", "%T|%k|%h"],
            capture_output=True,
            text=True,
            env=run_env,
            check=True,
        ).stdout.split()
    states = [line.split("|")[0] for line in queue]
    # env, ceilings, the validation and the point; gathering and tables run locally
    assert len(states) == 4
    assert set(states) == {"COMPLETED"}
    table = pd.read_csv(work / "results" / "metrics.csv")
    assert len(table) == 1 and (table["status"] == "ok").all()
    # a job that times kernels had a node of its own (--exclusive: not oversubscribable)
    timed = re.compile(r"rule_ceilings|rule_measure_wildcards_torch_naive_")
    owned = {comment: share == "NO" for _, comment, share in (line.split("|") for line in queue)}
    assert sum(bool(timed.match(c)) for c in owned) == 2  # ceilings and the torch point
    assert all(owned[c] == bool(timed.match(c)) for c in owned)
