"""A point's code may not move the process that measures it: a changed working folder is set
back and threads left running are found (kernels.measure.process_guard), and a process that
dies before writing its output leaves its last words (kernels.io.last_words) written by the
process watching it (kernels.warm.watched), outside any workflow run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest
from hostile_plugins import write_hostile
from workflow_run import ROOT, env

from kernels.io import last_words
from kernels.measure.process_guard import guarded


def test_a_moved_folder_is_set_back_and_named(tmp_path):
    here = os.getcwd()
    with guarded() as found:
        os.chdir(tmp_path)
    assert os.getcwd() == here and found == [
        f"it changed the working folder (to {tmp_path}); a point's code must not"
    ]


def test_threads_left_running_are_named_and_short_lived_ones_are_not():
    stop = threading.Event()
    with guarded() as found:
        threading.Thread(target=stop.wait, name="left-behind").start()
        threading.Timer(0.05, lambda: None).start()  # ends by itself
    try:
        assert len(found) == 1 and "it left 1 thread(s) running after the point (left-behind)" in found[0]
    finally:
        stop.set()
    with guarded() as nothing:
        pass
    assert nothing == []


def test_last_words_are_written_only_with_a_watcher(tmp_path, monkeypatch):
    out = tmp_path / "verdicts.json"
    monkeypatch.delenv(last_words.VARIABLE, raising=False)
    last_words.leave("validation", [{"verdict": "error"}], str(out))  # nobody watching: nothing
    monkeypatch.setenv(last_words.VARIABLE, str(tmp_path / "words.json"))
    last_words.leave("validation", [{"verdict": "error", "message": ""}], str(out))
    heard = last_words.heard(tmp_path / "words.json")
    assert heard["out"] == str(out) and not out.exists()
    last_words.say(heard, "it died")
    assert json.loads(out.read_text()) == [{"verdict": "error", "message": "it died"}]
    assert last_words.heard(tmp_path / "absent.json") is None


def kernels_command(folder, *args: str) -> subprocess.CompletedProcess:
    environment = env() | {"PYTHONPATH": os.pathsep.join([str(folder), str(ROOT)])}
    environment |= {"ATTNIO_PLUGINS": "hostile", "ATTNIO_INTERPRET": "1"}
    return subprocess.run(
        [sys.executable, "-m", "kernels", *args],
        env=environment,
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize(
    ("impl", "said"),
    [
        ("h_exit", "exited with status 0 during this job, before writing its output"),  # os._exit(0)
        ("h_sysexit", "it called sys.exit(3); a point's code must not"),
    ],
)
def test_a_point_whose_code_ends_its_process_is_a_failed_record_naming_it(tmp_path, impl, said):
    write_hostile(tmp_path)
    shape = ["--batch", "1", "--heads", "1", "--tokens", "16", "--head-dim", "16", "--dtype", "float32"]
    done = kernels_command(tmp_path, "measure", "--impl", impl, *shape, "--device", "cpu", "--out", "r.json")
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads((tmp_path / "r.json").read_text())
    assert record["status"] == "failed" and record["impl"] == impl and said in record["reason"]


def test_a_validation_whose_process_is_killed_fails_every_case_naming_it(tmp_path):
    write_hostile(tmp_path)
    flags = ["--device", "cpu", "--dtype", "float32", "--tokens", "16", "--head-dim", "16", "--backward"]
    done = kernels_command(tmp_path, "validate", "--impl", "h_killbw", *flags, "--json", "v.json")
    assert done.returncode == 0, done.stderr[-2000:]
    verdicts = json.loads((tmp_path / "v.json").read_text())
    assert verdicts and all(v["verdict"] == "error" and not v["as_expected"] for v in verdicts)
    assert all("died during this job of SIGKILL" in v["message"] for v in verdicts)
    assert {v["direction"] for v in verdicts} == {"forward", "backward"}
