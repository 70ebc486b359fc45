"""Before any GPU minute is spent: every launch a GPU plan will make — each sweep point's
call, the fused kernel's launch candidates, every validation case of every validated group,
and the cases of the tests marked gpu — compiled for the target and held against its limits
(shared memory per block, registers per block, threads), naming each launch that cannot run
and why. Spills are named too: such a launch runs, slowly (a candidate that spills is not
timed). Runs anywhere: Triton compiles for a target without its GPU. A kernel that Triton's
cache holds with its ptxas log (an earlier preflight's or build's) is taken from there instead
of compiled again (kernels.build.compile.compile_or_recall): the same findings, in seconds.

On the GPU machine the target is the local GPU, and validation leaves out, with the reason,
the cases found here to be unlaunchable (``validate --preflight``) instead of failing them.
"""

from __future__ import annotations

import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from kernels import catalog
from kernels.build import compile as build
from kernels.build.variants import backward_launches, candidate_launches, case_launches, point_launches
from kernels.impl.triton.launch import Launch
from kernels.planning import gpu_checks
from kernels.planning.cases import case_key, cases, shapes_for, takes
from kernels.planning.point import Point


@dataclass(frozen=True)
class Planned:
    use: str  # measure | candidate | backward | validate | validate_backward | gpu_test
    what: str  # the point's name, or the validation case's key
    launch: Launch


def point_plan(points: list[Point], use: str = "measure") -> list[Planned]:
    """Each point's launches and, for the fused kernel, its launch candidates."""
    planned = []
    for point in points:
        planned += [Planned(use, point.name, launch) for launch in point_launches(point)]
        planned += [Planned("candidate", point.name, launch) for launch in candidate_launches(point)]
    return planned


def backward_plan(points: list[Point]) -> list[Planned]:
    """Each forward point's backward launches (kernels.build.variants.backward_launches; a
    backward point's are among its own launches already), and the
    backward validation of each point's implementation, dtype and blocks (``validate
    --backward``)."""
    groups = dict.fromkeys((p.impl, p.dtype, p.block_m, p.block_n) for p in points if p.triton)
    own = [
        Planned("backward", p.name, launch)
        for p in points
        if not p.backward
        for launch in backward_launches(p)
    ]
    return own + validation_plan(groups, use="validate_backward", direction="backward")


def validation_plan(groups, dtypes=None, use: str = "validate", direction: str = "forward") -> list[Planned]:
    """Every case validation runs on a GPU for each (impl, dtype, block_m, block_n) group
    (``dtypes`` given: each group in each of them): the square shapes and the inference
    shapes its registration takes, as validation picks them (kernels.planning.cases);
    ``direction`` backward: the backward cases of the groups whose path has a backward."""
    planned = []
    device_shapes = shapes_for("cuda", backward=direction == "backward")
    for impl, dtype, block_m, block_n in groups:
        if not catalog.get(impl).triton or (direction == "backward" and catalog.get(impl).backward is None):
            continue
        shapes = [shape for shape in device_shapes if takes(impl, shape)]
        for shape, case_dtype, causal in cases(shapes, dtypes or (dtype,), (False, True)):
            key = case_key(impl, shape, case_dtype, causal, block_m, block_n, direction)
            launches = case_launches(impl, shape, case_dtype, causal, block_m, block_n, direction)
            planned += [Planned(use, key, launch) for launch in launches]
    return planned


def study_plan(points: list[Point]) -> list[Planned]:
    """What a study of these points launches: the points, and the validation of each
    point's implementation, dtype and blocks (a point is measured only once that passed)."""
    groups = dict.fromkeys((p.impl, p.dtype, p.block_m, p.block_n) for p in points if p.triton)
    return point_plan(points) + validation_plan(groups)


def gpu_test_plan() -> list[Planned]:
    """What tests/test_gpu.py launches."""
    groups = [(impl, None, *gpu_checks.VALIDATION_BLOCKS) for impl in gpu_checks.validation_impls()]
    return validation_plan(groups, gpu_checks.VALIDATION_DTYPES, "gpu_test") + point_plan(
        gpu_checks.points(), "gpu_test"
    )


