"""The ci study's failures, on copies of the shared study (conftest.study): damaged
and deleted records, a page that raises, the report stage without torch, every leaf held to
its schema, a full disk. Apart from test_workflow.py, so that the second test worker takes
these while the first reads the study itself."""

import json
import re
from html import unescape

import nbformat
import pandas as pd
import pytest
from conftest import study_copy
from full_disk import no_room
from test_workflow import REPORTS, images
from workflow_run import ROOT, command, snakemake

from kernels.io.records import DamagedRecordError, read_leaf, read_record
from kernels.io.tables import gather

DEFAULT = str(ROOT / "config" / "config.yaml")
CI = str(ROOT / "config" / "presets" / "ci.yaml")
CONFIG = ("--configfile", DEFAULT, CI)


def damaged(text: str, how: str) -> str:
    """A record's text damaged in one of the ways a crash or an edit leaves it."""
    if how == "cut short":
        return text[: len(text) // 3]
    if how == "NaN":
        return text.replace('"max_abs_error": ', '"max_abs_error": NaN, "was": ', 1)
    if how == "another pass":  # a backward's numbers where a forward's were, or the reverse
        return text.replace('"pass": "backward"', '"pass": "forward"', 1)
    return text.replace('"status": "ok"', '"status": "fine"', 1)  # off the schema


PAGE_ERROR = "IndexError: single positional indexer is out-of-bounds"


@pytest.mark.integration  # make integration (CI): Snakemake on a copy, 20 s
def test_reports_render_without_torch_and_a_failed_page_takes_no_other_down(study, tmp_path, no_torch):
    """The report stage only reads files: two pages' rules rerun on a copy of the study's
    results, in an environment where importing torch or triton fails (every page of the
    modelled studies renders so too: tests/page_renderer.py). One page renders again byte
    for byte (cell ids, timings and table ids made independent of the run). The other's
    notebook raises (here its template): the pages stay, the index renders, links them and
    names the failed one with its first error line and its log, the pack holds what exists,
    and the run exits non-zero, its closing line naming the page. The next run renders the
    failed page again, unchanged or not."""
    copy = tmp_path / "copy"
    study_copy(study, copy)
    results = copy / "results"
    again = ("predicted", "storage")  # the page that will fail, and one rendered again
    outcomes = [results / "logs" / "reports" / f"{name}.outcome.json" for name in again]  # else only the HTML
    for page in [*(p for name in again for p in results.glob(f"reports/{name}.*")), *outcomes]:
        page.unlink()
    (results / "index.html").unlink()
    template = copy / "reports" / "predicted.ipynb"
    notebook = nbformat.read(template, as_version=4)
    at = 1 + next(i for i, c in enumerate(notebook.cells) if "parameters" in c.metadata.get("tags", []))
    notebook.cells.insert(at, nbformat.v4.new_code_cell("import pandas as pd\npd.DataFrame().iloc[0]"))
    nbformat.write(notebook, template)

    done = snakemake(copy, "--cores", "2", *CONFIG, environment=no_torch)
    said = done.stdout + done.stderr
    assert done.returncode != 0, said[-3000:]
    closing = said.rstrip().splitlines()[-1]
    assert f"predicted ({PAGE_ERROR})" in closing, said[-2000:]
    assert f"attnio: page failed: predicted: {PAGE_ERROR} (log: results/logs/reports/predicted.log" in said
    ran = re.findall(r"^(?:local)?(?:rule|checkpoint) (\w+):", said, re.M)
    assert set(ran) == {"report_notebook", "report_html", "index", "pack", "all"}, ran  # nothing else
    assert ran.count("report_notebook") == len(again), ran

    index = unescape((results / "index.html").read_text())
    for name in REPORTS:
        linked = f"href='reports/{name}.html'" in index
        assert linked == (name != "predicted"), name
        if name != "storage":
            continue
        drawn = images((results / "reports" / f"{name}.html").read_text())
        assert drawn and drawn == images((study / "results" / "reports" / f"{name}.html").read_text())
        for suffix in (".html", ".ipynb"):  # a second render from the same tables: the same file
            page = study / "results" / "reports" / f"{name}{suffix}"
            assert (results / "reports" / page.name).read_bytes() == page.read_bytes(), page.name
    assert f"did not render. <code>{PAGE_ERROR}</code>" in index
    assert "href='logs/reports/predicted.log'" in index and "href='logs/reports/predicted.ipynb'" in index
    # nothing of the failed page under its final names; its executed notebook kept in logs/
    assert not (results / "reports" / "predicted.html").exists()
    assert not (results / "reports" / "predicted.ipynb").exists()
    kept = nbformat.read(results / "logs" / "reports" / "predicted.ipynb", as_version=4)
    assert any(o.get("ename") == "IndexError" for c in kept.cells for o in c.get("outputs", []))
    packed = results / "packed" / "index"
    assert (packed / "logs" / "reports" / "predicted.log").exists()
    assert (packed / "reports" / "storage.html").exists() and not (
        packed / "reports" / "predicted.html"
    ).exists()

    # the next run tries the failed page again, although nothing changed
    dry = snakemake(copy, "-n", "--cores", "2", *CONFIG)
    assert dry.returncode == 0, dry.stderr[-2000:]
    assert "the page predicted failed last time; it is rendered again" in dry.stdout + dry.stderr
    assert jobs_planned(dry.stdout)["report_notebook"] == 1


# --- leaves (on copies of the shared ci study, here so that it runs once) ---
# Every leaf of a study checked against its own schema (kernels/io/*.schema.json): one of the
# wrong shape, or saying something else than its file name, is damaged. A dry run names the
# damage and changes nothing; a real run sets it aside and makes it again, and its closing line
# counts the records on disk. Reports and the index are leaves too. All on copies of the shared
# ci study (conftest.study).


RECORD = "points/sdpa/float32/B1-H1-T100-d16-causal-na-normal.json"
FLASH_RECORD = "points/sdpa_flash/float32/B1-H1-T100-d16-causal-na-normal.json"
BUILD = "build/triton_flash_float16_bm16-bn32/d16.json"
OTHER_BUILD = "build/triton_naive_float16_bm16-bn32/d16.json"  # another build job
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
    "ceilings copying at 1e308 GB/s": (
        "ceilings.json",
        "ceilings",
        lambda text: replace_field(text, "copy_gbps", 1e308),
        "ceilings field copy_gbps: 1e+308 is greater than the maximum of 1000000",
    ),
    "record of a call taking 1e308 ms": (
        RECORD,
        "record",
        lambda text: replace_field(text, "time_ms", 1e308),
        "metrics record field time_ms: 1e+308 is greater than the maximum of 86400000",
    ),
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


# records damaged as a crash or an edit leaves them (none of the damaged build's points)
DAMAGED_RECORDS = {
    "points/triton_naive/float16/B1-H1-T16-d16-full-bm16-bn32-normal.json": "cut short",
    "points/torch_naive/float16/B1-H1-T16-d16-causal-na-normal.json": "NaN",
    "points/sdpa/float16/B1-H1-T16-d16-full-na-normal.json": "off the schema",
    "points/sdpa/float16/B1-H1-T100-d16-causal-na-normal-backward.json": "another pass",
}


@pytest.mark.integration  # make integration (CI): Snakemake on a copy, 30-40 s
def test_a_dry_run_names_damage_and_changes_nothing_a_real_run_remakes_it(study, tmp_path):
    """Damaged leaves of every kind (records cut short, with a NaN, off their schema or
    disagreeing with their name; a verdict, a build, the provenance, a sealed table) and a
    deleted record: a dry run names each and plans what a real run does, changing nothing;
    a real run sets them aside and remakes them; the next run makes the deleted record, and
    the tables hold exactly the study's points. A damaged intermediate is named, not remade."""
    copy = tmp_path / "copy"
    study_copy(study, copy)
    results = copy / "results"
    damage = {name: damaged((results / name).read_text(), how) for name, how in DAMAGED_RECORDS.items()}
    damage |= {  # leaf → its new content
        RECORD: replace_field((results / RECORD).read_text(), "tokens", 999),
        "validate/sdpa_flash_float32_na.json": "[]",
        BUILD: (results / OTHER_BUILD).read_text(),  # another build job's
        "env.json": "garbage\n",
        # cut at a row's end: still a table, but not the one its writer wrote (its seal)
        "stage_times.csv": "".join((results / "stage_times.csv").read_text().splitlines(True)[:3]),
    }
    for name, text in damage.items():
        (results / name).write_text(text)
    (results / FLASH_RECORD).unlink()
    (results / "reports" / "traffic.html").unlink()
    before = {path: path.read_bytes() for path in results.rglob("*") if path.is_file()}

    dry = snakemake(copy, "-n", "--cores", "2", *CONFIG)
    assert dry.returncode == 0, dry.stderr[-2000:]
    said = dry.stdout + dry.stderr
    cut = r"Damaged: results/stage_times.csv: holds 2 rows, .* but its writer wrote \d+ rows"
    assert re.search(cut, said)
    for name in damage:
        assert f"Damaged: results/{name}: " in said, name
        assert f"(a real run sets it aside as results/{name}.damaged and remakes it)" in said
    stray = next(iter(json.loads((results / OTHER_BUILD).read_text())["points"]))
    assert f"names the point {stray}, which is not built by triton_flash_float16_bm16-bn32/d16" in said
    assert {path: path.read_bytes() for path in results.rglob("*") if path.is_file()} == before
    planned = jobs_planned(dry.stdout)  # what the real run will do: the dry run plans it
    assert planned["env"] == planned["build"] == planned["validate"] == 1
    # the damaged records and the deleted one; the remade build's points stay (a point's
    # build is an ancient input: remaking it, or adding a T to its group, leaves them current)
    assert planned["measure"] == len(DAMAGED_RECORDS) + 1 + 1
    # every page is made again (the provenance changed), the deleted one among them: a run
    # publishes it once its notebook (a checkpoint) has run
    assert planned["report_notebook"] == len(REPORTS)
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
    for name in [RECORD, *DAMAGED_RECORDS]:
        assert f"Damaged, set aside as results/{name}.damaged to be made again: results/{name}: " in said
    assert (results / f"{RECORD}.damaged").read_text() == damage[RECORD]
    assert read_record(results / RECORD)["tokens"] == 100  # made again
    table = pd.read_csv(study / "results" / "metrics.csv")
    backward = pd.read_csv(study / "results" / "backward.csv")

    def closing_line(missing: int) -> str:
        counts = pd.concat([table, backward])["status"].value_counts().to_dict()
        counts["ok"] -= missing
        said = [f"{counts[s]} {s}" for s in ("ok", "skipped", "failed") if counts.get(s)]
        said += [f"{missing} missing"] if missing else []
        return f"attnio: {len(table) + len(backward)} points: {', '.join(said)} (why: "

    assert closing_line(missing=1) in said  # metrics.csv still has the point: the disk has not
    assert f"attnio: no usable record: results/{FLASH_RECORD}; a plain run makes them" in said
    # the index is the shared study's, older than the records this run made again: said so
    assert re.search(r"^attnio: reports: results/index.html is stale: an earlier run made it", said, re.M)

    # the next run makes the missing record again; the tables hold exactly the study's points
    done = snakemake(copy, "--cores", "2", "--until", "collect", *CONFIG)
    assert done.returncode == 0, done.stderr[-3000:]
    assert closing_line(missing=0) in done.stdout + done.stderr
    remade = pd.read_csv(results / "metrics.csv")
    key = ["impl", "dtype", "tokens", "causal", "inputs", "status"]
    assert remade[key].equals(table[key])
    stage_times = (study / "results" / "stage_times.csv").read_text()
    assert len((results / "stage_times.csv").read_text().splitlines()) == len(stage_times.splitlines())
    again = snakemake(copy, "-n", "--cores", "2", "collect", *CONFIG)
    assert "Nothing to be done" in again.stdout + again.stderr

    # a damaged intermediate is not remade (nothing tells it from an edit) but named
    gathered = results / "gathered" / "sdpa_float32.jsonl"
    gathered.write_text(gathered.read_text()[:50] + "\n")
    failed = snakemake(copy, "--cores", "2", "collect", *CONFIG)
    named = "results/gathered/sdpa_float32.jsonl, line 1: "
    assert failed.returncode != 0 and named in failed.stdout + failed.stderr
    assert named in (results / "logs" / "collect.log").read_text()


# --- a full disk (on a copy of the shared ci study, results/ a small tmpfs of the test's own) ---


@pytest.mark.integration  # make integration (CI): Snakemake on a copy, 20 s
def test_a_full_disk_is_named_nothing_partial_is_kept_and_the_next_run_recovers(study, tmp_path):
    """With two HTML pages and the index to make again and no room where results/ is, the
    run fails saying so (its jobs' logs may have had no room either), leaves no temporary
    file and no leaf cut short under its final name (a dry run finds no damage); with room
    again the next run makes what is missing and nothing is left to do."""
    copy = tmp_path / "copy"
    study_copy(study, copy)
    results = copy / "results"
    for path in [results / "index.html", results / "reports/traffic.html", results / "reports/storage.html"]:
        path.unlink()
    found = no_room(copy, tmp_path, command(copy, "--cores", "2", *CONFIG))  # tests/full_disk.py
    full = found["full"]
    assert full["returncode"] != 0, full["output"][-3000:]
    assert re.search(r"^attnio: no space left on device: the file system of results/ has [\d,]+ bytes free",
                     full["output"], re.M), full["output"][-3000:]  # fmt: skip
    assert found["leftovers_when_full"] == []
    dry = found["dry_when_full"]
    assert dry["returncode"] == 0 and "Damaged" not in dry["output"], dry["output"][-3000:]
    again = found["again"]
    assert again["returncode"] == 0, again["output"][-3000:]
    assert "attnio: no space left on device" not in again["output"]
    assert found["leftovers_again"] == []
    assert "Nothing to be done" in found["dry_again"]["output"], found["dry_again"]["output"][-2000:]
