"""The build stage: real Triton compilations for sm_80 and sm_90 on this GPU-less machine,
read back with the cuobjdump Triton ships."""

import importlib.util
import json
import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kernels.build import targets
from kernels.build.sass import instruction_mix, width_bits
from kernels.planning.point import Point

TRITON = Path(importlib.util.find_spec("triton").origin).parent
CUOBJDUMP = TRITON / "backends" / "nvidia" / "bin" / "cuobjdump"
SMALL = "triton_naive/float16/B1-H2-T100-d16-causal-bm16-bn16-normal"
FUSED = "triton_flash/float16/B1-H2-T128-d64-causal-bm64-bn64-normal"


def kernels_cli(*args, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "kernels", *args], capture_output=True, text=True, timeout=timeout
    )


def build(tmp: Path, *points: str, candidates: bool = True) -> dict:
    out = tmp / "build.json"
    done = kernels_cli(
        "build",
        "--target",
        "sm_80",
        "sm_90",
        "--point",
        *points,
        "--candidates" if candidates else "--no-candidates",
        "--out",
        str(out),
        "--artifacts",
        str(tmp / "artifacts"),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())


def children_cpu_seconds() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The build of SMALL and FUSED, and the CPU seconds it took (its process, ptxas and
    cuobjdump): what the build costs, whatever else the machine runs beside the suite."""
    tmp = tmp_path_factory.mktemp("build")
    started = children_cpu_seconds()
    result = build(tmp, SMALL, FUSED)
    return result, children_cpu_seconds() - started


def by_kernel(result, kernel, target):
    """The variants of ``kernel`` the points launch as they run (not the launch candidates)."""
    launched = {v for ids in result["points"].values() for v in ids}
    return [
        r
        for r in result["variants"]
        if r["kernel"] == kernel and r["target"] == target and r["variant"] in launched
    ]


@pytest.mark.preflight  # make preflight (CI): compiles for GPU targets
def test_small_kernels_build_for_both_targets_in_seconds(built):
    result, seconds = built
    # three small variants and four of the 64×64 fused kernel, two targets: about 20 s of CPU
    assert seconds < 90
    assert result["points"][SMALL] and len(result["points"][SMALL]) == 3
    for target in ("sm_80", "sm_90"):
        kernels = {r["kernel"] for r in result["variants"] if r["target"] == target}
        assert kernels == {"scores_kernel", "softmax_kernel", "pv_kernel", "attention_fwd_kernel"}
    for record in result["variants"]:
        assert record["status"] == "ok", record["reason"]
        assert 0 < record["registers"] <= 255
        assert record["compile_s"] > 0
        assert 1 <= record["blocks_per_sm"] <= targets.TARGETS[record["target"]].max_blocks_per_sm
        for path in record["artifacts"].values():
            assert Path(path).stat().st_size > 0


def resource_usage_by_hand(cubin: str) -> dict:
    text = subprocess.run(
        [str(CUOBJDUMP), "--dump-resource-usage", cubin], capture_output=True, text=True, check=True
    ).stdout
    return {key: int(value) for key, value in re.findall(r"(REG|STACK|SHARED|LOCAL):(\d+)", text)}


@pytest.mark.preflight  # make preflight (CI): compiles for GPU targets
def test_records_agree_with_cuobjdump_run_by_hand(built):
    result, _ = built
    for record in result["variants"]:
        usage = resource_usage_by_hand(record["artifacts"]["cubin"])
        assert usage["REG"] == record["registers"]
        assert usage["STACK"] == record["stack_bytes"]
        assert usage["LOCAL"] == record["local_bytes"]
        assert usage["SHARED"] == record["static_shared_bytes"]
        assert record["shared_bytes"] == usage["SHARED"] + record["dynamic_shared_bytes"]


@pytest.mark.preflight  # make preflight (CI): compiles for GPU targets
def test_cubins_are_for_the_asked_targets(built):
    result, _ = built
    for record in result["variants"]:
        sass = Path(record["artifacts"]["sass"]).read_text()
        arch = re.search(r"code for (sm_\d+)", sass).group(1)
        assert arch == record["target"]  # sm_90 is built as sm_90a; cuobjdump names sm_90a
        ptx = Path(record["artifacts"]["ptx"]).read_text()
        assert f".target {record['target']}" in ptx


@pytest.mark.preflight  # make preflight (CI): compiles for GPU targets
def test_instruction_counts_match_the_sass(built):
    result, _ = built
    for record in result["variants"]:
        sass = Path(record["artifacts"]["sass"]).read_text()
        body = [line for line in sass.splitlines() if re.search(r"/\*[0-9a-f]{4}\*/", line)]
        assert record["instructions"]["total"] == len(body)
        for cls in ("HMMA", "HGMMA", "LDG", "STG"):
            by_grep = sum(1 for line in body if re.search(rf"\s{cls}(\.|\s)", line))
            assert record["instructions"].get(cls, 0) == by_grep, cls


@pytest.mark.preflight  # make preflight (CI): compiles for GPU targets
def test_fused_kernel_uses_each_targets_tensor_cores(built):
    result, _ = built
    [fused_80] = by_kernel(result, "attention_fwd_kernel", "sm_80")
    [fused_90] = by_kernel(result, "attention_fwd_kernel", "sm_90")
    assert fused_80["instructions"].get("HMMA", 0) > 0 and not fused_80["instructions"].get("HGMMA")
    assert fused_90["instructions"].get("HGMMA", 0) > 0  # warpgroup MMA on Hopper
    [softmax] = by_kernel(result, "softmax_kernel", "sm_90")
    assert not softmax["instructions"].get("HMMA") and not softmax["instructions"].get("HGMMA")


@pytest.mark.preflight  # make preflight (CI): compiles for GPU targets
def test_every_launch_candidate_of_the_fused_kernel_is_built_for_every_target(built):
    """The fused point's candidates (num_warps, num_stages) of its head dim, each compiled
    for both targets; the launch it makes by default is one of them (one variant, not two)."""
    from kernels.spec import FUSED_LAUNCH_CANDIDATES

    result, _ = built
    ids = result["candidates"][FUSED]
    assert set(result["points"][FUSED]) <= set(ids)
    assert SMALL not in result["candidates"]  # only the fused kernel has candidates
    for target in ("sm_80", "sm_90"):
        tried = [r for r in result["variants"] if r["variant"] in ids and r["target"] == target]
        assert sorted((r["num_warps"], r["num_stages"]) for r in tried) == sorted(FUSED_LAUNCH_CANDIDATES[64])
        stages = {r["num_stages"]: r["shared_bytes"] for r in tried if r["num_warps"] == 4}
        assert stages[2] < stages[3] < stages[4]  # each stage more keeps one more K and V tile


@pytest.mark.preflight  # make preflight (CI): compiles for GPU targets
def test_a_gpu_run_times_the_candidates_that_build_without_spilling(built):
    import copy

    from kernels.planning.launch import launch_candidates
    from kernels.spec import FUSED_LAUNCH_CANDIDATES

    result, _ = built
    assert launch_candidates(FUSED, [result], "sm_90") == list(FUSED_LAUNCH_CANDIDATES[64])
    assert launch_candidates(SMALL, [result], "sm_90") == []
    damaged = copy.deepcopy(result)
    first, second = damaged["candidates"][FUSED][:2]
    for record in damaged["variants"]:
        if record["target"] == "sm_90" and record["variant"] == first:
            record["status"] = "failed"
        if record["target"] == "sm_90" and record["variant"] == second:
            record["spill_store_bytes"] = 64
    assert launch_candidates(FUSED, [damaged], "sm_90") == list(FUSED_LAUNCH_CANDIDATES[64][2:])
    assert launch_candidates(FUSED, [damaged], "sm_80") == list(FUSED_LAUNCH_CANDIDATES[64])


@pytest.mark.preflight  # make preflight (CI): compiles for GPU targets
def test_the_build_report_tables_every_candidate(built, tmp_path):
    """The Build page's candidate table, from build.csv as the pipeline writes it: a row per
    candidate and target, the launches the points make left in the page's other tables."""
    from kernels.build.table import build_table
    from reports.pages.build import candidate_summary, candidate_table, launched

    result, _ = built
    (tmp_path / "build.json").write_text(json.dumps(result))
    builds = build_table([tmp_path / "build.json"])
    table = candidate_table(builds)
    assert len(table) == 2 * len(result["candidates"][FUSED])  # every candidate, both targets
    assert table["timed on a GPU"].all() and set(table["stages"]) == {2, 3, 4}
    assert "**sm_90**: 4 of 4 candidates build without spilling" in candidate_summary(table)
    only_tried = set(result["candidates"][FUSED]) - set(result["points"][FUSED])
    assert not set(launched(builds)["variant"]) & only_tried