def finding(record: dict) -> tuple[str, str | None]:
    """(status, reason) of one compiled variant: unfit (it cannot launch), spills (it runs,
    with registers spilled to local memory) or ok."""
    if record["status"] != "ok":
        return "unfit", record["reason"]
    spilled = (record.get("spill_store_bytes") or 0) + (record.get("spill_load_bytes") or 0)
    if spilled:
        return "spills", (
            f"spills {record['spill_store_bytes'] or 0:,} B stored and {record['spill_load_bytes'] or 0:,} B "
            f"loaded ({record['registers']} registers, {record['num_warps']} warps)"
        )
    return "ok", None


_WORK: list[tuple[Launch, str, Path | None]] = []  # what forked workers compile, by index


def _compile(index: int) -> dict:
    launch, target, artifacts = _WORK[index]
    return build.compile_variant(launch, target, artifacts)


def compile_all(work: list[tuple[Launch, str, Path | None]], jobs: int, progress=None) -> list[dict]:
    """compile_variant over ``work``, on ``jobs`` forked processes (compiling is CPU work of
    Triton's and ptxas; the workers share the plan by fork instead of pickling kernels)."""
    _WORK[:] = work
    try:
        if jobs <= 1 or len(work) <= 1:
            results = map(_compile, range(len(work)))
            return [_report(r, progress) for r in results]
        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork")) as pool:
            return [_report(r, progress) for r in pool.map(_compile, range(len(work)))]
    finally:
        _WORK.clear()


def _report(record: dict, progress) -> dict:
    if progress:
        progress(record)
    return record


def preflight(
    planned: list[Planned],
    target_names: list[str],
    artifacts: Path | None = None,
    jobs: int = 1,
    progress=None,
) -> dict:
    """Compile each distinct variant of the plan once per target; every planned launch gets
    the finding of its variant. Returns {"targets", "triton", "seconds", "launches",
    "variants", "counts"}."""
    import triton

    build.require_compiled_mode()
    started = time.perf_counter()
    naming = build.gpu_target(target_names[0] if target_names else "sm_90")
    ids = [build.variant_id(build.describe(p.launch, *build.specialize(p.launch, naming))) for p in planned]
    distinct = dict(zip(ids, (p.launch for p in planned), strict=True))
    keys = [(vid, name) for name in target_names for vid in distinct]
    work = [(distinct[vid], name, artifacts / name if artifacts else None) for vid, name in keys]
    records = dict(zip(keys, compile_all(work, jobs, progress), strict=True))
    launches = []
    for item, vid in zip(planned, ids, strict=True):
        for name in target_names:
            status, reason = finding(records[vid, name])
            launches.append(
                {"use": item.use, "what": item.what, "kernel": item.launch.name, "variant": vid}
                | {"target": name, "status": status, "reason": reason}
            )
    counts = {s: sum(r["status"] == s for r in launches) for s in ("ok", "spills", "unfit")}
    return {
        "targets": list(target_names),
        "triton": triton.__version__,
        "seconds": time.perf_counter() - started,
        "launches": launches,
        "variants": [records[key] for key in records],
        "counts": counts,
    }


def problems(found: dict) -> list[str]:
    """One line per distinct launch that cannot run or spills, with what plans it."""
    lines: dict[tuple, list[str]] = {}
    for launch in found["launches"]:
        if launch["status"] != "ok":
            key = (launch["status"], launch["target"], launch["kernel"], launch["variant"], launch["reason"])
            lines.setdefault(key, []).append(f"{launch['use']} {launch['what']}")
    out = []
    for (status, target, kernel, variant, reason), uses in sorted(lines.items(), key=lambda kv: kv[0][:4]):
        shown = "; ".join(uses[:3]) + (f"; and {len(uses) - 3} more" if len(uses) > 3 else "")
        out.append(f"{status.upper()} {target} {kernel} ({variant}): {reason} [{shown}]")
    return out
