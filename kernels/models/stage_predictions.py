"""How long would each stage of a staged point take on each target?

Per-stage predictions of the materialized paths (kernels.models.hierarchy) for every staged
point of a sweep, on each GPU of kernels.planning.gpus and on the machine the ceilings were
measured on: the table results/model/stage_predictions.csv (the ``predict_stages`` rule) and
the ``predict --stages`` command's rows.

Warm: the stage runs right after the one before it, so its hand-off may still sit in a cache:
a band from the optimistic end (low) to the pessimistic end (high). Cold: the caches were
emptied just before it. The predicted times are roofline lower bounds; the expected ones
(torch_naive on this machine, where the ceilings hold the operations' rates) the fixed cost
of each call plus its data at the operations' measured rates (kernels.models.expected). All
in milliseconds.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from kernels.io.computed_tables import write_table
from kernels.io.tables import POINT_KEY
from kernels.models import expected, hierarchy, predict
from kernels.models.hierarchy import Machine
from kernels.models.stages import stage_costs, stage_names
from kernels.planning.gpus import GPUS
from kernels.planning.point import Point
from kernels.planning.sweep import points as sweep_points

KEY = tuple(name for name in POINT_KEY if name != "device")  # the measured tables' key, per target


def key_of(point: Point) -> dict:
    """A point's KEY columns, the inference dimensions as numbers (T and H where it leaves
    them out), as the measured tables have them."""
    shape = point.shape()
    return {name: shape[name] if name in shape else getattr(point, name) for name in KEY}


MS = 1e3


def gpu_machines(names: Iterable[str] = GPUS) -> list[Machine]:
    return [hierarchy.from_gpu(GPUS[name]) for name in names]


def machines(ceilings: dict | None) -> tuple[list[Machine], str | None]:
    """The GPUs, and this machine where its ceilings hold every rate; otherwise the reason it
    is left out (a cuda run without a GPU measures nothing)."""
    found = gpu_machines()
    if ceilings is None:
        return found, "no ceilings given"
    try:
        return [*found, hierarchy.from_ceilings(ceilings)], None
    except ValueError as err:
        return found, str(err)


# the cases every prediction is given in: warm (optimistic and pessimistic) and cold
CASES = (("warm_low", True, False), ("warm_high", False, False), ("cold", True, True))


def predicted_row(cost, point: Point, machine: Machine) -> dict:
    """One stage's (or kernel's) cost on one machine and, per case, its time and what bounds
    it: the part of a row the forward's stages and the backward's kernels share."""
    ends = {
        case: hierarchy.stage_time(cost, machine, point=point, optimistic=optimistic, cold=cold)
        for case, optimistic, cold in CASES
    }
    return (
        {
            "target": machine.name,
            "stage": cost.stage,
            "does": cost.does,
            "bytes": cost.bytes,
            "handoff_bytes": cost.handoff_bytes,
            "footprint_bytes": cost.footprint_bytes,
            "flops": cost.flops,
            "exps": cost.exps,
        }
        | {f"predicted_{case}_ms": found["time_s"] * MS for case, found in ends.items()}
        | {f"bound_{case}": found["bound"] for case, found in ends.items()}
    )


def stage_rows(point: Point, machine: Machine) -> list[dict]:
    """Each stage of one point on one machine, as table rows."""
    return [
        key_of(point)
        | predicted_row(stage, point, machine)
        | {"largest_cache_bytes": machine.largest_cache_bytes}
        | expected_columns(stage, point, machine)
        for stage in stage_costs(point)
    ]


def expected_columns(stage, point: Point, machine: Machine) -> dict:
    """The expected warm and cold time and the fixed cost in them (kernels.models.expected),
    for a PyTorch path's stages on a machine whose ceilings hold the operations' rates; blank
    otherwise (the GPUs' published figures have no operation rates; the Triton paths on a
    CPU run in the interpreter, never timed)."""
    blank = {"expected_warm_ms": None, "expected_cold_ms": None, "expected_fixed_ms": None}
    if machine.ops is None or point.triton:
        return blank
    warm = expected.stage_expected(stage, point, machine.ops)
    cold = expected.stage_expected(stage, point, machine.ops, cold=True)
    if warm is None or cold is None:
        return blank
    return {
        "expected_warm_ms": warm["time_s"] * MS,
        "expected_cold_ms": cold["time_s"] * MS,
        "expected_fixed_ms": warm["fixed_s"] * MS,
    }


def prediction_rows(sweep: dict | list[dict], targets: Iterable[Machine]) -> list[dict]:
    """Every staged forward point of the sweep on every target (the backward's stages are
    kernels.models.backward_predictions')."""
    staged = [p for p in sweep_points(sweep) if stage_names(p) and not p.backward]
    targets = list(targets)
    return [row for point in staged for machine in targets for row in stage_rows(point, machine)]


def assumptions(sweep: dict | list[dict], ceilings: dict | None) -> list[str]:
    """Where this machine's prediction for the sweep's staged dtypes rests on an assumed
    product rate (kernels.models.hierarchy.Machine.product_assumption): one line each."""
    dtypes = dict.fromkeys(p.dtype for p in sweep_points(sweep) if stage_names(p) and not p.backward)
    return [note for m in machines(ceilings)[0] for d in dtypes if (note := m.product_assumption(d))]


def write(sweep: dict | list[dict], ceilings: dict | None, out: str | os.PathLike) -> tuple[int, str | None]:
    """The table, atomically; the number of rows and why this machine has none (or None)."""
    targets, left_out = machines(ceilings)
    rows = prediction_rows(sweep, targets)
    write_table(out, "stage_predictions.csv", rows)
    return len(rows), left_out


def _band(low: float, high: float, digits: int = 1) -> str:
    a, b = f"{low:,.{digits}f}", f"{high:,.{digits}f}"
    return a if a == b else f"{a}–{b}"


def format_rows(rows: list[dict]) -> str:
    """A small table for the terminal: sizes in MiB, times in µs, every figure a prediction."""
    mib, us = float(1 << 20), 1e3  # ms → µs
    header = (
        "target",
        "T",
        "stage",
        "MiB",
        "footprint MiB",
        "cache MiB",
        "warm µs",
        "bound",
        "cold µs",
        "bound",
    )
    lines = [header]
    for r in rows:
        bounds = dict.fromkeys((r["bound_warm_low"], r["bound_warm_high"]))
        cache = r["largest_cache_bytes"]
        lines.append(
            (
                r["target"],
                f"{r['tokens']:,}",
                r["stage"],
                f"{r['bytes'] / mib:,.1f}",
                f"{r['footprint_bytes'] / mib:,.1f}",
                "–" if cache is None else f"{cache / mib:,.1f}",
                _band(r["predicted_warm_low_ms"] * us, r["predicted_warm_high_ms"] * us),
                "–".join(bounds),
                f"{r['predicted_cold_ms'] * us:,.1f}",
                r["bound_cold"],
            )
        )
    text = predict.aligned(lines)
    first = rows[0] if rows else {}
    note = (
        f"Predicted, not measured: {first.get('impl')} B={first.get('batch')} H={first.get('heads')} "
        f"d={first.get('head_dim')} {first.get('dtype')} causal={first.get('causal')}. Each stage takes "
        "the longest of its cache levels', DRAM's, its products' and its exponentials' times "
        "(kernels.models.hierarchy); warm runs from every cache serving the share of the hand-off "
        "that fits to serving only what fits in half of it; cold starts with the caches empty."
    )
    return "\n".join(text + ["", note])
