"""The workflow without the shared study: an interrupted run resumes, a bad configuration is
refused before any job, the rules lint clean, a large sweep plans quickly, and the conda
environment pins what the project pins. (Its own file, so that a second test worker runs it
beside the study.)"""

import json
import os
import re
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from workflow_run import ROOT, seed_ceilings, snakemake, start

from kernels.io.records import validate_record

DEFAULT = str(ROOT / "config" / "config.yaml")
CI = str(ROOT / "config" / "presets" / "ci.yaml")


def test_interrupted_run_resumes(tmp_path):
    """Interrupt a run midway: the next run finishes the rest, and every record is whole.
    Slow by nature: two real runs, each starting its warm workers (torch imported twice)."""
    small = tmp_path / "small.yaml"
    # no build targets and two torch paths (no interpreted Triton validation), timed in the
    # shortest windows: this test is about interruption, and one core compiling, interpreting
    # or timing would only slow it
    small.write_text(
        yaml.safe_dump(
            {
                "build": {"targets": []},
                "timing": {"cpu_seconds": 0.02, "stage_seconds": 0.01},
                "sweep": {"impls": ["sdpa", "torch_naive"], "tokens": [40], "head_dim": [16]},
            }
        )
    )
    seed_ceilings(tmp_path)  # the ceilings job is no part of this question (a minute of it)
    # the four points' records (gathering and collecting them: the shared study's tests)
    records = [
        f"results/points/{impl}/float16/B1-H1-T40-d16-{mask}-na-normal.json"
        for impl in ("sdpa", "torch_naive")
        for mask in ("causal", "full")
    ]
    args = ["--cores", "1", *records, "--configfile", DEFAULT, CI, str(small)]
    run = start(tmp_path, *args)
    points = tmp_path / "results" / "points"
    deadline = time.time() + 120
    while time.time() < deadline and len(list(points.rglob("*.json"))) < 2:
        time.sleep(0.2)
    os.killpg(run.pid, signal.SIGINT)  # what Ctrl-C in a terminal sends
    run.wait()
    assert not all((tmp_path / record).exists() for record in records), "interrupted too late"
    resumed = snakemake(tmp_path, *args)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    # the rest only: at least two of the four points were done before the interruption (one
    # of them may have been cut short after writing its record, and is measured again)
    again = re.search(r"^measure\s+(\d+)$", resumed.stdout + resumed.stderr, re.M)
    assert again and int(again.group(1)) < 4, resumed.stdout + resumed.stderr[-2000:]
    for record in records:
        found = json.loads((tmp_path / record).read_text())
        validate_record(found)
        assert found["status"] == "ok", found["reason"]
    assert not list((tmp_path / "results").rglob("*.tmp"))


BAD = [
    ({"sweep": {"tokens": [0, 64]}}, "tokens"),
    ({"sweep": {"dtype": ["float8"]}}, "dtype"),
    ({"sweep": {"impls": ["Flash-9"]}}, "impls"),
    ({"sweep": {"impls": ["x" * 300]}}, "impls"),  # a name is part of file names: at most 64
    ({"sweep": {"head_dim": [48]}}, "head_dim"),
    ({"sweep": {"tokens": "many"}}, "tokens"),
    ({"sweep": {"tokenz": [64]}}, "tokenz"),
    ({"device": "tpu"}, "device"),
]


@pytest.mark.parametrize("override, key", BAD)
def test_the_schema_refuses_a_bad_value_naming_its_key(override, key):
    """Each bad value against the schema, merged over the defaults as Snakemake merges a
    --configfile (the workflow's own refusal of them: the test below)."""
    from snakemake.utils import update_config
    from snakemake.utils import validate as validate_config

    config = yaml.safe_load(Path(DEFAULT).read_text())
    update_config(config, override)
    with pytest.raises(Exception, match="Error validating config file") as raised:
        validate_config(config, str(ROOT / "workflow" / "schemas" / "config.schema.yaml"))
    assert key in str(raised.value)


# a bad value in a grid of the sweep and one at the top: the workflow validates the whole
# merged configuration before it plans (the schema's refusal of each value: the test above)
@pytest.mark.parametrize("override, key", [BAD[0], BAD[-1]])
def test_bad_config_is_refused_before_any_job(tmp_path, override, key):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(override))
    done = snakemake(tmp_path, "--cores", "1", "--configfile", DEFAULT, str(bad))
    assert done.returncode != 0
    assert "Error validating config file" in done.stderr
    assert key in done.stderr
    assert not (tmp_path / "results").exists()


