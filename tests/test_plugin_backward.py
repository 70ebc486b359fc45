"""A plugin's backward, honest where its models are missing: a PyTorch path with a backward
module of its own works (it has no block shape), and a backward whose path registers no
traffic or FLOPs model is measured, counted and shown as having none, not as a model of 0
bytes or the convention's FLOPs. The plugins are written here and measured in a child
process, as a user's would be."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import matplotlib
import pandas as pd
import pytest
from workflow_run import ROOT, env

from kernels.io.tables import write_tables
from reports.pages import training

matplotlib.use("Agg")

# A PyTorch path with a backward module (P kept) and no model of what it keeps, moves or
# executes
TORCH_BACKWARD = """
import torch

from kernels.catalog import implementation

SAVED = ("P",)


def forward_saving(q, k, v, causal, block_m, block_n):
    assert block_m is None and block_n is None  # a PyTorch path has no block shape
    s = (q.float() @ k.float().transpose(-1, -2)) / q.shape[-1] ** 0.5
    if causal:
        future = torch.ones(s.shape[-2:], dtype=torch.bool, device=q.device).triu(1)
        s = s.masked_fill(future, float("-inf"))
    p = s.softmax(-1)
    return (p @ v.float()).to(q.dtype), (p,)


def backward(do, q, k, v, saved, causal, block_m, block_n):
    (p,) = saved
    do = do.float()
    dp = do @ v.float().transpose(-1, -2)
    ds = p * (dp - (p * dp).sum(-1, keepdim=True)) / q.shape[-1] ** 0.5
    dq, dk, dv = ds @ k.float(), ds.transpose(-1, -2) @ q.float(), p.transpose(-1, -2) @ do
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


@implementation("pb_torch", stores="none", twin="torch_naive", backward="pb_torch")
def pb_torch(q, k, v, *, causal):
    return forward_saving(q, k, v, causal, None, None)[0]
"""

MEASURE = """
import json
from kernels.measure.run import measure
from kernels.measure.timing import Windows, windows
from kernels.planning.point import Point

found = []
with windows(Windows(cpu_seconds=0.3, stage_seconds=0.1)):
    for impl, blocks in (("pb_torch", (None, None)), ("pb_flash", (16, 32))):
        point = Point(impl, 1, 1, 40, 16, "float16", True, *blocks, direction="backward")
        found.append(measure(point, "cpu", seed=0))
print("RESULT " + json.dumps(found))
"""


def plugin_folder(folder: Path) -> Path:
    """pb_torch, and pb_flash: docs/plugins.md's Triton path with its backward module but
    without its backward traffic and FLOPs models."""
    (folder / "pb_torch.py").write_text(TORCH_BACKWARD)
    text = (ROOT / "docs" / "plugins.md").read_text()
    start = text.index("```python\n# mypkg/attention.py\n") + len("```python\n")
    source = text[start : text.index("```", start)]
    for model in ("backward_traffic_model", "backward_flops_model"):
        line = next(line for line in source.splitlines(keepends=True) if f"    {model}=" in line)
        source = source.replace(line, "")
    source = source.replace("mypkg.attention", "pb_flash").replace('"my_flash"', '"pb_flash"')
    (folder / "pb_flash.py").write_text(source.replace("def my_flash(", "def pb_flash("))
    return folder


def child_env(folder: Path) -> dict:
    return env() | {
        "PYTHONPATH": os.pathsep.join([str(folder), str(ROOT)]),
        "ATTNIO_PLUGINS": "pb_torch,pb_flash",
        "ATTNIO_INTERPRET": "1",
    }


@pytest.fixture(scope="module")
def records(tmp_path_factory) -> dict[str, dict]:
    folder = plugin_folder(tmp_path_factory.mktemp("plugins"))
    done = subprocess.run(
        [sys.executable, "-c", MEASURE],
        env=child_env(folder),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))
    return {record["impl"]: record for record in json.loads(line.removeprefix("RESULT "))}


def test_a_torch_plugins_own_backward_validates(tmp_path):
    """Every backward case of the validator, through the plugin's autograd Function (before:
    KeyError 'block_m' in each)."""
    folder = plugin_folder(tmp_path)
    verdicts = tmp_path / "verdicts.json"
    flags = ["--device", "cpu", "--dtype", "float32", "--tokens", "33", "--head-dim", "16"]
    done = subprocess.run(
        [sys.executable, "-m", "kernels", "validate", "--impl", "pb_torch", *flags, "--backward"]
        + ["--json", str(verdicts)],
        env=child_env(folder),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    backward = [r for r in json.loads(verdicts.read_text()) if r["direction"] == "backward"]
    assert backward and all(r["verdict"] == "pass" and r["as_expected"] for r in backward), backward


def test_a_backward_without_models_is_measured_with_none(records):
    for impl, record in records.items():
        assert record["status"] == "ok", record["reason"]
        assert record["flops"] is None and record["intensity_flop_per_byte"] is None, impl
        assert record["convention_flops"] > 0 and record["traffic_model_bytes"] is None
    assert records["pb_torch"]["saved_model_bytes"] is None  # pb_flash keeps docs' kept model
    assert records["pb_torch"]["time_ms"] > 0  # timed; its GFLOP/s cannot be, without FLOPs
    counted = records["pb_flash"]["stages"]
    assert records["pb_flash"]["traffic_counted_bytes"] > 0
    # a kernel the interpreter counted is not claimed to be modelled at 0 bytes
    assert all(s["model_bytes"] is None for s in counted), counted


def test_the_training_page_says_which_models_are_missing(records, tmp_path):
    paths = [tmp_path / f for f in ("m.parquet", "m.csv", "s.csv", "t.csv")]
    backward = tuple(tmp_path / f for f in ("b.csv", "bs.csv", "bt.csv"))
    write_tables(list(records.values()), *paths, backward=backward)
    points, stages = pd.read_csv(backward[0]), pd.read_csv(backward[1])
    kept = training.kept_table(points).set_index("impl")["measured = model"]
    assert kept["pb_torch"] == training.NO_MODEL and kept["pb_flash"] is True
    traffic = training.traffic_table(stages)
    assert list(traffic["counted = model"]) == [training.NO_MODEL] and traffic["model, MiB"].isna().all()
    said = training.traffic_finding(stages)
    assert said.startswith("No counted backward here has a traffic model (pb_flash") and " 0 of" not in said
    products = training.products_table(points)
    assert products["executed GFLOP"].isna().all() and (products["convention GFLOP"] > 0).all()
    said = training.products_finding(points)
    assert "pb_flash and pb_torch: no backward FLOPs model" in said and said.endswith(".")
    assert training.time_table(points)["backward GFLOP/s"].isna().all()


def test_the_crossing_figures_legend_is_in_words():
    crossing = pd.DataFrame(
        [
            {
                "target": "H100",
                "head_dim": 64,
                "case": case,
                "tokens": t,
                "stored_ms": 2.0,
                "recomputed_ms": 1.0,
            }
            for case in training.CASE_WORDS
            for t in (128, 256)
        ]
    )
    figure = training.crossing_figure(crossing)
    legend = [text.get_text() for text in figure.axes[0].get_legend().get_texts()]
    assert training.CASE_WORDS["warm_low"] in legend and training.CASE_WORDS["cold"] in legend
    assert not set(training.CASE_WORDS) & set(legend)