@pytest.mark.preflight  # make preflight (CI): compiles for GPU targets
def test_a_candidate_that_builds_stands_in_for_a_default_launch_that_does_not(built):
    """The point runs where its own launch cannot (too much shared memory, say) but a
    candidate builds without spilling: a GPU run times it with the candidates."""
    import copy

    from kernels.planning.launch import build_failure

    result, _ = built
    broken = copy.deepcopy(result)
    [own] = broken["points"][FUSED]
    for record in broken["variants"]:
        if record["variant"] == own and record["target"] == "sm_90":
            record |= {"status": "failed", "reason": "out of resource: shared memory"}
    assert build_failure(FUSED, [broken], ["sm_90"]) is None
    for record in broken["variants"]:
        if record["variant"] in broken["candidates"][FUSED] and record["target"] == "sm_90":
            record["spill_store_bytes"] = record["spill_store_bytes"] or 8  # all spill now
    assert "does not build for sm_90: out of resource" in build_failure(FUSED, [broken], ["sm_90"])
    assert build_failure(FUSED, [broken], ["sm_80"]) is None  # sm_80 untouched


@pytest.mark.preflight  # make preflight (CI): compiles for GPU targets
def test_fused_kernel_masks_only_the_tiles_that_need_it(built):
    """In the compiled kernel (its Triton IR, kept by the build), K and V are loaded twice:
    unmasked for the tiles every row sees whole, masked for the causal diagonal and the
    tail past T; Q once, masked (its last block may pass T)."""
    import re

    result, _ = built
    for target in ("sm_80", "sm_90"):
        for fused in by_kernel(result, "attention_fwd_kernel", target):
            ttir = Path(fused["artifacts"]["ttir"]).read_text()
            loads = re.findall(r"= tt\.load ([^:]+):", ttir)
            masked = [load for load in loads if "," in load]
            assert len(loads) == 5 and len(masked) == 3, loads


