"""The GPU targets we build for, their per-SM limits, and the occupancy a kernel allows.

Limits are those of NVIDIA's CUDA C++ Programming Guide (table "Technical Specifications
per Compute Capability") for each compute capability. Occupancy is computed the way the
CUDA occupancy calculator does: the resident blocks per SM are the fewest allowed by
threads, registers (allocated per warp in units of 256), shared memory (each block also
reserves 1 KiB for the system) and the block limit.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from kernels.spec import GPU_TARGETS, MAX_SHARED_PER_BLOCK


@dataclass(frozen=True)
class Target:
    name: str  # "sm_90"
    capability: int  # 90
    gpus: str  # examples, for tables
    max_threads_per_sm: int
    max_blocks_per_sm: int
    registers_per_sm: int
    shared_per_sm: int  # bytes, the largest carve-out
    max_shared_per_block: int  # bytes, with the opt-in attribute (what Triton checks at load)
    reserved_shared_per_block: int = 1024
    register_unit: int = 256  # registers are allocated per warp in units of this
    registers_per_block: int = 65536  # what one block's threads may hold together
    threads_per_block: int = 1024


TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        Target("sm_80", 80, "A100", 2048, 32, 65536, 167936, MAX_SHARED_PER_BLOCK["sm_80"]),
        Target("sm_86", 86, "A10, RTX 30xx", 1536, 16, 65536, 102400, MAX_SHARED_PER_BLOCK["sm_86"]),
        Target("sm_89", 89, "L4, L40, RTX 40xx", 1536, 24, 65536, 102400, MAX_SHARED_PER_BLOCK["sm_89"]),
        Target("sm_90", 90, "H100, H200", 2048, 32, 65536, 233472, MAX_SHARED_PER_BLOCK["sm_90"]),
    )
}
assert tuple(TARGETS) == GPU_TARGETS, "kernels.spec.GPU_TARGETS names the targets tabled here"


def target_name(capability: int) -> str:
    return f"sm_{capability}"


def parse_target(name: str) -> int:
    """'sm_90' → 90; any sm_NN Triton can build for is accepted, known or not."""
    match = re.fullmatch(r"sm_(\d{2,3})", name)
    if not match:
        raise ValueError(
            f"target={name!r}: expected sm_ followed by the compute capability, e.g. {', '.join(TARGETS)}"
        )
    return int(match.group(1))


def shared_memory_problem(target: Target | None, shared_bytes: int) -> str | None:
    """Why a block using ``shared_bytes`` cannot launch on the target (None if it can)."""
    if target is None or shared_bytes <= target.max_shared_per_block:
        return None
    return (
        f"out of resource: shared memory, required {shared_bytes:,} B per block, "
        f"{target.name} allows {target.max_shared_per_block:,} B"
    )


def register_problem(target: Target | None, registers: int, num_warps: int) -> str | None:
    """Why a block of ``num_warps`` warps using ``registers`` per thread cannot launch."""
    if target is None:
        return None
    threads = num_warps * 32
    if threads > target.threads_per_block:
        allowed = target.threads_per_block
        return f"out of resource: {threads} threads per block, {target.name} allows {allowed}"
    if registers * threads > target.registers_per_block:
        return (
            f"out of resource: registers, {registers} per thread × {threads} threads = "
            f"{registers * threads:,} per block, {target.name} allows {target.registers_per_block:,}"
        )
    return None


def occupancy(target: Target | None, registers: int, num_warps: int, shared_bytes: int) -> dict:
    """Resident blocks per SM and what limits them; nulls for a target without a table."""
    if target is None:
        return {"blocks_per_sm": None, "occupancy_limited_by": None, "warps_per_sm": None, "occupancy": None}
    threads = num_warps * 32
    regs_per_warp = math.ceil(max(registers, 1) * 32 / target.register_unit) * target.register_unit
    limits = {
        "threads": target.max_threads_per_sm // threads,
        "registers": target.registers_per_sm // (regs_per_warp * num_warps),
        "shared memory": target.shared_per_sm // (shared_bytes + target.reserved_shared_per_block),
        "blocks": target.max_blocks_per_sm,
    }
    if shared_bytes > target.max_shared_per_block:
        limits["shared memory"] = 0
    limited_by = min(limits, key=limits.get)
    blocks = limits[limited_by]
    warps = blocks * num_warps
    return {
        "blocks_per_sm": blocks,
        "occupancy_limited_by": limited_by,
        "warps_per_sm": warps,
        "occupancy": warps * 32 / target.max_threads_per_sm,
    }
