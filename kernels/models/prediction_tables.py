"""What would each GPU do with this sweep's shapes?

The predictions' tables for the "Predicted on GPUs" report, written into results/model/ by
the ``predict`` rule: the GPU figures used, both paths per shape of the sweep over a grid of
T on every GPU, and each kernel's bytes, FLOPs and bound.

A shape is a sweep point without its T and implementation: B, H, d, dtype, mask and the
Triton blocks (64 × 64 for the torch paths, which have none). Where the build stage found
that a kernel of a path does not build for a GPU's target at one of the sweep's T, that path
gets no prediction on that GPU, only the reason (a variant's resources do not depend on T).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import asdict, replace
from pathlib import Path

from kernels import catalog, masks
from kernels.io.computed_tables import write_table
from kernels.models import predict
from kernels.models.cost import transfers
from kernels.planning.gpus import GPUS, Gpu
from kernels.planning.launch import build_failure
from kernels.planning.point import Point
from kernels.planning.sweep import points as sweep_points

GRID_TOKENS = tuple(2**k for k in range(8, 18))  # 256 … 131,072


def square_points(sweep: dict | list[dict]) -> list[Point]:
    """The sweep's points of the square problem: what these tables predict (the inference
    cases have their own, kernels.models.decode)."""
    return [p for p in sweep_points(sweep) if p.square]


def shapes(sweep: dict | list[dict]) -> dict[tuple, Point]:
    """Each shape of the sweep once, as its materialized Triton point, with the sweep's T."""
    found: dict[tuple, Point] = {}
    for p in square_points(sweep):
        shape = replace(p, impl=catalog.triton_path("SP"), inputs="normal")
        key = (
            shape.batch,
            shape.heads,
            shape.head_dim,
            shape.dtype,
            shape.mask,
            shape.block_m,
            shape.block_n,
        )
        found.setdefault(key, shape)
    return found


def shape_label(point: Point) -> str:
    mask = masks.file_form(point.mask_kind)
    return (
        f"B{point.batch}-H{point.heads}-d{point.head_dim}-{point.dtype}-{mask}-"
        f"bm{point.block_m}-bn{point.block_n}"
    )


def launch_reasons(sweep: dict | list[dict], builds: list[dict]) -> dict[tuple[str, str, str], str]:
    """(shape, path, target) → why that path's kernels do not build there."""
    reasons: dict[tuple[str, str, str], str] = {}
    points = square_points(sweep)
    plugins = predict.predicted_plugins(points)
    for p in points:
        for path, point in predict.path_points(p, plugins).items():
            mine = [result for result in builds if point.name in result["points"]]
            for target in {t for result in mine for t in result["targets"]}:
                key = (shape_label(replace(point, impl=catalog.triton_path("SP"))), path, target)
                reason = build_failure(point.name, mine, [target])
                if reason and key not in reasons:
                    reasons[key] = f"does not build for {target} at T={point.tokens}: {reason}"
    return reasons


def prediction_rows(sweep: dict | list[dict], builds: list[dict], gpus: Iterable[Gpu]) -> tuple[list, list]:
    reasons = launch_reasons(sweep, builds)
    plugins = predict.predicted_plugins(square_points(sweep))
    swept = {}
    for p in square_points(sweep):
        shape = replace(p, impl=catalog.triton_path("SP"), inputs="normal")
        swept.setdefault(shape_label(shape), set()).add(p.tokens)
    rows, kernel_rows = [], []
    for shape in shapes(sweep).values():
        label = shape_label(shape)
        for tokens in sorted(set(GRID_TOKENS) | swept.get(label, set())):
            if shape.mask_kind.refusal(tokens):
                continue  # documents whose lengths sum to another T, a prefix past T
            sized = replace(shape, tokens=tokens)
            moves = {}  # each point's transfers, the same on every GPU: computed once
            for gpu in gpus:
                for path, point in predict.path_points(sized, plugins).items():
                    base = {
                        "shape": label,
                        "gpu": gpu.name,
                        "target": gpu.target,
                        "path": path,
                        "impl": point.impl,
                        **point.shape(),
                        "in_sweep": tokens in swept.get(label, set()),
                    }
                    reason = reasons.get((label, path, gpu.target))
                    if reason:
                        rows.append(base | {"launch_reason": reason})
                        continue
                    if point not in moves:
                        moves[point] = transfers(point)
                    found = predict.kernels(point, gpu, moves[point])
                    summary = predict.predict(point, gpu, found, moves[point])
                    rows.append(
                        base | {k: v for k, v in summary.items() if k not in base} | {"launch_reason": None}
                    )
                    kernel_rows += [base | asdict(k) for k in found]
    return rows, kernel_rows


def gpu_rows() -> list[dict]:
    return [
        {
            "gpu": g.name,
            "model": g.model,
            "memory_bytes": g.memory_bytes,
            "target": g.target,
            "hbm_bytes_per_s": g.hbm_bytes_per_s,
            "l2_bytes": g.l2_bytes,
            "sms": g.sms,
            "fp32_flops": g.fp32_flops,
            **{f"tensor_flops_{dtype}": rate for dtype, rate in g.tensor_flops.items()},
            "resident_share": predict.RESIDENT_SHARE,
        }
        for g in GPUS.values()
    ]


def write(
    sweep: dict | list[dict],
    build_paths: Iterable[str | os.PathLike],
    gpus_csv: str | os.PathLike,
    predictions_csv: str | os.PathLike,
    kernels_csv: str | os.PathLike,
) -> int:
    builds = [json.loads(Path(path).read_text()) for path in build_paths]
    rows, kernel_rows = prediction_rows(sweep, builds, GPUS.values())
    write_table(gpus_csv, "gpus.csv", gpu_rows())
    write_table(predictions_csv, "predictions.csv", rows)  # no row where no square point
    write_table(kernels_csv, "predicted_kernels.csv", kernel_rows)
    return len(rows)