@pytest.mark.preflight  # make preflight (CI): compiles for GPU targets
def test_a_point_the_build_did_not_build_is_refused(built, tmp_path):
    """measure --require-build with a build that never built the point: refused, naming the
    flag and asking for a rebuild (a block too large for both targets, its build recorded as
    failed and its point skipped: tests/test_build_workflow.py)."""
    result, _ = built
    build_json = tmp_path / "build.json"
    build_json.write_text(json.dumps(result))
    other = Point.from_name(SMALL.replace("-causal-", "-full-"))
    assert other.name not in result["points"]
    out = tmp_path / "point.json"
    done = kernels_cli(
        "measure", *other.cli_args(), "--device", "cpu", "--require-build", str(build_json), "--out", str(out)
    )
    assert done.returncode != 0 and "--require-build" in done.stderr and "rebuild" in done.stderr
    assert not out.exists()


def test_build_refuses_bad_targets_and_points(tmp_path):
    done = kernels_cli(
        "build",
        "--target",
        "sm90",
        "--point",
        SMALL,
        "--out",
        str(tmp_path / "b"),
        "--artifacts",
        str(tmp_path),
    )
    assert done.returncode == 2 and "argument --target: invalid choice: 'sm90'" in done.stderr
    for point, message in [
        ("triton_flash/T100", "does not read as"),
        (SMALL.replace("bm16", "bm48"), "block_m=48: allowed values are 16, 32, 64, 128, 256"),
    ]:
        out = ["--out", str(tmp_path / "b"), "--artifacts", str(tmp_path)]
        done = kernels_cli("build", "--point", point, *out)
        assert done.returncode != 0 and message in done.stderr
    assert not (tmp_path / "b").exists()


