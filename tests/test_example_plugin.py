"""The shipped example plugin (examples/attnio-chunked) installed into a fresh environment and
put through a real study: found by its entry point alone, measured, and held against the model
(S and P chunk × T at once, the traffic of the materialized path)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from workflow_run import ROOT, checkout_copy, fresh_venv, snakemake

EXAMPLE = ROOT / "examples" / "attnio-chunked"
CHUNK = 128
TOKENS = [64, 1000]


def fresh_environment(where: Path) -> Path:
    """A new virtual environment that sees attnio's (this one's packages, through a .pth
    file) with the example installed into it, as a user would: pip, no index."""
    python = fresh_venv(where, own_pip=False)
    source = shutil.copytree(
        EXAMPLE, where.parent / "attnio-chunked", ignore=shutil.ignore_patterns("build", "*.egg-info")
    )
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            str(source),
        ],
        check=True,
    )
    return python


@pytest.fixture(scope="module")
def plugin_study(tmp_path_factory):
    """The example's two sizes beside torch_naive, float32, no mask, in a checkout copy, run
    with the fresh environment's python first on PATH and no plugins key: the entry point only."""
    base = tmp_path_factory.mktemp("plugin")
    python = fresh_environment(base / "env")
    workdir = checkout_copy(base / "checkout")
    config = workdir / "plugin.yaml"
    sweep = {"impls": ["torch_naive", f"torch_chunked_{CHUNK}", "torch_chunked_1024"], "tokens": TOKENS}
    config.write_text(
        yaml.safe_dump(
            {"device": "cpu", "sweep": sweep | {"head_dim": [16], "dtype": ["float32"], "causal": [False]}}
        )
    )
    environment = {k: v for k, v in os.environ.items() if k not in ("ATTNIO_INTERPRET", "ATTNIO_PLUGINS")}
    # its python first (rules call python), then the parent's scripts (papermill) it sees
    path = [str(python.parent), os.path.dirname(sys.executable), environment.get("PATH", "")]
    environment["PATH"] = os.pathsep.join(path)
    done = subprocess.run(
        [str(python), "-m", "snakemake", "--cores", "2", "--configfile", "config/config.yaml", str(config)],
        cwd=workdir,
        env=environment,
        capture_output=True,
        text=True,
        timeout=1200,  # a hang guard: alone it takes about 2 minutes
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return workdir


def test_the_example_passes_its_own_tests():
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(EXAMPLE / "tests")],
        cwd=EXAMPLE,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:]


def test_a_plugin_point_is_measured_like_ours(plugin_study):
    metrics = pd.read_csv(plugin_study / "results" / "metrics.csv")
    assert len(metrics) == 3 * len(TOKENS) and (metrics["status"] == "ok").all(), metrics["reason"]
    chunked = metrics[metrics["impl"] == f"torch_chunked_{CHUNK}"].set_index("tokens")
    assert (chunked["origin"] == "attnio_chunked").all() and (chunked["twin"] == "torch_naive").all()
    assert (chunked["time_ms"] > 0).all() and chunked["speedup_vs_materialized"].notna().all()
    assert (chunked["max_abs_error"] < 1e-5).all()
    verdicts = json.loads(
        next((plugin_study / "results" / "validate").glob(f"torch_chunked_{CHUNK}_*.json")).read_text()
    )
    assert verdicts and all(v["verdict"] == v["expected"] for v in verdicts)


def test_chunked_storage_and_traffic_against_the_model(plugin_study):
    """Peak memory of S and P ∝ chunk·T (T / chunk below torch_naive's), the same traffic."""
    metrics = pd.read_csv(plugin_study / "results" / "metrics.csv").set_index(["impl", "tokens"])
    T = max(TOKENS)
    chunked, naive = metrics.loc[(f"torch_chunked_{CHUNK}", T)], metrics.loc[("torch_naive", T)]
    assert chunked["bytes_S"] == chunked["bytes_P"] == CHUNK * T * 4
    assert naive["bytes_S"] == T * T * 4
    assert chunked["peak_alloc_bytes"] == pytest.approx(chunked["bytes_S"] + chunked["bytes_P"], rel=0.05)
    assert naive["peak_alloc_bytes"] / chunked["peak_alloc_bytes"] == pytest.approx(T / CHUNK, rel=0.05)
    assert chunked["traffic_compulsory_bytes"] == naive["traffic_compulsory_bytes"]
    short = metrics.loc[("torch_chunked_1024", T)]  # a chunk longer than T: the whole of S
    assert short["bytes_S"] == naive["bytes_S"]


def test_every_page_names_the_plugin(plugin_study):
    results = plugin_study / "results"
    index = (results / "index.html").read_text()
    assert f"torch_chunked_{CHUNK}" in index
    pages = sorted((results / "reports").glob("*.html"))
    assert pages
    named = [p.name for p in pages if f"torch_chunked_{CHUNK}" in p.read_text()]
    assert {"performance.html", "storage.html"} <= set(named), named


def test_a_broken_plugin_is_named_and_the_rest_runs(tmp_path):
    """A plugin module that fails to import: the plan warns naming it and why, leaves its
    implementation out and plans the rest."""
    (tmp_path / "broken_attention.py").write_text("raise ImportError('needs a library this machine lacks')\n")
    config = tmp_path / "broken.yaml"
    sweep = {
        "impls": ["torch_naive", "broken_kernel"],
        "tokens": [64],
        "head_dim": [16],
        "dtype": ["float32"],
    }
    config.write_text(yaml.safe_dump({"plugins": ["broken_attention"], "sweep": sweep}))
    from workflow_run import env

    environment = env() | {"PYTHONPATH": str(tmp_path)}
    done = snakemake(
        tmp_path,
        "-n",
        "--cores",
        "1",
        "--configfile",
        str(ROOT / "config" / "config.yaml"),
        str(config),
        environment=environment,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    said = done.stdout + done.stderr
    assert "plugin broken_attention: import failed: ImportError: needs a library this machine lacks" in said
    assert "impls broken_kernel left out" in said
    assert "torch_naive" in said
