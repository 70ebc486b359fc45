"""How long would each backward take on each target, and from which T does recomputing P win?

The backward on every target, from the models: each kernel of each backward point on the
GPUs of kernels.planning.gpus and on this machine (its measured ceilings) through the
hierarchical roofline (kernels.models.hierarchy), where storing P and recomputing it cross
over in T, and what each path keeps at a training shape the configuration names.

Three tables under results/model/ (the ``backward_model`` rule):
- backward_predictions.csv: a row per backward point, target and kernel — its bytes (T×T
  hand-off and the rest), FLOPs, exponentials, and its time warm (a band: the caches serve
  the hand-off as far as it fits, optimistic to pessimistic) and cold (DRAM only), with what
  bounds each;
- recompute_crossing.csv: for each target and backward shape of the sweep (d, dtype, causal,
  blocks), the materialized backward (triton_naive: P kept, dP and dS through memory) against
  the fused one (triton_flash: P recomputed twice, nothing T×T in memory) over T from 128 to
  65,536, and the shortest T from which the fused one is never slower (its extra products
  cost less than the materialized one's T×T traffic), or none within the range;
- training_memory.csv: per path at the training shape, what one layer keeps for its backward
  (B·H heads) and all layers together, beside each GPU's memory, and the backward's T×T
  traffic and predicted time per layer on each target.
Pure Python (no torch): the workflow computes them on any machine.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from functools import cache

from kernels import catalog, masks
from kernels.io.computed_tables import write_table
from kernels.models.backward_cost import as_issued_backward, executed_flops_backward, kept_bytes
from kernels.models.backward_stage_cost import BACKWARD_HANDOFF, backward_kernel_costs
from kernels.models.hierarchy import Machine
from kernels.models.stage_predictions import CASES, key_of, machines, predicted_row
from kernels.planning.gpus import GPUS
from kernels.planning.point import Point
from kernels.planning.sweep import points as sweep_points

MS = 1e3
CROSSING_TOKENS = tuple(2**i for i in range(7, 17))  # 128 … 65,536


@cache
def kernel_costs(point: Point) -> tuple:
    """The point's backward kernels' costs, once per point (the fused paths' models walk
    every tile pair: about a second at T = 65,536)."""
    return tuple(backward_kernel_costs(point))


def kernel_times(point: Point, machine: Machine) -> list[dict]:
    """Each kernel of the point's backward on one machine: its cost and, per case, the time
    and what bounds it."""
    rows = [predicted_row(cost, point, machine) for cost in kernel_costs(point)]
    return [{"kernel" if k == "stage" else k: v for k, v in row.items()} for row in rows]


def backward_ms(point: Point, machine: Machine, case: str) -> float:
    """The backward's predicted time: its kernels one after another."""
    return sum(row[f"predicted_{case}_ms"] for row in kernel_times(point, machine))


def backward_points(sweep: dict | list[dict]) -> list[Point]:
    return [p for p in sweep_points(sweep) if p.backward and backward_kernel_costs(p)]


def prediction_rows(sweep: dict | list[dict], targets: Iterable[Machine]) -> list[dict]:
    targets = list(targets)
    return [
        key_of(point) | row
        for point in backward_points(sweep)
        for machine in targets
        for row in kernel_times(point, machine)
    ]


def crossed() -> tuple[str, str]:
    """The two designs the crossing compares: S and P stored (the materialized backward) and
    nothing T×T stored (the fused one), our Triton path of each."""
    return catalog.triton_path("SP"), catalog.triton_path("none")


def training_paths() -> tuple[str, ...]:
    """Our paths that model what they keep for the backward, the PyTorch ones first, then by
    what they store (S and P, S, nothing)."""
    ours = [e for e in catalog.registered().values() if e.ours and e.kept_model is not None]
    ours.sort(key=lambda e: (e.triton, catalog.STORES.index(e.stores)))
    return tuple(e.name for e in ours)


def crossing_shapes(sweep: dict | list[dict], training: dict) -> list[tuple]:
    """(d, dtype, causal, block_m, block_n) of every backward point of a Triton path, and of
    the training shape at the default blocks: the shapes the crossing is drawn for."""
    found = [
        (p.head_dim, p.dtype, p.causal, p.block_m, p.block_n)
        for p in backward_points(sweep)
        if p.triton and not masks.beyond_causal(p.mask_kind)  # the crossing compares causal and full
    ]
    model = training_point(training, catalog.triton_path("SP"))
    found.append((model.head_dim, model.dtype, model.causal, model.block_m, model.block_n))
    return list(dict.fromkeys(found))


