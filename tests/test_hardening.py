"""Results readable by whoever the umask allows, and a file argument that names a folder
refused before any work (build's targets and blocks: test_build.py)."""

import json
import os
import re
import stat
import subprocess
import sys

import pytest
from workflow_run import env

from kernels.io.atomic import write_text_atomic


def test_a_write_cut_short_leaves_a_temporary_the_next_write_removes(tmp_path):
    """A process killed between the temporary and the rename (kill -9, a warm worker ended
    with its job) leaves ".NAME.XXXXXXXX.tmp"; the next write of NAME removes it, and no
    other file's temporary (its seal's, a longer name's)."""
    left = tmp_path / ".verdicts.json.hxvgnnfz.tmp"
    others = [tmp_path / ".verdicts.json.seal.json.a1b2c3d4.tmp", tmp_path / ".verdicts.json2.a1b2c3d4.tmp"]
    for path in (left, *others):
        path.write_text("{")
    write_text_atomic(tmp_path / "verdicts.json", "[]")
    assert not left.exists() and all(path.exists() for path in others)
    assert (tmp_path / "verdicts.json").read_text() == "[]"


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600)])
def test_atomic_writes_get_the_umask_permissions(tmp_path, umask, mode):
    before = os.umask(umask)
    try:
        write_text_atomic(tmp_path / "table.csv", "a,b\n")
    finally:
        os.umask(before)
    assert stat.S_IMODE((tmp_path / "table.csv").stat().st_mode) == mode


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kernels", *args], capture_output=True, text=True, timeout=120, env=env()
    )


POINT = ["--impl", "sdpa", "--tokens", "16", "--head-dim", "16", "--dtype", "float32", "--device", "cpu"]


@pytest.mark.parametrize(
    "command",
    [
        ["measure", *POINT],
        ["validate", "--device", "cpu", "--impl", "sdpa", "--json"],
        ["tile-errors", "--device", "cpu"],
        ["ceilings", "--device", "cpu"],
    ],
)
def test_an_output_that_names_a_folder_is_refused_before_any_work(tmp_path, command):
    flag = [] if command[-1] == "--json" else ["--out"]
    done = cli(*command, *flag, str(tmp_path))
    assert done.returncode == 2
    assert f"{tmp_path} is a folder; name a file in it" in done.stderr
    blocked = tmp_path / "file"
    blocked.write_text("")
    done = cli(*command, *flag, str(blocked / "x.json"))
    assert done.returncode == 2 and f"{blocked} is a file, not a folder" in done.stderr


# --- damaged records ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def record_text() -> str:
    from kernels.measure.run import measure
    from kernels.planning.point import Point

    return json.dumps(measure(Point("sdpa", 1, 1, 32, 16, "float32", True), "cpu"), indent=1)


