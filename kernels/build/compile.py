"""Ahead-of-time builds: compile every kernel variant a sweep launches for GPU targets that
need not be present, and describe what ptxas made of it.

Triton compiles for any ``GPUTarget`` without a GPU. We specialize each launch exactly as
Triton's JIT would on that target (its own binder and argument packing), compile it, keep
the Triton IR, PTX, cubin and SASS, and read registers, spills, shared memory and the instruction mix
with the ``ptxas`` log and the ``cuobjdump`` Triton ships. On a GPU, building for the local
target writes Triton's on-disk cache with the same keys the JIT looks up, so timed runs
find their kernels compiled.

A variant that cannot run on a target — compilation fails, or it needs more shared memory
per block than the target has (the check Triton makes when it loads a kernel) — is a
``failed`` record carrying the message; the points that launch it are skipped.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import subprocess
import time
from pathlib import Path

from kernels import _compat
from kernels.build import sass, targets
from kernels.build.variants import backward_launches, candidate_launches, point_launches
from kernels.impl import mode
from kernels.impl.triton.launch import Launch
from kernels.planning.point import Point

ARTIFACTS = ("ttir", "ptx", "cubin", "sass", "resources")


def require_compiled_mode() -> None:
    if mode.interpret():
        raise RuntimeError(
            f"building needs compiled Triton, but {mode.SWITCH}=1 selected the "
            "interpreter; run `python -m kernels build` (it selects compiled mode)"
        )


def specialize(launch: Launch, target):
    """(ASTSource, options) exactly as Triton's JIT builds them for ``launch`` on ``target``."""
    return _compat.specialize(launch.kernel, launch.args, launch.options, target)


def describe(launch: Launch, src, options) -> dict:
    """The variant in words: kernel, argument types, constants and launch options (as the
    backend resolves them: a launch that leaves num_stages to the default and one that asks
    for the default's value are one variant)."""
    names = [p.name for p in launch.kernel.params]
    constants = {names[path[0]]: value for path, value in src.constants.items()}
    types = sorted({t for t in src.signature.values() if t != "constexpr"})
    aligned = sorted(names[path[0]] for path, attr in src.attrs.items() if attr)
    return {
        "kernel": launch.name,
        "constants": constants,
        "argument_types": types,
        "aligned_16": aligned,
        "num_warps": options.num_warps,
        "num_stages": options.num_stages,
    }


def variant_id(description: dict) -> str:
    """Stable short name: kernel name + hash of everything that makes the binary differ."""
    digest = hashlib.sha256(repr(sorted(description.items())).encode()).hexdigest()[:10]
    return f"{description['kernel']}-{digest}"


def gpu_target(name: str):
    from triton.backends.compiler import GPUTarget

    return GPUTarget("cuda", targets.parse_target(name), 32)


