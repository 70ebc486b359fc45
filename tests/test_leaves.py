"""Every leaf of a study checked against its own schema (kernels/io/*.schema.json): one of the
wrong shape, or saying something else than its file name, is damaged. A dry run names the
damage and changes nothing; a real run sets it aside and makes it again, and its closing line
counts the records on disk. Reports and the index are leaves too. All on copies of the shared
ci study (conftest.study)."""

import json
import re
import shutil

import pandas as pd
import pytest
from workflow_run import ROOT, snakemake

from kernels.io.records import DamagedRecordError, read_leaf, read_record
from kernels.io.tables import gather

CONFIG = ("--configfile", str(ROOT / "config" / "config.yaml"), str(ROOT / "config" / "presets" / "ci.yaml"))

RECORD = "points/sdpa/float32/B1-H1-T100-d16-causal-na-normal.json"
FLASH_RECORD = "points/sdpa_flash/float32/B1-H1-T100-d16-causal-na-normal.json"
BUILD = "build/triton_flash_float16_bm16-bn32/T16-d16.json"
KINDS = {  # results/<glob>: the kind of leaf it is
    "points/*/*/*.json": "record",
    "validate/*.json": "validation",
    "build/*/*.json": "build",
    "ceilings.json": "ceilings",
    "env.json": "env",
    "model/softmax_example.json": "softmax_example",
    "model/*.csv": "table",
    "tile_errors.csv": "table",
    "reports/*": "page",
    "index.html": "page",
}


def test_every_leaf_of_a_study_holds_its_own_schema(study):
    """What the producers write is what the schemas describe: no leaf of a clean study is
    damaged (else every run would set it aside and make it again)."""
    results = study / "results"
    for pattern, kind in KINDS.items():
        found = sorted(results.glob(pattern))
        assert found, pattern
        for path in found:
            read_leaf(path, kind)


def replace_field(text: str, field: str, value) -> str:
    record = json.loads(text)
    record[field] = value
    return json.dumps(record)