def crossing(stored: list[float], recomputed: list[float], tokens: Iterable[int]) -> int | None:
    """The shortest T from which the recomputing backward is never slower, or None."""
    found = None
    for t, s, r in zip(tokens, stored, recomputed, strict=True):
        found = (found or t) if r <= s else None
    return found


def crossing_rows(shapes: list[tuple], targets: Iterable[Machine]) -> list[dict]:
    rows = []
    for machine in targets:
        for d, dtype, causal, bm, bn in shapes:
            for case, _, _ in CASES:
                curve = []
                for t in CROSSING_TOKENS:
                    pair = [
                        Point(impl, 1, 1, t, d, dtype, causal, bm, bn, direction="backward")
                        for impl in crossed()
                    ]
                    curve.append((t, *pair))
                stored = [backward_ms(s, machine, case) for _, s, _ in curve]
                recomputed = [backward_ms(r, machine, case) for _, _, r in curve]
                cross = crossing(stored, recomputed, CROSSING_TOKENS)
                for (t, s, r), s_ms, r_ms in zip(curve, stored, recomputed, strict=True):
                    rows.append(
                        {
                            "target": machine.name,
                            "head_dim": d,
                            "dtype": dtype,
                            "causal": causal,
                            "block_m": bm,
                            "block_n": bn,
                            "tokens": t,
                            "case": case,
                            "stored_ms": s_ms,
                            "recomputed_ms": r_ms,
                            "stored_flops": sum(c.flops for c in kernel_costs(s)),
                            "recomputed_flops": sum(c.flops for c in kernel_costs(r)),
                            "stored_bytes": sum(c.bytes for c in kernel_costs(s)),
                            "recomputed_bytes": sum(c.bytes for c in kernel_costs(r)),
                            "crossing_tokens": cross,
                        }
                    )
    return rows


def training_point(training: dict, impl: str) -> Point:
    return Point(
        impl,
        training["batch"],
        training["heads"],
        training["tokens"],
        training["head_dim"],
        training["dtype"],
        training["causal"],
        direction="backward",
    )


def _matrix(moved: dict[tuple, int]) -> int:
    return sum(n for key, n in moved.items() if key[-2] in BACKWARD_HANDOFF)


def training_rows(training: dict, targets: Iterable[Machine]) -> list[dict]:
    """Per path and target: kept bytes per layer and for the whole model, the backward's
    bytes (its T×T part) and FLOPs per layer, and its predicted time per layer."""
    memory = {gpu.name: gpu.memory_bytes for gpu in GPUS.values()}
    rows = []
    for impl in training_paths():
        point = training_point(training, impl)
        kept = kept_bytes(point) or {}
        issued = as_issued_backward(point) or {}
        matrix_kept = sum(n for name, n in kept.items() if name in ("P", "P float32", "S", "mask"))
        for machine in targets:
            rows.append(
                {
                    "impl": impl,
                    "target": machine.name,
                    **{
                        k: training[k]
                        for k in ("batch", "heads", "tokens", "head_dim", "dtype", "causal", "layers")
                    },
                    "kept_layer_bytes": sum(kept.values()),
                    "kept_matrix_layer_bytes": matrix_kept,
                    "kept_model_bytes": sum(kept.values()) * training["layers"],
                    "memory_bytes": memory.get(machine.name),
                    "backward_layer_bytes": sum(issued.values()) if issued else None,
                    "backward_matrix_layer_bytes": _matrix(issued) if issued else None,
                    "backward_layer_flops": executed_flops_backward(point),
                    "predicted_warm_low_layer_ms": backward_ms(point, machine, "warm_low"),
                    "predicted_cold_layer_ms": backward_ms(point, machine, "cold"),
                }
            )
    return rows


def write(
    sweep: dict | list[dict],
    training: dict,
    ceilings: dict | None,
    predictions: str | os.PathLike,
    crossings: str | os.PathLike,
    memory: str | os.PathLike,
) -> str | None:
    """The three tables, atomically; why this machine is left out of them (or None)."""
    targets, left_out = machines(ceilings)
    write_table(predictions, "backward_predictions.csv", prediction_rows(sweep, targets))
    write_table(crossings, "recompute_crossing.csv", crossing_rows(crossing_shapes(sweep, training), targets))
    write_table(memory, "training_memory.csv", training_rows(training, targets))
    return left_out
