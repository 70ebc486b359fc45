"""The pages follow the tables they are given: rendered from records of the test's own (other
T, dtypes and head dim than any preset, and a failed point), the numbers in the index and in
the Storage page are the ones computed from those records here."""

import html
import json
import subprocess
import sys

import pandas as pd
import pytest
from workflow_run import ROOT, env

from kernels.io.tables import tables
from kernels.measure.run import measure
from kernels.measure.timing import Windows, windows
from kernels.planning.point import Point

MIB = 1 << 20
SHAPE = {"batch": 1, "heads": 1, "tokens": 80, "head_dim": 32, "dtype": "bfloat16", "mask": False}
POINTS = [
    Point("torch_naive", **SHAPE),
    Point("sdpa", **SHAPE),
    Point("triton_naive", **SHAPE, block_m=32, block_n=32),
    Point("triton_flash", **SHAPE, block_m=32, block_n=32),
    Point("triton_tile_softmax", **SHAPE, block_m=32, block_n=32),
    Point("torch_naive", 1, 1, 48, 32, "float16", False, inputs="large"),  # overflows: failed
]


@pytest.fixture(scope="module")
def metrics() -> pd.DataFrame:
    """The points measured once for the module; timed within the ci preset's windows (the
    pages need times, not stable ones)."""
    with windows(Windows(cpu_seconds=0.3, stage_seconds=0.1)):
        return tables([measure(point, "cpu", seed=5) for point in POINTS])[0]


def test_index_findings_and_every_point_follow_the_records(metrics):
    from reports.pages.common import number
    from reports.pages.index import render, validation_summary

    files = [
        {
            "impl": p.impl,
            **p.shape(),
            "inputs": p.inputs,
            "record": f"points/{p.name}.json",
            "log": f"logs/measure/{p.name}.log",
        }
        for p in POINTS
    ]
    provenance = {"device": "cpu", "cpu": "test CPU", "cpu_count": 2, "config": {"seed": 5}}
    page = html.unescape(
        render(provenance, metrics, validation_summary([]), {"traffic": "Traffic"}, pd.DataFrame(), files)
    )
    by = metrics.set_index(["impl", "inputs"])
    naive, fused = by.loc[("triton_naive", "normal")], by.loc[("triton_flash", "normal")]
    assert (
        f"the materialized kernels load and store {number(naive['traffic_model_bytes'] / MIB)} MiB, the "
        f"fused kernel {number(fused['traffic_model_bytes'] / MIB)} MiB" in page
    )
    tile = by.loc[("triton_tile_softmax", "normal")]
    assert f"off by up to {tile['max_abs_error']:.2g}" in page
    assert f"brings it to {fused['max_abs_error']:.1e}" in page
    assert f"S and P take {number(naive['bytes_S'] / MIB)} MiB each" in page
    assert page.count("<tr class=") == len(POINTS)
    failed = by.loc[("torch_naive", "large")]
    assert failed["status"] == "failed" and failed["reason"] in page
    assert "points/torch_naive/float16/B1-H1-T48-d32-full-na-large.json" in page
    assert page.index("<tr class='failed'>") < page.index("<tr class='ok'>")