def run_tool(tool, *args: str) -> str:
    done = subprocess.run([tool.path, *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{Path(tool.path).name} {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


def compile_variant(launch: Launch, target_name: str, artifacts: Path | None) -> dict:
    """Compile one launch for one target; the record says ok or failed, never raises for the
    kernel's own faults. Without ``artifacts`` only the resources the target's limits are
    held against are read (from the ptxas log: no SASS, no artifacts), and a kernel Triton's
    cache holds with its log is not compiled again (compile_or_recall)."""
    require_compiled_mode()
    target = gpu_target(target_name)
    src, options = specialize(launch, target)
    record = describe(launch, src, options)
    record |= {"variant": variant_id(record), "target": target_name}
    started = time.perf_counter()
    try:
        if artifacts is None:  # the preflight: the limits only, from Triton's cache where it can
            compiled, ptxas_log = compile_or_recall(src, target, options)
        else:  # a build: always compiled, its time in the record
            compiled, ptxas_log = compile_with_log(src, target, options, always=True)
    except Exception as err:  # noqa: BLE001 - the compiler's message is the record
        return record | {
            "status": "failed",
            "reason": compiler_message(err),
            "compile_s": time.perf_counter() - started,
        }
    record["compile_s"] = time.perf_counter() - started
    if artifacts is None:
        return record | limits_only(compiled, ptxas_log, target_name)
    return record | inspect(compiled, ptxas_log, target_name, artifacts / record["variant"])


PTXAS_LOG = "attnio-ptxas-v.log"  # beside a kernel in Triton's cache: what ptxas said of it


def compile_with_log(src, target, options, always: bool) -> tuple:
    """(CompiledKernel, the ``ptxas -v`` log) of one compile; ``always``: compiled even when
    Triton's cache has it. The log is "" where Triton took the kernel from its cache (ptxas
    did not run); otherwise it is kept in the kernel's cache folder for compile_or_recall."""
    from triton import knobs
    from triton.compiler import compile as triton_compile
    from triton.runtime.cache import get_cache_manager

    log = io.StringIO()
    with knobs.nvidia.scope(), knobs.compilation.scope(), contextlib.redirect_stdout(log):
        knobs.nvidia.dump_ptxas_log = True  # ptxas -v: registers, shared memory, spills
        knobs.compilation.always_compile = always  # the cache is written either way
        compiled = triton_compile(src, target=target, options=options.__dict__)
    if log.getvalue():
        get_cache_manager(compiled.hash).put(log.getvalue(), PTXAS_LOG, binary=False)
    return compiled, log.getvalue()


def compile_or_recall(src, target, options) -> tuple:
    """(CompiledKernel, ptxas log) as compile_with_log, taken from Triton's cache when an
    earlier compile of this very kernel left its log there. Triton's cache key covers the
    kernel's source and what it calls, the specialization, the options, the target, Triton and
    ptxas, so a kernel that changed in any way is compiled again; and the cache still holds
    every kernel the preflight checked, for the jobs after it."""
    from triton.runtime.cache import get_cache_manager

    compiled, ptxas_log = compile_with_log(src, target, options, always=False)
    if ptxas_log:  # compiled just now
        return compiled, ptxas_log
    kept = get_cache_manager(compiled.hash).get_file(PTXAS_LOG)
    if kept:
        return compiled, Path(kept).read_text()
    return compile_with_log(src, target, options, always=True)  # cached without its log: by the JIT


def compiler_message(err: Exception) -> str:
    lines = [line for line in str(err).splitlines() if line.strip()]
    text = " | ".join(lines[:12])
    return f"{type(err).__name__}: {text[:1500]}"


def held_against_target(target_name: str, registers: int, num_warps: int, shared: int) -> dict:
    """Status, reason and occupancy of a kernel's resources on the target."""
    target = targets.TARGETS.get(target_name)
    problem = targets.shared_memory_problem(target, shared) or targets.register_problem(
        target, registers, num_warps
    )
    return {
        "status": "failed" if problem else "ok",
        "reason": problem,
        **targets.occupancy(target, registers, num_warps, shared),
    }


def resources(usage: dict[str, int], ptxas_log: str, compiled, target_name: str) -> dict:
    """Registers (``usage``: cuobjdump's or the ptxas log's), spills (the ptxas log), static
    and dynamic shared memory, held against the target."""
    spilled = sass.spills(ptxas_log)
    dynamic_shared = int(compiled.metadata.shared)
    shared = usage["SHARED"] + dynamic_shared
    num_warps = int(compiled.metadata.num_warps)
    return {
        "registers": usage["REG"],
        "spill_store_bytes": spilled[0] if spilled else None,
        "spill_load_bytes": spilled[1] if spilled else None,
        "static_shared_bytes": usage["SHARED"],
        "dynamic_shared_bytes": dynamic_shared,
        "shared_bytes": shared,
        **held_against_target(target_name, usage["REG"], num_warps, shared),
    }


def limits_only(compiled, ptxas_log: str, target_name: str) -> dict:
    """What the target's limits are held against, from the ptxas log and Triton's metadata."""
    return resources(sass.ptxas_resources(ptxas_log), ptxas_log, compiled, target_name)


def inspect(compiled, ptxas_log: str, target_name: str, stem: Path) -> dict:
    """Resources, occupancy and instruction mix of a compiled kernel; artifacts kept."""
    from triton import knobs

    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = {kind: stem.with_suffix(f".{kind}") for kind in ARTIFACTS}
    paths["ttir"].write_text(compiled.asm["ttir"])
    paths["ptx"].write_text(compiled.asm["ptx"])
    paths["cubin"].write_bytes(compiled.asm["cubin"])
    tool = knobs.nvidia.cuobjdump
    resources_text = run_tool(tool, "--dump-resource-usage", str(paths["cubin"]))
    sass_text = run_tool(tool, "--dump-sass", str(paths["cubin"]))
    paths["resources"].write_text(resources_text)
    paths["sass"].write_text(sass_text)
    usage = sass.resource_usage(resources_text)
    return {
        **resources(usage, ptxas_log, compiled, target_name),
        "stack_bytes": usage["STACK"],
        "local_bytes": usage["LOCAL"],
        "instructions": sass.instruction_mix(sass_text),
        "artifacts": {kind: str(path) for kind, path in paths.items()},
        "ptxas_version": knobs.nvidia.ptxas.version,
    }


def build(
    points: list[Point],
    target_names: list[str],
    artifacts: Path,
    progress=None,
    candidates: bool = True,
    backward: bool = False,
) -> dict:
    """Every distinct launch of ``points``, every launch candidate of the fused kernel and,
    with ``backward``, every launch of each point's backward, compiled for every target.
    Returns {"targets", "triton", "points": {point name: [variant ids it launches]},
    "candidates": {point name: [candidate variant ids]}, "backward": {point name: [variant
    ids]}, "variants": [records]}."""
    import triton

    require_compiled_mode()
    artifacts.mkdir(parents=True, exist_ok=True)  # the rule's output, also when nothing compiles
    launches: dict[str, Launch] = {}
    naming_target = gpu_target(target_names[0] if target_names else "sm_90")  # ids: any target

    def ids_of(found: list[Launch]) -> list[str]:
        ids = []
        for launch in found:
            vid = variant_id(describe(launch, *specialize(launch, naming_target)))
            launches.setdefault(vid, launch)
            ids.append(vid)
        return ids

    needs = {point.name: ids_of(point_launches(point)) for point in points}
    tried = {point.name: ids for point in points if candidates and (ids := ids_of(candidate_launches(point)))}
    backs = {point.name: ids for point in points if backward and (ids := ids_of(backward_launches(point)))}
    records = []
    for name in target_names:
        for launch in launches.values():
            record = compile_variant(launch, name, artifacts / name)
            records.append(record)
            if progress:
                progress(record)
    return {
        "targets": list(target_names),
        "triton": triton.__version__,
        "points": needs,
        "candidates": tried,
        "backward": backs,
        "variants": records,
    }
