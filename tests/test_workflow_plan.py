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
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


@pytest.mark.integration  # make integration (CI): a workflow of its own, interrupted and resumed
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


def merged(override: dict) -> dict:
    """The default configuration with ``override`` merged over it, as Snakemake merges a
    --configfile."""
    from snakemake.utils import update_config

    config = yaml.safe_load(Path(DEFAULT).read_text())
    update_config(config, override)
    return config


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
def test_a_bad_value_is_refused_in_one_line_naming_its_key(override, key):
    """Each value the schema refuses, merged over the defaults: the workflow's refusal
    (workflow/rules/config_refusal.py, before Snakemake's validation) is one line naming the
    key and what it takes."""
    from config_refusal import refusal

    schema = yaml.safe_load(SCHEMA.read_text())
    said = refusal(merged(override), schema)
    assert said.startswith("config: ") and "\n" not in said and key in said
    assert "; it takes " in said or "; its keys are " in said  # what is allowed there
    assert refusal(merged({}), schema) is None


def test_a_refusal_names_the_grid_by_its_index_and_what_the_key_takes():
    from config_refusal import refusal

    schema = yaml.safe_load(SCHEMA.read_text())
    grids = lambda second: {"sweep": [{"tokens": [64]}, second]}  # noqa: E731
    grid = "config: sweep grid 1: "
    expected = {
        "tokens": f"{grid}tokens[0] = 0 is not allowed; it takes an integer ≥ 1, ≤ 16,777,216",
        "dtype": f"{grid}dtype[0] = 'float8' is not allowed; it takes one of float32, float16, bfloat16",
        "blocks": f"{grid}blocks[0] = [64] is not allowed ([64] is too short); it takes a list of 2 values, "
        "each one of 16, 32, 64, 128, 256",
        "kv_heads": f"{grid}kv_heads[0] = 0 is not allowed; it takes an integer ≥ 1, ≤ 65,535 or null",
        "tokenz": "config: sweep grid 1 has no key tokenz; its keys are impls, batch,",
    }
    bad = {"tokens": [0], "dtype": ["float8"], "blocks": [[64]], "kv_heads": [0], "tokenz": [64]}
    for key, said in expected.items():
        assert refusal(merged(grids({key: bad[key]})), schema).startswith(said)
    one = refusal(merged({"sweep": {"tokens": [0]}}), schema)  # a sweep of one grid: no index
    assert one.startswith("config: sweep.tokens[0] = 0 is not allowed")


def test_a_grid_the_planner_refuses_is_named_by_its_index_in_the_configuration():
    """kv_heads that do not divide heads pass the schema and are refused at planning, naming
    the grid as the configuration counts it (a grid following the cache before it is split
    per dtype when resolved) and the field."""
    from snakemake.utils import validate as with_defaults

    from kernels.planning.sweep import planned

    config = merged({"sweep": [{"impls": ["sdpa"], "tokens": [64]}, {"heads": [8], "kv_heads": [3]}]})
    with_defaults(config, str(SCHEMA))  # as the Snakefile does before it plans
    with pytest.raises(ValueError, match=r"^sweep grid 1: kv_heads=3: must divide heads=8"):
        planned(config["sweep"], None)
    spans = {"from": 1, "to": 2, "fills": "kv"}
    across = {"impls": ["sdpa"], "tokens_across_cache": spans, "heads": [8], "dtype": ["float32", "float16"]}
    config = merged({"sweep": [across, {"query_tokens": [300], "tokens": [256]}]})
    with_defaults(config, str(SCHEMA))
    with pytest.raises(ValueError, match=r"^sweep grid 1: query_tokens=300: at most tokens=256"):
        planned(config["sweep"], 1 << 20)


# a bad value in a grid of the sweep (the schema's refusal) and one the planner refuses: the
# workflow refuses both before any job, in one line naming the grid (a dry run: nothing runs)
@pytest.mark.parametrize(
    "second, said",
    [
        ({"tokens": [0]}, "config: sweep grid 1: tokens[0] = 0 is not allowed; it takes an integer ≥ 1"),
        ({"heads": [8], "kv_heads": [3]}, "config: sweep grid 1: kv_heads=3: must divide heads=8"),
    ],
)
def test_bad_config_is_refused_before_any_job(tmp_path, second, said):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        yaml.safe_dump({"sweep": [{"impls": ["sdpa"], "tokens": [64]}, {"impls": ["sdpa"], **second}]})
    )
    done = snakemake(tmp_path, "-n", "--cores", "1", "--configfile", DEFAULT, str(bad))
    printed = done.stdout + done.stderr
    assert done.returncode != 0
    assert said in printed
    assert "Traceback" not in printed and "kernels/planning" not in printed  # no Python stack
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


@pytest.mark.integration  # make integration (CI): a dry run of 3,000 points, 12-17 s
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


@pytest.mark.integration  # make integration (CI): workflows of its own, 10 s
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
