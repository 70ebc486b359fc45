"""The preflight: every launch a GPU plan makes, compiled for the target on this GPU-less
machine and held against its limits, before a GPU minute is spent; validation on a GPU
leaves out, naming why, the cases found unlaunchable."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from workflow_run import ROOT, env, snakemake

from kernels.build.compile import PTXAS_LOG
from kernels.build.targets import TARGETS
from kernels.planning.cases import shapes_for, takes
from kernels.planning.device import largest_cache_bytes
from kernels.planning.point import Point
from kernels.planning.sweep import points
from kernels.spec import DEFAULT_BLOCK, FUSED_LAUNCH_CANDIDATES, HEAD_DIMS

CONFIG = ROOT / "config"
# a hang guard: with Triton's cache empty the GPU study's preflight compiles 391 variants, about
# 4 minutes on two busy cores; with the cache warm it recalls them in seconds
TIMEOUT = 900
# the launches of the points named after the output file, compiled for the targets before them
# (comma-separated): the preflight's machinery on a plan of the test's own, no validation cases
MEASURED = """
import json, sys
from kernels.impl.mode import set_interpret
set_interpret(False)
from kernels.build import preflight
from kernels.planning.point import Point
out, targets, *names = sys.argv[1:]
plan = [p for p in preflight.point_plan([Point.from_name(n) for n in names]) if p.use == "measure"]
open(out, "w").write(json.dumps(preflight.preflight(plan, targets.split(","), jobs=2)))
"""


def kernels_cli(*args: str) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", "kernels", *args], capture_output=True, text=True, timeout=TIMEOUT, env=env()
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def preflight_of(out: Path, targets, *names: str, environment: dict | None = None) -> dict:
    """The preflight's findings for the measured launches of the points ``names``."""
    done = subprocess.run(
        [sys.executable, "-c", MEASURED, str(out), ",".join(targets), *names],
        capture_output=True, text=True, timeout=TIMEOUT, env=environment or env(),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.mark.preflight
def test_every_launch_of_the_gpu_study_fits_the_gpu_it_runs_on(tmp_path):
    """The preset scripts/gpu_study.sh runs, through the same rule the script runs first.
    Marked preflight: `make preflight` runs it (CI after `make test`), outside the suite's
    budget. Slow (about 4 minutes) only where Triton's cache lacks the study's 391 kernels: the first
    run after a kernel changed compiles what changed, later runs recall the rest (the cache is
    keyed on everything the compile reads, see test_a_compiled_kernel_is_recalled_...)."""
    presets = [str(CONFIG / "config.yaml"), str(CONFIG / "presets" / "gpu_study.yaml")]
    done = snakemake(tmp_path, "--cores", "2", "preflight", "--configfile", *presets, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads((tmp_path / "results" / "preflight.json").read_text())
    log = (tmp_path / "results" / "logs" / "preflight.log").read_text()
    assert found["targets"] == ["sm_90"]
    assert found["counts"]["unfit"] == 0, log[-3000:]
    sweep = yaml.safe_load((CONFIG / "presets" / "gpu_study.yaml").read_text())["sweep"]
    planned = [p for p in points(sweep, largest_cache_bytes("cuda")) if p.triton]
    launches = found["launches"]
    assert {r["what"] for r in launches if r["use"] == "measure"} == {p.name for p in planned}
    fused = [p for p in planned if p.impl == "triton_flash"]
    candidates = [r for r in launches if r["use"] == "candidate"]
    assert len(candidates) == sum(len(FUSED_LAUNCH_CANDIDATES[p.head_dim]) for p in fused)
    # every validation case of every validated group: 2 masks per GPU shape its path takes
    # (the square ones and the inference ones), the materialized path's three kernels each,
    # the S-only path's three and the fused one, the backward grid's 64 × 64 groups: the
    # materialized path's and the fused one's again, and the decode grid's split-KV path's
    # two (its partials and their merge)
    groups = {"triton_naive": 3, "triton_s_only": 3, "triton_flash": 1}  # 128 × 64
    backward = {"triton_naive": 3, "triton_flash": 1}
    decode = {"triton_split_kv": 2}
    kernels = [(impl, n) for grid in (groups, backward, decode) for impl, n in grid.items()]
    cases = {(r["what"], r["kernel"]) for r in launches if r["use"] == "validate"}
    assert len(cases) == sum(2 * sum(takes(impl, s) for s in shapes_for("cuda")) * n for impl, n in kernels)
    assert f"{len(launches)} launches of {len(found['variants'])} compiled variants" in log


@pytest.mark.preflight
def test_the_default_launch_fits_every_head_dim_on_every_known_target(tmp_path):
    """The fused kernel's default pipelining depth is chosen against the smallest shared
    memory of the known targets: at the default blocks it builds everywhere, at every d."""
    names = [
        Point("triton_flash", 1, 2, 256, d, "bfloat16", True, DEFAULT_BLOCK, DEFAULT_BLOCK).name
        for d in HEAD_DIMS
    ]
    # the GPU study's blocks at d = 256: Triton's own 3 stages ask 263,168 B, over sm_90's limit
    wide = Point("triton_flash", 1, 2, 256, 256, "bfloat16", False, 128, 64).name
    found = preflight_of(tmp_path / "found.json", TARGETS, *names, wide)
    [wide_variant] = {r["variant"] for r in found["launches"] if r["what"] == wide}
    records = found["variants"]
    assert len(records) == (len(HEAD_DIMS) + 1) * len(TARGETS)
    for r in records:
        if r["variant"] == wide_variant and TARGETS[r["target"]].max_shared_per_block < 160 << 10:
            # no pipelining depth holds 128 × 256 Q and 64 × 256 K and V tiles in 99 KiB
            assert r["status"] == "failed" and "shared memory" in r["reason"]
        else:
            assert r["status"] == "ok", (r["target"], r["constants"], r["reason"])


def cache_files(cache: Path) -> dict[Path, int]:
    """Every file in a Triton cache folder, by its inode: Triton writes a compile's files
    anew (a new inode each), so an unchanged map means nothing was compiled."""
    return {p: p.stat().st_ino for p in cache.rglob("*") if p.is_file()}


@pytest.mark.preflight  # make preflight (CI): compiles for GPU targets
def test_a_compiled_kernel_is_recalled_with_its_findings_and_compiled_where_the_cache_lacks_them(
    tmp_path,
):
    """The preflight takes a kernel from Triton's cache, with the ptxas log kept beside it,
    instead of compiling it again; what it finds is the same. A kernel cached without its
    log (as a GPU job's JIT leaves it) is compiled again. In a cache of the test's own, so
    that the compiling path runs on every run of the suite."""
    cache = tmp_path / "triton-cache"
    environment = env() | {"TRITON_CACHE_DIR": str(cache)}
    small = Point("triton_flash", 1, 2, 100, 16, "float16", True, 16, 16).name  # one kernel
    first = preflight_of(tmp_path / "first.json", ["sm_80", "sm_90"], small, environment=environment)
    assert len(first["variants"]) == 2 and all(r["registers"] > 0 for r in first["variants"])
    logs = sorted(cache.rglob(PTXAS_LOG))
    assert len(logs) == 2  # one kernel folder per variant and target: the key holds the target
    compiled = cache_files(cache)
    again = preflight_of(tmp_path / "again.json", ["sm_80", "sm_90"], small, environment=environment)
    assert cache_files(cache) == compiled  # recalled: nothing compiled, nothing written
    same = ("compile_s",)
    assert [{k: v for k, v in r.items() if k not in same} for r in again["variants"]] == [
        {k: v for k, v in r.items() if k not in same} for r in first["variants"]
    ]
    assert again["launches"] == first["launches"]
    os.remove(logs[0])  # one kernel cached without its log
    lost = preflight_of(tmp_path / "lost.json", ["sm_80", "sm_90"], small, environment=environment)
    changed = {p for p, inode in cache_files(cache).items() if compiled.get(p) != inode}
    assert changed and {p.parent for p in changed} == {logs[0].parent}  # that one compiled again
    assert logs[0].exists()  # and its log kept again
    assert [r["registers"] for r in lost["variants"]] == [r["registers"] for r in first["variants"]]


@pytest.mark.preflight
def test_validation_leaves_out_the_cases_that_cannot_launch_and_says_why(tmp_path):
    """On an sm_86 GPU (101,376 B of shared memory per block) the fused kernel with 128 × 64
    blocks cannot hold d = 256; validation there leaves those cases out, naming the kernel,
    the target and the shared memory, and still checks the rest."""
    point = Point("triton_flash", 1, 2, 300, 256, "bfloat16", False, 128, 64)
    findings = tmp_path / "preflight.json"
    printed = kernels_cli(
        "preflight", "--point", point.name, "--target", "sm_86", "--jobs", "2", "--out", str(findings)
    ).stdout
    found = json.loads(findings.read_text())
    unfit = [r for r in found["launches"] if r["status"] == "unfit"]
    assert unfit and all("-d256-" in r["what"] and "shared memory" in r["reason"] for r in unfit)
    assert {r["use"] for r in unfit} >= {"measure", "validate"}
    assert "UNFIT sm_86 attention_fwd_kernel" in printed and "101,376 B" in printed

    verdicts = tmp_path / "verdicts.json"
    kernels_cli(
        "validate", "--device", "cpu", "--impl", "triton_flash", "--dtype", "bfloat16",
        "--block-m", "128", "--block-n", "64", "--tokens", "300", "--head-dim", "256", "16",
        "--batch", "1", "--heads", "2", "--causal", "false", "--preflight", str(findings),
        "--json", str(verdicts),
    )  # fmt: skip
    by_dim = {r["head_dim"]: r for r in json.loads(verdicts.read_text())}
    assert by_dim[256]["verdict"] == "unfit" and by_dim[256]["as_expected"]
    assert "attention_fwd_kernel on sm_86: out of resource: shared memory" in by_dim[256]["message"]
    assert by_dim[16]["verdict"] == "pass"
