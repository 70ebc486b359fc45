"""The plugin module docs/plugins.md shows (a PyTorch function and a Triton kernel), taken from
that page itself: it registers, validates against float64 and its Triton kernel moves the
bytes its own traffic model says, counted in the interpreter."""

import json
import os
import subprocess
import sys

import pandas as pd
import pytest
import yaml
from workflow_run import ROOT, checkout_copy, env, seed_ceilings, snakemake

FENCE = "```python\n# mypkg/attention.py\n"

COUNT = """
import json, torch, kernels
from kernels.catalog import get
from kernels.impl.inputs import make_qkv
from kernels.measure.traffic import count_traffic
from kernels.models.cost import summarize
from kernels.planning.point import Point
found = []
for T, causal, (bm, bn) in ((33, True, (16, 32)), (100, False, (32, 16))):
    q, k, v = make_qkv(2, 1, T, 16, torch.float16, "cpu", T)
    with count_traffic() as counter:
        kernels.attention(q, k, v, impl="my_flash", causal=causal, block_m=bm, block_n=bn)
    model = summarize(Point("my_flash", 2, 1, T, 16, "float16", causal, bm, bn))
    found.append({"counted": counter.total, "model": model["traffic_model_bytes"]})
print(json.dumps({"found": found, "origin": get("my_torch").origin}))
"""


def readme_plugin(folder) -> None:
    text = (ROOT / "docs" / "plugins.md").read_text()
    start = text.index(FENCE) + len("```python\n")
    package = folder / "mypkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "attention.py").write_text(text[start : text.index("```", start)])


def test_the_readme_plugin_validates_and_counts_as_modelled(tmp_path):
    readme_plugin(tmp_path)
    environment = env() | {
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]),
        "ATTNIO_PLUGINS": "mypkg.attention",
        "ATTNIO_INTERPRET": "1",
    }
    verdicts = tmp_path / "validate.json"
    flags = ["--device", "cpu", "--dtype", "float32", "float16", "--tokens", "1", "33", "100"]
    flags += ["--head-dim", "16", "--block-m", "16", "--block-n", "32", "--json", str(verdicts)]
    done = subprocess.run(
        [sys.executable, "-m", "kernels", "validate", "--impl", "my_torch", "my_flash", *flags],
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    results = json.loads(verdicts.read_text())
    assert {r["impl"] for r in results} == {"my_torch", "my_flash"}
    assert all(r["verdict"] == "pass" for r in results)
    counted = subprocess.run(
        [sys.executable, "-c", COUNT], env=environment, capture_output=True, text=True, timeout=600
    )
    assert counted.returncode == 0, counted.stderr[-2000:]
    report = json.loads(counted.stdout.strip().splitlines()[-1])
    assert report["origin"] == "mypkg.attention"
    assert all(f["counted"] == f["model"] and f["counted"] > 0 for f in report["found"]), report


@pytest.mark.integration
def test_the_readme_plugin_runs_a_forward_and_backward_study_as_modelled(tmp_path):
    """The page's module through the workflow with sweep.pass [forward, backward]: every
    kernel of its forward and of its backward counted to the byte of the models it registers,
    and what its forward keeps measured at its kept model. (Marked integration: a study of its
    own, about 40 s of a worker beside the suite's budget.)"""
    readme_plugin(tmp_path)
    workdir = checkout_copy(tmp_path / "checkout")
    seed_ceilings(workdir)
    settings = {
        "device": "cpu",
        "plugins": ["mypkg.attention"],
        "timing": {"cpu_seconds": 0.3, "stage_seconds": 0.1},
        "sweep": {
            "impls": ["my_flash"],
            "tokens": [33],
            "head_dim": [16],
            "dtype": ["float16"],
            "causal": [False, True],
            "blocks": [[16, 32]],
            "pass": ["forward", "backward"],
        },
    }
    (workdir / "mine.yaml").write_text(yaml.safe_dump(settings))
    environment = env() | {"PYTHONPATH": os.pathsep.join([str(tmp_path), str(workdir)])}
    targets = ["results/stages.csv", "results/backward_stages.csv", "results/backward.csv"]
    done = snakemake(
        workdir,
        *targets,
        "--cores",
        "2",
        "--configfile",
        "config/config.yaml",
        "mine.yaml",
        environment=environment,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for table in ("stages.csv", "backward_stages.csv"):
        rows = pd.read_csv(workdir / "results" / table)
        mine = rows[rows["impl"] == "my_flash"]
        assert (mine["counted_bytes"] == mine["model_bytes"]).all(), mine.to_string()
        modelled = mine[mine["model_bytes"] > 0]
        assert len(modelled) >= 8 and set(modelled["causal"]) == {False, True}, table
    backward = pd.read_csv(workdir / "results" / "backward.csv")
    assert len(backward) == 2 and (backward["status"] == "ok").all()
    assert (backward["saved_bytes"] == backward["saved_model_bytes"]).all(), backward.to_string()
