"""The wheels scripts/gpu_wheels.sh makes for an offline GPU machine are the versions tested
here, one wheel per package, a rerun leaves no other version behind, and they are all the rules
need beyond the GPU image: installed into an empty folder by the GPU scripts' own install step,
for a Python that has nothing but the image's packages, they run Snakemake (its SLURM plugin
loads), papermill (with the ipykernel kernel) and nbconvert's HTML export (its templates found
through JUPYTER_PATH).

The wheelhouse is made for this machine's Python (the GPU machine's, CPython 3.12, cannot run
here); the GPU target's resolution is checked alongside. Both need the package index; without
it the tests are skipped, saying so."""

import collections
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import urllib.request
from importlib import metadata
from pathlib import Path

import pytest
import tomllib
from workflow_run import ROOT

SCRIPT = ROOT / "scripts" / "gpu_wheels.sh"
GPU_PYTHON = "3.12"
ROOTS = ("snakemake", "snakemake-executor-plugin-slurm", "papermill", "nbconvert", "nbclient")
ROOTS += ("nbformat", "ipykernel")


pytestmark = pytest.mark.integration  # make integration, which CI runs after make test


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pipeline_pins() -> dict[str, str]:
    """pyproject.toml's exact pins in the pipeline extra: {name: version}."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        pipeline = tomllib.load(f)["project"]["optional-dependencies"]["pipeline"]
    found = (re.fullmatch(r"([A-Za-z0-9._-]+)\s*==\s*(\S+)", r) for r in pipeline)
    return {norm(m[1]): m[2] for m in found if m}


def image() -> list[str]:
    """The distributions the script leaves to the GPU image (its IMAGE default)."""
    return re.search(r'^IMAGE=\$\{IMAGE:-"([^"]+)"\}', SCRIPT.read_text(), re.M)[1].split()


def pins(requirements: str) -> dict[str, str]:
    return {norm(m[1]): m[2] for m in re.finditer(r"^([A-Za-z0-9][^=\s]*)==(\S+)", requirements, re.M)}


def unreachable() -> str | None:
    try:
        urllib.request.urlopen(
            urllib.request.Request("https://pypi.org/simple/pip/", method="HEAD"), timeout=15
        )
    except OSError as error:
        return f"PyPI cannot be reached ({error}): the wheels are made on a machine with internet"
    return None


def clean_env() -> dict:
    """This environment without its Python's folder on PATH or a PYTHONPATH."""
    own = os.path.dirname(sys.executable)
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != own)
    drop = ("ATTNIO_INTERPRET", "PYTHONPATH", "VIRTUAL_ENV", "JUPYTER_PATH", "PYTHONHOME")
    return {k: v for k, v in os.environ.items() if k not in drop} | {"PATH": path}


def gpu_wheels(*args: str, python: str) -> tuple[list[str], dict]:
    """The script's command line and environment, for the Python version python, with this
    environment as the tested one."""
    env = clean_env() | {"GPU_PYTHON": python, "TESTED_PYTHON": sys.executable}
    return [str(SCRIPT), *args], env


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """The wheelhouse for this Python, and the pinned set for the GPU machine's Python,
    resolved at the same time (both wait on the index more than on the CPU)."""
    reason = unreachable()
    if reason:
        pytest.skip(reason)
    where = tmp_path_factory.mktemp("wheels") / "whl"
    here = platform.python_version()
    command, env = gpu_wheels("--resolve", python=GPU_PYTHON)
    resolving = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    command, env = gpu_wheels(str(where), python=here)
    built = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    resolved, resolve_errors = resolving.communicate(timeout=600)
    assert built.returncode == 0, built.stderr[-4000:]
    assert resolving.returncode == 0, resolve_errors[-4000:]
    return where, resolved


def check_pinned(requirements: str):
    """The roots at the versions tested here: pyproject's pins, else what is installed."""
    found = pins(requirements)
    for name, version in pipeline_pins().items():
        if name in ROOTS:
            assert found[name] == version, (name, found[name], version)
    for name in ROOTS:
        assert found[name] == metadata.version(name), (name, found[name], metadata.version(name))
    assert not set(found) & {norm(n) for n in image()}, "an image package is shipped"
    assert found["snakemake"] == pipeline_pins()["snakemake"]


def test_the_gpu_machine_gets_the_versions_tested_here(made):
    _, resolved = made
    assert resolved.startswith(f"# for CPython {GPU_PYTHON}, x86_64-manylinux_2_28\n"), resolved[:200]
    check_pinned(resolved)
    assert len(re.findall(r"^[A-Za-z0-9]", resolved, re.M)) == len(pins(resolved)), "a package pinned twice"


def test_one_wheel_per_pinned_package(made):
    where, _ = made
    requirements = (where / "requirements.txt").read_text()
    check_pinned(requirements)
    wheels = sorted(where.glob("*.whl"))
    names = collections.Counter(norm(w.name.split("-")[0]) for w in wheels)
    assert not [n for n, c in names.items() if c > 1], "two wheels of one package"
    assert set(names) == set(pins(requirements))
    assert sorted(p.name for p in where.iterdir()) == sorted([*(w.name for w in wheels), "requirements.txt"])