def test_planned_launches_are_the_ones_the_implementation_makes():
    """Meta tensors plan the same launches (kernels, grids, scalars, options) as real ones."""
    from kernels.build.variants import point_launches
    from kernels.paths.triton_naive import forward as triton_naive

    point = Point.from_name(SMALL)
    planned = point_launches(point)
    q, k, v = (torch.randn(1, 2, 100, 16, dtype=torch.float16) for _ in range(3))
    s, p = triton_naive.sp_tensors(q)
    real = triton_naive.naive_launches(q, k, v, s, p, torch.empty_like(q), True, 16, 16)
    assert [x.name for x in planned] == ["scores_kernel", "softmax_kernel", "pv_kernel"]
    for a, b in zip(planned, real, strict=True):
        assert a.grid == b.grid and a.options == b.options
        assert [(t.shape, t.stride(), t.dtype) if isinstance(t, torch.Tensor) else t for t in a.args] == [
            (t.shape, t.stride(), t.dtype) if isinstance(t, torch.Tensor) else t for t in b.args
        ]


def test_occupancy_by_hand():
    h100, a100 = targets.TARGETS["sm_90"], targets.TARGETS["sm_80"]
    # 128 registers × 32 threads = 4,096 per warp; 4 warps → 16,384 per block → 4 blocks
    assert targets.occupancy(h100, 128, 4, 0)["blocks_per_sm"] == 4
    assert targets.occupancy(h100, 128, 4, 0)["occupancy_limited_by"] == "registers"
    # 100 KiB + 1 KiB reserved per block: one fits in A100's 164 KiB, two in H100's 228 KiB
    assert targets.occupancy(a100, 32, 4, 100 * 1024)["blocks_per_sm"] == 1
    assert targets.occupancy(h100, 32, 4, 100 * 1024)["blocks_per_sm"] == 2
    # 8 warps of 16 registers: threads allow 2048 / 256 = 8 blocks
    assert targets.occupancy(h100, 16, 8, 0) == {
        "blocks_per_sm": 8,
        "occupancy_limited_by": "threads",
        "warps_per_sm": 64,
        "occupancy": 1.0,
    }
    # registers round up per warp in units of 256: 33 regs → 1,280 per warp
    assert targets.occupancy(h100, 33, 4, 0)["blocks_per_sm"] == 65536 // (1280 * 4)
    assert targets.shared_memory_problem(a100, 166_912) is None
    assert "166,912" in targets.shared_memory_problem(a100, 166_913)


def test_instruction_widths():
    assert width_bits("LDG.E.128") == 128 and width_bits("STG.E.U16") == 16
    assert width_bits("LDS") == 32 and width_bits("LDGSTS.E.BYPASS.LTC128B.128") == 128
    sass = (
        "        /*0010*/                   LDG.E.128 R4, desc[UR4][R2.64] ;\n"
        "        /*0020*/              @!P0 STG.E.U16 desc[UR4][R2.64], R5 ;\n"
        "        /*0030*/                   HGMMA.64x64x16.F32 R24, gdesc[UR4], R24 ;\n"
    )
    assert instruction_mix(sass) == {"total": 3, "HGMMA": 1, "LDG": 1, "LDG.128": 1, "STG": 1, "STG.16": 1}