def test_storage_page_says_what_the_records_measured(metrics, tmp_path):
    from kernels.io.computed_tables import write_table
    from kernels.models.model_tables import matrix_sizes

    metrics.to_parquet(tmp_path / "metrics.parquet", index=False)
    write_table(tmp_path / "sizes.csv", "matrix_sizes.csv", matrix_sizes())
    (tmp_path / "env.json").write_text(json.dumps({"device": "cpu", "cpu": "test CPU", "cpu_count": 2}))
    (tmp_path / "backward.csv").write_text("")  # no backward point
    out = tmp_path / "storage.ipynb"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "papermill",
            str(ROOT / "reports" / "storage.ipynb"),
            str(out),
            "-k",
            "python3",
            "-p",
            "metrics",
            str(tmp_path / "metrics.parquet"),
            "-p",
            "env",
            str(tmp_path / "env.json"),
            "-p",
            "sizes",
            str(tmp_path / "sizes.csv"),
            "-p",
            "backward",
            str(tmp_path / "backward.csv"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env(),
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    said = "".join(
        "".join(output.get("data", {}).get("text/markdown", ""))
        for cell in json.loads(out.read_text())["cells"]
        for output in cell.get("outputs", [])
    )
    naive = metrics[(metrics["impl"] == "torch_naive") & (metrics["inputs"] == "normal")].iloc[0]
    stored = naive["bytes_S"] + naive["bytes_P"]
    assert (
        f"**torch_naive** (bfloat16) sits {naive['peak_alloc_bytes'] / stored:.2f}× above the line at T = 80"
        in said
    )
    assert "**sdpa** (bfloat16) stores neither S nor P" in said


def _drawn(fig, kind: str) -> list[tuple[float, float]]:
    from reports.pages.figure_text import series

    return [xy for s in series(fig) if s.kind == kind for xy in zip(s.x, s.y, strict=True)]


def _has(drawn: list[tuple[float, float]], x: float, y: float) -> bool:
    return any(abs(a - x) <= 1e-9 * abs(x) and abs(b - y) <= 1e-9 * abs(y) for a, b in drawn)


def test_each_figure_draws_the_numbers_of_its_table(metrics):
    """Read back from what matplotlib drew: every point of the tables is where it belongs,
    the failed one is nowhere, and the image's alternative text gives the plotted ranges."""
    import matplotlib.pyplot as plt

    from kernels.models.prediction_tables import prediction_rows
    from kernels.planning.gpus import GPUS
    from reports.pages import performance, storage, traffic
    from reports.pages.figure_text import alt_text

    normal = metrics[(metrics["inputs"] == "normal") & (metrics["status"] == "ok")]
    failed = metrics[metrics["status"] == "failed"].iloc[0]

    peaks = storage.peak_figure(metrics)
    stored = normal[normal["bytes_S"] > 0]
    assert len(stored) == 2  # torch_naive and triton_naive
    for row in stored.itertuples():
        assert _has(_drawn(peaks, "points"), (row.bytes_S + row.bytes_P) / MIB, row.peak_alloc_bytes / MIB)
    assert len(_drawn(peaks, "points")) == len(stored)  # the failed point is not drawn
    described = alt_text(peaks)
    assert "y: peak allocated above inputs and output, MiB (log scale)" in described
    for row in stored.itertuples():
        assert f"({(row.bytes_S + row.bytes_P) / MIB:.3g}, {row.peak_alloc_bytes / MIB:.3g})" in described

    sweep = {**{k: [v] for k, v in SHAPE.items()}, "impls": ["triton_naive"], "blocks": [[32, 32]]}
    predictions = pd.DataFrame(prediction_rows(sweep, [], list(GPUS.values())[:1])[0])
    headline = traffic.headline_figure(predictions, metrics)
    for impl in ("triton_naive", "triton_flash"):
        counted = normal[normal["impl"] == impl].iloc[0]
        assert _has(_drawn(headline, "points"), 80, counted["traffic_counted_bytes"] / MIB)
    issued = predictions[(predictions["tokens"] == 80) & (predictions["path"] == "materialized")]
    assert _has(_drawn(headline, "line"), 80, issued["issued_bytes"].iloc[0] / MIB)

    times = performance.time_figure(metrics, "time_ms", "time per call, ms", "test CPU")
    timed = performance.timed(metrics)
    timed = timed[timed["inputs"] == "normal"]
    assert len(timed) >= 2
    for row in timed.itertuples():
        assert _has(_drawn(times, "line"), row.tokens, row.time_ms)
    assert not _has(_drawn(times, "line"), failed["tokens"], failed["time_ms"])
    plt.close("all")


def test_roofline_places_each_timed_point_under_the_bound_that_applies(metrics):
    """With ceilings whose ridge falls between the two timed paths' intensities, the lower
    one is memory-bound and judged against copy bandwidth, the higher compute-bound."""
    from reports.pages import performance

    timed = performance.timed(metrics)
    timed = timed[timed["inputs"] == "normal"].set_index("impl")
    low, high = sorted(timed["intensity_flop_per_byte"])
    ridge = (low * high) ** 0.5
    found = {
        "copy_gbps": 10.0,
        "matmul_tflops": ridge * 10.0 / 1e3,
        "device_name": "test",
        "matmul_dtype": "float32",
    }
    table = performance.roofline(metrics, found).set_index("impl")
    for impl, row in table.iterrows():
        memory = row["intensity_flop_per_byte"] < ridge
        assert row["bound"] == ("memory" if memory else "compute")
        roof = row["intensity_flop_per_byte"] * 10e9 if memory else ridge * 10e9
        assert row["fraction_of_bound"] == pytest.approx(timed.loc[impl, "tflops"] * 1e12 / roof)
    assert set(table["bound"]) == {"memory", "compute"}
    fig = performance.roofline_figure(table.reset_index(), found)
    for _, row in table.iterrows():
        assert _has(_drawn(fig, "points"), row["intensity_flop_per_byte"], row["tflops"] * 1e3)
    assert "memory-bound" in performance.roofline_summary(table.reset_index(), found)


def test_fused_kernel_is_held_against_the_fastest_sdpa_backend(metrics):
    """Per shape, the fastest SDPA path wins the row; the fused kernel's column stays empty
    where it was not timed (the interpreter), and is the ratio where it was."""
    from reports.pages import performance

    table = performance.against_best_sdpa(metrics)
    assert len(table) == 1  # the test's one timed shape (bf16, T = 80)
    row = table.iloc[0]
    sdpa = metrics[(metrics["impl"] == "sdpa") & (metrics["inputs"] == "normal")].iloc[0]
    assert row["fastest_sdpa"] == "sdpa" and row["sdpa_ms"] == sdpa["time_ms"]
    assert pd.isna(row["triton_flash_ms"]) and pd.isna(row["speedup_of_triton_flash"])
    timed_fused = metrics.copy()
    fused = (timed_fused["impl"] == "triton_flash") & (timed_fused["inputs"] == "normal")
    timed_fused.loc[fused, "time_ms"] = sdpa["time_ms"] / 2  # as a GPU run would fill it
    row = performance.against_best_sdpa(timed_fused).iloc[0]
    assert row["speedup_of_triton_flash"] == pytest.approx(2.0)