def test_a_rerun_rebuilds_the_folder_clean(made, tmp_path):
    """Wheels of an earlier resolution do not survive a rerun; the wheels of this one are reused."""
    where, _ = made
    again = tmp_path / "whl"
    shutil.copytree(where, again)
    snakemake = next(again.glob("snakemake-[0-9]*.whl"))
    stale = again / snakemake.name.replace(snakemake.name.split("-")[1], "9.0.0")
    shutil.copy(snakemake, stale)
    command, env = gpu_wheels(str(again), python=platform.python_version())
    rerun = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert not stale.exists()
    assert sorted(p.name for p in again.iterdir()) == sorted(p.name for p in where.iterdir())
    assert f"({len(list(where.glob('*.whl')))} reused)" in rerun.stdout, rerun.stdout
    assert not list(tmp_path.glob("whl.*")), "a scratch folder was left beside the wheels"


def image_site(to: Path) -> Path:
    """The GPU image's packages as this environment has them, and its pip (the image's Python
    has one), nothing else: a folder of links to their files."""
    to.mkdir()
    for name in (*image(), "pip"):
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        for top in {Path(f).parts[0] for f in dist.files or ()} - {"..", "__pycache__"}:
            if not (to / top).exists():
                (to / top).symlink_to(dist.locate_file(top))
    return to


INSTALL = """
set -euo pipefail
source "$GPU_COMMON"
install_packages >&2
"$PYTHON" -c 'import json, os; print(json.dumps(dict(os.environ)))'
"""
CHECK = """
import importlib.metadata as metadata, json, os, sys
import ipykernel, nbclient, nbconvert, nbformat, papermill, snakemake, jupyter_core.paths
from snakemake_interface_executor_plugins.registry import ExecutorPluginRegistry
site = os.environ["SITE"]
outside = [m.__name__ for m in (ipykernel, nbclient, nbconvert, nbformat, papermill, snakemake)
           if not m.__file__.startswith(site)]
assert not outside, f"imported from elsewhere: {outside}"
assert os.path.join(site, "share", "jupyter") in jupyter_core.paths.jupyter_path()
ExecutorPluginRegistry().get_plugin("slurm")
print(json.dumps({n: metadata.version(n) for n in sys.argv[1:]}))
"""
SNAKEFILE = """
rule report:
    output:
        "page.html",
    shell:
        "papermill in.ipynb out.ipynb -k python3 "
        "&& jupyter nbconvert --to html --no-input --stdout out.ipynb > {output}"
"""
NOTEBOOK = {
    "cells": [
        {
            "cell_type": "code",
            "metadata": {},
            "source": "print(6 * 7)",
            "outputs": [],
            "execution_count": None,
        }
    ],
    "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    "nbformat": 4,
    "nbformat_minor": 5,
}


def test_the_wheels_run_the_rules_on_the_image_alone(made, tmp_path):
    """Installed by the GPU scripts' own install_packages (scripts/gpu_common.sh) into an
    empty folder, for a Python that has the image's packages only."""
    where, _ = made
    fresh = tmp_path / "gpu-python"
    # no pip of its own (ensurepip's install is the slow part of a venv): the image's, linked
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(fresh)], check=True, timeout=300)
    python = str(fresh / "bin" / "python")
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(purelib, "gpu-image.pth").write_text(f"{image_site(tmp_path / 'image')}\n")
    work = tmp_path / "work"
    work.mkdir()
    (work / ".whl").symlink_to(where)
    site = tmp_path / "site"
    common = ROOT / "scripts" / "gpu_common.sh"
    assert "install_packages()" in common.read_text(), "the GPU scripts install the wheels elsewhere now"
    given = clean_env() | {
        "GPU_COMMON": str(common),
        "PYTHON": python,
        "SITE": str(site),
        "SHIMS": str(fresh / "bin"),
    }
    installed = subprocess.run(
        ["bash", "-c", INSTALL], env=given, cwd=work, capture_output=True, text=True, timeout=600
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    assert site.is_dir() and sorted(p.name for p in site.glob("*.dist-info")), "nothing installed into SITE"
    env = json.loads(installed.stdout) | {"SITE": str(site)}
    assert env["JUPYTER_PATH"] == str(site / "share" / "jupyter")
    for tool in ("papermill", "jupyter", "snakemake"):
        assert shutil.which(tool, path=env["PATH"]) == str(site / "bin" / tool), tool

    checked = subprocess.run([python, "-c", CHECK, *ROOTS], env=env, cwd=work, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr[-3000:]
    versions = json.loads(checked.stdout)
    assert versions == {n: pins((where / "requirements.txt").read_text())[n] for n in ROOTS}
    assert versions["snakemake"] == pipeline_pins()["snakemake"]

    (work / "in.ipynb").write_text(json.dumps(NOTEBOOK))
    (work / "Snakefile").write_text(SNAKEFILE)
    ran = subprocess.run(
        [python, "-m", "snakemake", "--cores", "1", "page.html"],
        env=env,
        cwd=work,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    page = (work / "page.html").read_text()
    assert "<html" in page and "42" in page, page[:500]