DAMAGE = {
    "truncated": (lambda text: text[: len(text) // 2], "is not valid JSON (cut short?)"),
    "empty": (lambda text: "", "is empty"),
    "not JSON": (lambda text: "time_ms: 3\n", "is not valid JSON"),
    "NaN": (lambda text: text.replace('"max_abs_error": ', '"max_abs_error": NaN, "x": '), "NaN"),
    "a list": (lambda text: f"[{text}]", "holds a JSON list, not an object"),
    "off the schema": (
        lambda text: text.replace('"status": "ok"', '"status": "fine"'),
        "field status: 'fine' is not one of",
    ),
}


@pytest.mark.parametrize("kind", DAMAGE)
def test_a_damaged_record_is_named_with_the_reason_and_nothing_is_written(tmp_path, kind, record_text):
    from kernels.io.records import DamagedRecordError
    from kernels.io.tables import gather

    damage, reason = DAMAGE[kind]
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(record_text)
    bad.write_text(damage(record_text))
    with pytest.raises(DamagedRecordError) as raised:
        gather([good, bad], tmp_path / "gathered.jsonl")
    assert str(raised.value).startswith(f"{bad}: ") and reason in str(raised.value)
    assert not (tmp_path / "gathered.jsonl").exists()


def test_a_damaged_gathered_line_is_named_by_file_and_line(tmp_path, record_text):
    from kernels.io.records import DamagedRecordError
    from kernels.io.tables import read_gathered

    line = json.dumps(json.loads(record_text))
    gathered = tmp_path / "g.jsonl"
    gathered.write_text(f"{line}\n{line[:40]}\n")
    with pytest.raises(DamagedRecordError, match=f"{gathered}, line 2: "):
        read_gathered([gathered])


def test_a_script_error_lands_in_its_log_and_still_reaches_the_console(tmp_path):
    from kernels.io.script_log import logged_to

    log = tmp_path / "rule.log"
    console = sys.stdout, sys.stderr
    with pytest.raises(ValueError, match="results/x.json: is empty"), logged_to(log):
        print("started")
        raise ValueError("results/x.json: is empty")
    assert (sys.stdout, sys.stderr) == console
    text = log.read_text()
    assert text.startswith("started\n") and "Traceback" in text
    assert text.rstrip().endswith("error: results/x.json: is empty")


# --- the workflow catalog's usage file ---------------------------------------------------------


def test_the_catalog_file_states_the_usage_and_deployment_the_readme_gives():
    import yaml
    from workflow_run import ROOT

    usage = yaml.safe_load((ROOT / ".snakemake-workflow-catalog.yml").read_text())["usage"]
    assert set(usage) == {"mandatory-flags", "software-stack-deployment"}
    assert set(usage["mandatory-flags"]) == {"desc", "flags"}
    assert usage["software-stack-deployment"] == {
        "conda": True,  # every rule names envs/attnio.yaml
        "apptainer": False,
        "apptainer+conda": False,
        "report": True,
    }
    readme = (ROOT / "README.md").read_text()
    for said in ("make reproduce", "make test", "snakemake --cores all", "--report results/report.zip"):
        assert said in readme
    assert "profiles/slurm" in (ROOT / "docs" / "slurm.md").read_text()
    desc = usage["mandatory-flags"]["desc"]
    for said in ("make reproduce", "config/presets/", "profiles/slurm", "profiles/default"):
        assert said in desc
    # every rule that runs something names the rules' environment
    text = "".join(path.read_text() for path in (ROOT / "workflow" / "rules").glob("*.smk"))
    for rule in text.split("\nrule ")[1:]:
        if re.search(r"^    (shell|script|run):", rule, re.M):
            assert '    conda:\n        "../../envs/attnio.yaml"' in rule, rule.split(":")[0]


def test_a_record_out_of_room_names_the_file_and_the_bytes(tmp_path):
    """A measure command whose record finds no room (results/ a full tmpfs of the test's
    own, tests/full_disk.py) says so with the path and the bytes it needed, exits non-zero
    and leaves no temporary file and no record."""
    from full_disk import no_room

    (tmp_path / "work" / "results").mkdir(parents=True)
    record = "results/points/sdpa/float32/B1-H1-T100-d16-causal-na-normal.json"
    point = ["--impl", "sdpa", "--tokens", "100", "--head-dim", "16", "--dtype", "float32", "--causal"]
    run = [sys.executable, "-m", "kernels", "measure", *point, "--cpu-seconds", "0.02"]  # no time asked
    found = no_room(tmp_path / "work", tmp_path, [*run, "--device", "cpu", "--out", record], "--once")
    said = found["full"]["output"]
    assert found["full"]["returncode"] == 1, said[-2000:]
    room = rf"no space left on device writing {record}: needed [\d,]+ bytes, [\d,]+ bytes free"
    assert re.search(room, said), said[-2000:]
    assert found["leftovers_when_full"] == []
    assert record.removeprefix("results/") not in found["files_when_full"]


def test_a_limit_that_passes_before_the_command_can_record_still_ends_it(tmp_path):
    """A plugin that hangs while it is imported stops validate before it knows its cases: the
    limit still ends the process, non-zero, saying so (no verdicts to write), instead of
    leaving it running past its limit."""
    (tmp_path / "hangs_at_import.py").write_text("import time\ntime.sleep(600)\n")
    environment = env() | {"PYTHONPATH": str(tmp_path), "ATTNIO_PLUGINS": "hangs_at_import"}
    out = tmp_path / "verdicts.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "kernels",
            "validate",
            "--device",
            "cpu",
            "--time-limit",
            "2",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,  # a hang guard: about 5 s
        env=environment | {"ATTNIO_WORKER": "0"},
    )
    assert done.returncode == 1, done.stderr[-2000:]
    assert "stopped after the time limit of 2 s" in done.stderr and not out.exists()
