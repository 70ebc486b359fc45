"""The shipped example plugin (examples/attnio-chunked) installed into a fresh environment and
put through a real study: found by its entry point alone, measured, and held against the model
(S and P chunk × T at once, the traffic of the materialized path)."""

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from modelled_study import write_index
from page_renderer import TEMPLATES
from workflow_run import ROOT, checkout_copy, env, fresh_venv, seed_ceilings, snakemake

EXAMPLE = ROOT / "examples" / "attnio-chunked"
CHUNK = 128
T = 1000  # past one chunk of 128 rows (8 chunks, the last short) and under one of 1024
# the page whose HTML the workflow itself renders here (papermill, then nbconvert, in the
# plugin's environment, which borrows its packages: reports.pages.publish must find
# nbconvert's templates there); every page is also rendered in one IPython shell below
PUBLISHED = ("performance",)


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


def page_inputs() -> set[str]:
    """Every file a report page reads: the defaults of each template's parameters cell (as
    the workflow's report rule reads them)."""
    found = set()
    for template in TEMPLATES:
        cells = json.loads(template.read_text())["cells"]
        cell = next(c for c in cells if "parameters" in c["metadata"].get("tags", []))
        body = ast.parse("".join(cell["source"])).body
        found |= {ast.literal_eval(a.value) for a in body if isinstance(a, ast.Assign)}
    return found


def plugin_environment(python: Path) -> dict:
    """The environment a user of the fresh environment runs in: its python first (rules call
    python), then the parent's scripts (papermill) it sees; no plugins named."""
    environment = {k: v for k, v in os.environ.items() if k not in ("ATTNIO_INTERPRET", "ATTNIO_PLUGINS")}
    path = [str(python.parent), os.path.dirname(sys.executable), environment.get("PATH", "")]
    return environment | {"PATH": os.pathsep.join(path)}


def render_every_page(python: Path, workdir: Path) -> dict:
    """Every report template run on the study's results in one IPython shell of the fresh
    environment (tests/page_renderer.py as a script, the suite's renderer): page ->
    its outputs and the error that stopped it. A papermill kernel per page would cost about
    seven CPU-seconds each; what a page makes of a plugin's points is the question here."""
    done = subprocess.run(
        [str(python), str(workdir / "tests" / "page_renderer.py"), str(workdir)],
        env=plugin_environment(python) | {"PYTHONPATH": str(workdir), "MPLBACKEND": "Agg"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((workdir / "rendered.json").read_text())


@pytest.fixture(scope="module")
def plugin_study(tmp_path_factory):
    """The example's two sizes beside torch_naive at one length, float32, no mask, in a
    checkout copy, run with the fresh environment's python first on PATH and no plugins key:
    the entry point only. Snakemake makes every table the pages read and publishes one page;
    the ceilings are seeded (no question here is about them) and the timing is the ci
    preset's (what is asked of a time is that there is one)."""
    base = tmp_path_factory.mktemp("plugin")
    python = fresh_environment(base / "env")
    workdir = checkout_copy(base / "checkout")
    seed_ceilings(workdir)
    config = workdir / "plugin.yaml"
    sweep = {"impls": ["torch_naive", f"torch_chunked_{CHUNK}", "torch_chunked_1024"], "tokens": [T]}
    settings = {"device": "cpu", "timing": {"cpu_seconds": 0.3, "stage_seconds": 0.1}}
    settings["sweep"] = sweep | {"head_dim": [16], "dtype": ["float32"], "causal": [False]}
    config.write_text(yaml.safe_dump(settings))
    pages = [f"results/reports/{name}.html" for name in PUBLISHED]
    targets = sorted(page_inputs()) + ["results/metrics.csv", *pages]
    configs = ["--configfile", "config/config.yaml", str(config)]
    done = subprocess.run(
        [str(python), "-m", "snakemake", *targets, "--cores", "2", *configs],
        cwd=workdir,
        env=plugin_environment(python),
        capture_output=True,
        text=True,
        timeout=900,  # a hang guard: alone it takes under a minute
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return workdir, render_every_page(python, workdir)


@pytest.mark.integration  # make integration (CI): the example's own suite, 15-25 s
def test_the_example_passes_its_own_tests():
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(EXAMPLE / "tests")],
        cwd=EXAMPLE,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:]


@pytest.mark.integration  # make integration (CI): a fresh environment and a workflow of its own, 40 s
def test_a_plugin_point_is_measured_like_ours(plugin_study):
    workdir, _ = plugin_study
    metrics = pd.read_csv(workdir / "results" / "metrics.csv")
    assert len(metrics) == 3 and (metrics["status"] == "ok").all(), metrics["reason"]
    chunked = metrics[metrics["impl"] == f"torch_chunked_{CHUNK}"].set_index("tokens")
    assert (chunked["origin"] == "attnio_chunked").all() and (chunked["twin"] == "torch_naive").all()
    assert (chunked["time_ms"] > 0).all() and chunked["speedup_vs_materialized"].notna().all()
    assert (chunked["max_abs_error"] < 1e-5).all()
    verdicts = json.loads(
        next((workdir / "results" / "validate").glob(f"torch_chunked_{CHUNK}_*.json")).read_text()
    )
    assert verdicts and all(v["verdict"] == v["expected"] for v in verdicts)


@pytest.mark.integration  # make integration (CI): reads that workflow
def test_chunked_storage_and_traffic_against_the_model(plugin_study):
    """Peak memory of S and P ∝ chunk·T (T / chunk below torch_naive's), the same traffic."""
    workdir, _ = plugin_study
    metrics = pd.read_csv(workdir / "results" / "metrics.csv").set_index(["impl", "tokens"])
    chunked, naive = metrics.loc[(f"torch_chunked_{CHUNK}", T)], metrics.loc[("torch_naive", T)]
    assert chunked["bytes_S"] == chunked["bytes_P"] == CHUNK * T * 4
    assert naive["bytes_S"] == T * T * 4
    assert chunked["peak_alloc_bytes"] == pytest.approx(chunked["bytes_S"] + chunked["bytes_P"], rel=0.05)
    assert naive["peak_alloc_bytes"] / chunked["peak_alloc_bytes"] == pytest.approx(T / CHUNK, rel=0.05)
    assert chunked["traffic_compulsory_bytes"] == naive["traffic_compulsory_bytes"]
    short = metrics.loc[("torch_chunked_1024", T)]  # a chunk longer than T: the whole of S
    assert short["bytes_S"] == naive["bytes_S"]


@pytest.mark.integration  # make integration (CI): reads that workflow
def test_every_page_renders_the_plugins_points_and_the_index_names_it(plugin_study):
    """No page fails on a plugin's points; the published Performance page, the Performance
    and Storage pages as the suite's renderer ran them, and the index (written by the index
    page's code from the study's results) name it."""
    workdir, rendered = plugin_study
    name = f"torch_chunked_{CHUNK}"
    assert set(rendered) == {t.stem for t in TEMPLATES}
    failed = {page: result["error"] for page, result in rendered.items() if result["error"]}
    assert not failed, failed
    results = workdir / "results"
    for page in PUBLISHED:
        assert name in (results / "reports" / f"{page}.html").read_text(), page
    for page in ("performance", "storage"):
        assert name in json.dumps(rendered[page]["outputs"]), page
    index = write_index(results, TEMPLATES)
    assert f"<tr class='ok'><td>{name}</td>" in index  # its point listed, not only its name
    assert index.count("<tr class=") == 3


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