def test_unregistered_implementation_is_refused_before_any_job(tmp_path):
    """A well-formed name nobody registered passes the schema and is refused at planning,
    naming it and the registered ones."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"sweep": {"impls": ["flash9", "torch_naive"]}}))
    done = snakemake(tmp_path, "--cores", "1", "--configfile", DEFAULT, str(bad))
    assert done.returncode != 0
    assert "impls flash9 not registered" in done.stderr
    assert "triton_s_only" in done.stderr  # the registered names are listed
    assert not (tmp_path / "results").exists()


def test_lint_is_clean(tmp_path):
    done = snakemake(tmp_path, "--lint", "--configfile", DEFAULT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "good condition" in done.stdout + done.stderr


def test_dry_run_of_3000_points_is_quick(tmp_path):
    """A sweep of 3000 points plans within a bound. Slow by nature: the plan must be large for
    a step that grows with the square of the points to show."""
    big = {
        "sweep": {
            "batch": [1, 2, 4, 8, 16],
            "heads": [1, 2, 4, 8, 16],
            "tokens": [64, 100, 256, 1024, 8192],
            "head_dim": [64, 128],
            "causal": [True, False],
        }
    }
    config = tmp_path / "big.yaml"
    config.write_text(yaml.safe_dump(big))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    # the plan's table of jobs only (--quiet rules): not megabytes of the jobs listed one by one
    done = snakemake(tmp_path, "-n", "--quiet", "rules", "--cores", "1", "--configfile", DEFAULT, str(config))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert done.returncode == 0, done.stderr[-2000:]
    assert re.search(r"^measure\s+3000$", done.stdout, re.M)
    # Processor time, not wall time: the suite runs beside other tests on two cores. A guard
    # against a planning step that grows out of bounds, not a speed claim: alone, this dry run
    # takes about 11 s of processor time on the 2-core development machine (6000 points took
    # 21 s); the bound is five times that, which a step costing 5 µs for each of the 9 million
    # pairs of points would break. Snakemake's own work per job is most of it (a profile at
    # 6000 points: our planning code about 5 %, inspect.signature on the rules' functions 12 %).
    assert (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime) < 55


def test_conda_env_pins_agree_with_the_project():
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = project["dependencies"] + project["optional-dependencies"]["pipeline"]
    wanted = {re.split(r"[=<>;\s]", p)[0]: p.split(";")[0].strip() for p in pins}
    for env_file in (ROOT / "envs").glob("*.yaml"):
        env = yaml.safe_load(env_file.read_text())
        pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
        for requirement in pip:
            name = re.split(r"[=<>\s]", requirement)[0]
            if name in wanted:
                assert requirement == wanted[name], f"{env_file.name}: {requirement} vs {wanted[name]}"
        assert "torch==2.13.0" in pip and "triton==3.7.1" in pip


def test_a_stale_lock_goes_and_a_live_one_stays(tmp_path):
    """What `make reproduce` runs first: a lock whose Snakemake was killed with -9 is removed;
    the lock of a Snakemake still running in the folder is not."""
    small = tmp_path / "small.yaml"
    small.write_text(yaml.safe_dump({"build": {"targets": []}, "sweep": {"impls": ["sdpa"], "tokens": [16]}}))
    unlock = [sys.executable, str(ROOT / "workflow" / "scripts" / "unlock_if_stale.py"), str(tmp_path)]
    run = start(tmp_path, "--cores", "1", "collect", "--configfile", DEFAULT, CI, str(small))
    locks = tmp_path / ".snakemake" / "locks"
    deadline = time.time() + 120
    while time.time() < deadline and not (locks.is_dir() and any(locks.iterdir())):
        time.sleep(0.1)
    assert any(locks.iterdir()), "the run never took its lock"
    live = subprocess.run(unlock, capture_output=True, text=True, timeout=60)
    assert "its lock stays" in live.stdout and any(locks.iterdir())
    os.killpg(run.pid, signal.SIGKILL)  # no chance to clean up
    run.wait()
    assert any(locks.iterdir())
    quick = ["--cores", "1", "results/env.json", "--configfile", DEFAULT, CI, str(small)]  # a real run locks
    blocked = snakemake(tmp_path, *quick)
    assert blocked.returncode != 0 and "cannot be locked" in blocked.stderr
    stale = subprocess.run(unlock, capture_output=True, text=True, timeout=60)
    assert "removed a stale Snakemake lock" in stale.stdout and not any(locks.iterdir())
    again = snakemake(tmp_path, *quick)
    assert again.returncode == 0, again.stderr[-2000:]


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("", "is empty: it must hold a mapping of settings"),
        ("- device: cpu\n", "holds a list, not a mapping of settings"),
        ("sweep: [1,\n", "is not YAML: "),
    ],
)
def test_a_broken_config_file_is_refused_by_name(tmp_path, content, said):
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.yaml").write_text(content)
    done = snakemake(tmp_path, "-n", "--cores", "1")
    assert done.returncode != 0
    assert f"config file config/config.yaml {said}" in done.stdout + done.stderr
