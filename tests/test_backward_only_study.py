"""A study the schema accepts whose points are all backward ones, run by the real workflow:
its forward tables are empty but whole, every page renders and says, where a section has
nothing to show, where the study's points are, the run line counts every point, and the
index lists them. (A real Snakemake run of two points: marked integration, `make integration`.)"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
import yaml
from workflow_run import ROOT, snakemake

pytestmark = pytest.mark.integration

REPORTS = sorted(path.stem for path in (ROOT / "reports").glob("*.ipynb"))
NOTHING = "**Nothing to show here:**"
SWEEP = {
    "impls": ["torch_naive", "triton_flash"],
    "tokens": [48],
    "head_dim": [16],
    "dtype": ["float16"],
    "causal": [True],
    "blocks": [[16, 32]],
    "pass": ["backward"],
}


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> Path:
    workdir = tmp_path_factory.mktemp("backward_only")
    config = {
        "device": "cpu",
        "build": {"candidates": False, "targets": ["sm_90"]},
        "timing": {"cpu_seconds": 0.3, "stage_seconds": 0.1},
        "sweep": [SWEEP],
    }
    (workdir / "study.yaml").write_text(yaml.safe_dump(config))
    done = snakemake(workdir, "--cores", "2", "--configfile", "study.yaml", timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    return workdir / "results"


def markdown(results: Path, report: str) -> list[str]:
    """The markdown a page's executed notebook showed."""
    cells = json.loads((results / "reports" / f"{report}.ipynb").read_text())["cells"]
    outputs = [o for cell in cells for o in cell.get("outputs", [])]
    return ["".join(o["data"]["text/markdown"]) for o in outputs if "text/markdown" in o.get("data", {})]


def test_the_forward_tables_are_empty_but_have_their_columns(study):
    metrics = pd.read_parquet(study / "metrics.parquet")
    assert metrics.empty and {"impl", "status", "time_ms", "traffic_model_bytes", "triton"} <= set(metrics)
    for name in ("metrics.csv", "stages.csv", "stage_times.csv"):
        assert pd.read_csv(study / name).empty
    assert "model_bytes" in pd.read_csv(study / "stages.csv").columns
    backward = pd.read_csv(study / "backward.csv")
    assert sorted(backward["impl"]) == ["torch_naive", "triton_flash"] and set(backward["status"]) == {"ok"}


@pytest.mark.parametrize("report", REPORTS)
def test_every_page_renders_counting_every_point_and_saying_where_they_are(study, report):
    assert (study / "reports" / f"{report}.html").exists()
    shown = markdown(study, report)
    run = [text for text in shown if text.startswith("**Run:**")]
    assert len(run) == 1 and "2 points (0 forward, 2 backward): 2 ok." in run[0], run
    for sentence in (text for text in shown if text.startswith(NOTHING)):
        assert re.fullmatch(rf"{re.escape(NOTHING)} this section would show [^;]+; .+\.", sentence, re.S)
        # a section that finds no point says which (forward) or where the points are
        if re.search(r"has no (\w+ )?point\b(?! with| of a| at| whose)", sentence):
            assert "backward" in sentence or "forward" in sentence, sentence


def test_the_index_lists_both_points_and_every_page(study):
    index = (study / "index.html").read_text()
    assert index.count("<tr class=") == 2
    for report in REPORTS:
        assert f"reports/{report}.html" in index