WRONG = {  # a leaf, what is put in its place, and what the error says
    "build result {'x': 1}": (
        BUILD,
        "build",
        '{"x": 1}',
        "not a build result: 'targets' is a required property",
    ),
    "validation result []": ("validate/sdpa_float16_na.json", "validation", "[]", "[] should be non-empty"),
    "validation result {'x': 1}": (
        "validate/sdpa_float16_na.json",
        "validation",
        '{"x": 1}',
        "not a validation result: {'x': 1} is not of type 'array'",
    ),
    "negative ceiling": (
        "ceilings.json",
        "ceilings",
        lambda text: replace_field(text, "copy_gbps", -1),
        "ceilings field copy_gbps: -1 is less than or equal to the minimum of 0",
    ),
    "ceilings with NaN": ("ceilings.json", "ceilings", lambda t: t.replace("{", '{"x": NaN,', 1), "NaN"),
    "provenance without config": (
        "env.json",
        "env",
        lambda text: json.dumps({k: v for k, v in json.loads(text).items() if k != "config"}),
        "not a provenance: 'config' is a required property",
    ),
    "provenance not JSON": ("env.json", "env", "garbage\n", "is not valid JSON"),
    "model table of other columns": ("model/gpus.csv", "table", "a,b\n1,2\n", "has no column gpu, model"),
    "model table cut short": (
        "model/predictions.csv",
        "table",
        lambda text: text[: len(text) // 2],
        "but the header names",
    ),
    "model table with a word for a number": (
        "model/matrix_sizes.csv",
        "table",
        lambda text: text.replace("\n256,", "\nmany,", 1),
        "line 2: tokens='many' is not a integer",
    ),
    "softmax example without figure 4": (
        "model/softmax_example.json",
        "softmax_example",
        lambda text: replace_field(text, "figure4", {}),
        "softmax example field figure4: 'row_0000_first' is a required property",
    ),
    "report cut short": ("reports/traffic.html", "page", lambda text: text[:1000], "does not end its HTML"),
    "notebook of no cells": ("reports/traffic.ipynb", "page", '{"x": 1}', "is not a notebook"),
}


@pytest.mark.parametrize("case", WRONG)
def test_a_leaf_of_the_wrong_shape_is_damaged(study, tmp_path, case):
    name, kind, put, said = WRONG[case]
    source = study / "results" / name
    path = tmp_path / "results" / name  # the same file name: tables are known by theirs
    path.parent.mkdir(parents=True)
    path.write_text(put(source.read_text()) if callable(put) else put)
    with pytest.raises(DamagedRecordError) as raised:
        read_leaf(path, kind)
    assert str(raised.value).startswith(str(path)) and said in str(raised.value), raised.value


def test_a_record_or_verdict_that_disagrees_with_its_file_name_is_damaged(study, tmp_path):
    """A T = 100 record that says T = 999 would be a T = 999 row, and the T = 100 point
    would be missing from the tables: gathering refuses it, naming the file."""
    good = study / "results" / RECORD
    expect = {"impl": "sdpa", "tokens": 100, "head_dim": 16, "causal": True, "block_m": None}
    assert read_record(good, expect)["tokens"] == 100
    bad = tmp_path / "B1-H1-T100-d16-causal-na-normal.json"
    bad.write_text(replace_field(good.read_text(), "tokens", 999))
    said = "says tokens=999, but its file name says tokens=100"
    with pytest.raises(DamagedRecordError, match=re.escape(f"{bad}: {said}")):
        gather([good, bad], tmp_path / "gathered.jsonl", [expect, expect])
    assert not (tmp_path / "gathered.jsonl").exists()
    verdicts = study / "results" / "validate" / "sdpa_float32_na.json"
    with pytest.raises(
        DamagedRecordError, match="row 0 says impl='sdpa', but its file name says impl='torch_naive'"
    ):
        read_leaf(verdicts, "validation", {"impl": "torch_naive"})


def jobs_planned(output: str) -> dict[str, int]:
    stats = output[output.rindex("Job stats:") :]
    return {rule: int(count) for rule, count in re.findall(r"^(\w+)\s+(\d+)$", stats, re.M)}


def test_a_dry_run_names_damage_and_changes_nothing_a_real_run_remakes_it(study, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(study, copy, symlinks=True)
    results = copy / "results"
    damage = {  # leaf → its new content
        RECORD: replace_field((results / RECORD).read_text(), "tokens", 999),
        "validate/sdpa_flash_float32_na.json": "[]",
        BUILD: (results / BUILD.replace("T16", "T100")).read_text(),  # another build job's
        "env.json": "garbage\n",
    }
    for name, text in damage.items():
        (results / name).write_text(text)
    (results / FLASH_RECORD).unlink()
    (results / "reports" / "traffic.html").unlink()
    before = {path: path.read_bytes() for path in results.rglob("*") if path.is_file()}

    dry = snakemake(copy, "-n", "--cores", "2", *CONFIG)
    assert dry.returncode == 0, dry.stderr[-2000:]
    said = dry.stdout + dry.stderr
    for name in damage:
        assert f"Damaged: results/{name}: " in said, name
        assert f"(a real run sets it aside as results/{name}.damaged and remakes it)" in said
    stray = "names the point triton_flash/float16/B1-H1-T100-d16-causal-bm16-bn32-normal, which"
    assert f"{stray} is not built by triton_flash_float16_bm16-bn32/T16-d16" in said
    assert {path: path.read_bytes() for path in results.rglob("*") if path.is_file()} == before
    planned = jobs_planned(dry.stdout)  # what the real run will do: the dry run plans it
    assert planned["env"] == planned["build"] == planned["validate"] == 1
    assert planned["measure"] == 1 + 1 + 3  # the record, the deleted one, the build's three
    assert "reason: Missing output files: results/reports/traffic.html" in dry.stdout
    # the target job's line counts its inputs instead of listing them
    assert re.search(r"rule all:\n    input: \d+ files, every leaf of the study", dry.stdout)

    # a real run sets them aside; here it remakes all but the deleted record, whose table
    # rows it leaves alone (--omit-from): the closing line counts it missing, from the disk
    for name in (BUILD, "validate/sdpa_flash_float32_na.json", "env.json"):  # kept short here
        (results / name).write_bytes((study / "results" / name).read_bytes())
    omit = ("--omit-from", f"results/{FLASH_RECORD}")
    done = snakemake(copy, "--cores", "2", *omit, *CONFIG)
    assert done.returncode == 0, done.stderr[-3000:]
    said = done.stdout + done.stderr
    assert f"Damaged, set aside as results/{RECORD}.damaged to be made again: results/{RECORD}: " in said
    assert (results / f"{RECORD}.damaged").read_text() == damage[RECORD]
    assert read_record(results / RECORD)["tokens"] == 100  # made again
    table = pd.read_csv(study / "results" / "metrics.csv")

    def closing_line(missing: int) -> str:
        counts = table["status"].value_counts().to_dict()
        counts["ok"] -= missing
        said = [f"{counts[s]} {s}" for s in ("ok", "skipped", "failed") if counts.get(s)]
        said += [f"{missing} missing"] if missing else []
        return f"attnio: {len(table)} points: {', '.join(said)} (why: "

    assert closing_line(missing=1) in said  # metrics.csv still has the point: the disk has not
    assert f"attnio: no usable record: results/{FLASH_RECORD}; a plain run makes them" in said

    # the next run makes the missing record again; the tables hold exactly the study's points
    done = snakemake(copy, "--cores", "2", "--until", "collect", *CONFIG)
    assert done.returncode == 0, done.stderr[-3000:]
    assert closing_line(missing=0) in done.stdout + done.stderr
    remade = pd.read_csv(results / "metrics.csv")
    key = ["impl", "dtype", "tokens", "causal", "inputs", "status"]
    assert remade[key].equals(table[key])


def test_the_run_ends_with_the_summary_and_the_index_not_the_input_list(study):
    output = (study / "snakemake-output.txt").read_text()
    end = output[output.rindex("localrule all:") :]
    assert re.match(r"localrule all:\n    input: \d+ files, every leaf of the study", end), end[:300]
    assert "results/points/" not in end and "reason:" not in end  # no list of paths
    assert re.search(r"^attnio: \d+ points: .*\nattnio: reports: results/index.html$", end, re.M)
