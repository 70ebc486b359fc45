"""The Snakemake pipeline, run for real on the ci preset, and the HTML reports it renders
(one file, so that one test worker runs the shared study)."""

import base64
import json
import re
import shutil
import subprocess
import sys
import zipfile
from html import unescape
from pathlib import Path

import nbformat
import pandas as pd
import pytest
import yaml
from full_disk import no_room
from workflow_run import ROOT, command, env, snakemake, worker_processes

from kernels.io.records import DamagedRecordError, read_leaf, read_record
from kernels.io.tables import gather
from kernels.study import budget
from kernels.study.cost import summarize
from kernels.study.point import Point
from reports.pages.publish import html_of

DEFAULT = str(ROOT / "config" / "config.yaml")
CI = str(ROOT / "config" / "presets" / "ci.yaml")
CONFIG = ("--configfile", DEFAULT, CI)


def test_the_study_ran_on_warm_workers_and_left_none(study):
    """Its points were measured by warm workers (each record says which and after how many),
    and no keeper or worker outlived the run that ended well."""
    folders = list((study / "results" / "logs" / "worker").glob("run-*"))
    assert folders and not [pid for folder in folders for pid in worker_processes(folder)]
    processes = [json.loads(p.read_text())["process"] for p in (study / "results" / "points").rglob("*.json")]
    assert processes and all(p["warm"] for p in processes)
    assert max(p["points_before"] for p in processes) > 0


def test_table_has_exactly_the_points_asked_for(study):
    table = pd.read_csv(study / "results" / "metrics.csv")
    grids = [g for g in yaml.safe_load(Path(CI).read_text())["sweep"] if g.get("pass") != ["backward"]]
    assert len(table) == sum(len(g["impls"]) * len(g["tokens"]) * len(g["causal"]) for g in grids)
    assert set(table["impl"]) == {impl for g in grids for impl in g["impls"]}
    assert set(table["tokens"]) == {t for g in grids for t in g["tokens"]}
    # every point with normal inputs ran, but the SDPA backend a CPU lacks (tested below)
    normal = table[(table["inputs"] == "normal") & (table["impl"] != "sdpa_efficient")]
    assert (normal["status"] == "ok").all(), normal[["impl", "status", "reason"]]
    for row in normal.itertuples():
        point = Point(
            row.impl,
            row.batch,
            row.heads,
            row.tokens,
            row.head_dim,
            row.dtype,
            bool(row.causal),
            None if pd.isna(row.block_m) else int(row.block_m),
            None if pd.isna(row.block_n) else int(row.block_n),
        )
        model = summarize(point)
        assert row.bytes_S == model["bytes_S"] and row.flops == model["flops"]
        if row.impl.startswith("triton_"):
            assert row.traffic_counted_bytes == row.traffic_model_bytes == model["traffic_model_bytes"]
            assert pd.isna(row.time_ms)
        else:
            assert row.time_ms > 0
    stages = pd.read_csv(study / "results" / "stages.csv")
    assert set(stages["kernel"]) == {"scores", "softmax", "stats", "pv", "attention_fwd"}
    assert (study / "results" / "metrics.parquet").stat().st_size > 0
    provenance = json.loads((study / "results" / "env.json").read_text())
    assert provenance["device"] == "cpu" and provenance["config_hash"]


def test_the_run_ends_saying_how_many_points_ran_and_where_the_reports_are(study):
    tables = [pd.read_csv(study / "results" / f"{name}.csv") for name in ("metrics", "backward")]
    counts = pd.concat(tables)["status"].value_counts()  # the forward's points and the backward's
    said = ", ".join(f"{counts[s]} {s}" for s in ("ok", "skipped", "failed") if s in counts)
    output = (study / "snakemake-output.txt").read_text()
    why = "(why: results/metrics.csv and results/backward.csv, column reason)"
    assert f"attnio: {counts.sum()} points: {said} {why}" in output
    assert "attnio: reports: results/index.html" in output


def job_intervals(workdir: Path) -> list[dict]:
    """Every job of the run as Snakemake recorded it: rule, log, start and end (seconds)."""
    jobs: dict[tuple, dict] = {}
    for path in (workdir / ".snakemake" / "metadata").rglob("*"):
        if not path.is_file():
            continue
        record = json.loads(path.read_text())
        key = (record["rule"], tuple(record["log"] or []), record["starttime"])
        job = jobs.setdefault(
            key, {"rule": record["rule"], "log": record["log"], "start": record["starttime"]}
        )
        job["end"] = max(job.get("end", 0.0), record["endtime"])
    return list(jobs.values())


def is_timed(job: dict) -> bool:
    if job["rule"] == "ceilings":
        return True
    return job["rule"] == "measure" and not job["log"][0].split("/")[3].startswith("triton_")


def test_no_job_runs_beside_a_timed_one(study):
    jobs = job_intervals(study)
    timed = [j for j in jobs if is_timed(j)]
    # ceilings, ci's torch points (float16, float32, large), and its torch backward points
    assert len(timed) == 1 + 8 + 4 + 1 + 2
    for job in timed:
        for other in jobs:
            if other is not job:
                assert other["end"] <= job["start"] or other["start"] >= job["end"], (job, other)
    # and interpreter jobs did run side by side, so the check above could have failed
    interpreted = [j for j in jobs if j["rule"] == "measure" and not is_timed(j)]
    assert any(
        a["start"] < b["end"] and b["start"] < a["end"]
        for a in interpreted
        for b in interpreted
        if a is not b
    )


def test_records_keep_threads_processor_and_times(study):
    for path in (study / "results" / "points").rglob("*.json"):
        record = json.loads(path.read_text())
        assert record["threads"] >= 1 and record["processor"]
        assert record["started_at"] <= record["finished_at"]
        if record["impl"] in ("torch_naive", "sdpa"):
            assert record["threads"] == 2  # the whole machine the study was given (--cores 2)


def test_the_backward_points_keep_and_move_what_their_models_say(study):
    """The ci preset's backward grid: every path with a backward kept exactly the model's
    bytes (saved-tensor hooks), its gradients within the float16 tolerance of float64, the
    Triton backwards counted at the model's bytes under the interpreter, the torch path timed
    alone and with its forward; the tile-local softmax skipped, naming why; the forward's
    table holds none of them."""
    table = pd.read_csv(study / "results" / "backward.csv").set_index("impl")
    grid = next(g for g in yaml.safe_load(Path(CI).read_text())["sweep"] if g.get("pass") == ["backward"])
    assert sorted(table.index) == sorted(grid["impls"]) and set(table["pass"]) == {"backward"}
    skipped = table.loc["triton_tile_softmax"]
    assert skipped["status"] == "skipped" and skipped["reason"].startswith("no backward: ")
    ran = table.drop(index="triton_tile_softmax")
    assert (ran["status"] == "ok").all(), ran[["status", "reason"]]
    modelled = ran.dropna(subset=["saved_model_bytes"])
    assert set(modelled.index) >= {"torch_naive", "triton_naive", "triton_s_only", "triton_flash"}
    assert (modelled["saved_bytes"] == modelled["saved_model_bytes"]).all()
    assert (ran["max_abs_error"] < 1e-2).all()
    triton = ran.loc[["triton_naive", "triton_s_only", "triton_flash"]]
    assert (triton["traffic_counted_bytes"] == triton["traffic_model_bytes"]).all()
    torch_naive = ran.loc["torch_naive"]
    assert torch_naive["time_ms"] > 0 and torch_naive["step_time_ms"] > 0
    forward = pd.read_csv(study / "results" / "metrics.csv")
    assert set(forward["pass"]) == {"forward"}
    stages = pd.read_csv(study / "results" / "backward_stage_times.csv")
    assert set(stages[stages["impl"] == "torch_naive"]["stage"]) >= {"dp", "ds", "dv", "dq", "dk"}
    page = (study / "results" / "reports" / "training.html").read_text()
    assert "the bytes kept equal the model" in unescape(page)


def test_ci_study_flags_the_overflow_in_records_and_reports(study):
    table = pd.read_csv(study / "results" / "metrics.csv")
    large = table[table["inputs"] == "large"].set_index("impl")
    assert set(large.loc[["torch_naive", "triton_naive"], "status"]) == {"failed"}
    assert large.loc["triton_flash", "status"] == "ok" and large.loc["triton_flash", "nonfinite_outputs"] == 0
    index = (study / "results" / "index.html").read_text()
    assert "Finding: 2 point(s) returned non-finite outputs" in index
    for name in ("storage", "tile_softmax"):
        page = (study / "results" / "reports" / f"{name}.html").read_text()
        assert "Overflow of a stored S" in page and "triton_naive float16: 256 of 256" in page


def test_validation_verdicts_are_recorded(study):
    files = sorted((study / "results" / "validate").glob("*.json"))
    assert len(files) == 10  # 6 implementations in float16, 4 torch paths in float32
    tile_file = study / "results" / "validate" / "triton_tile_softmax_float16_bm16-bn32.json"
    tile = json.loads(tile_file.read_text())
    forward = [r for r in tile if r.get("direction", "forward") == "forward"]
    assert {r["verdict"] for r in forward} == {"pass", "fail"} and all(r["as_expected"] for r in forward)
    # the backward points' validation: its gradient refused (its forward is wrong on purpose)
    assert {r["verdict"] for r in tile if r not in forward} == {"refused"}


def test_a_backend_the_device_lacks_is_a_skipped_record_naming_it(study):
    """The ci sweep forces SDPA's flash backend (a CPU has one) and its efficient one (a CPU
    has none): the first is measured, the second skipped with PyTorch's reason; validation
    calls it unavailable, not failed."""
    table = pd.read_csv(study / "results" / "metrics.csv").set_index("impl")
    assert table.loc["sdpa_flash", "status"] == "ok" and table.loc["sdpa_flash", "time_ms"] > 0
    efficient = table.loc["sdpa_efficient"]
    assert efficient["status"] == "skipped"
    assert efficient["reason"].startswith(
        "unsupported on this device: PyTorch's efficient backend (backend='efficient') is not "
        "available for float32 on cpu"
    )
    verdicts = json.loads((study / "results" / "validate" / "sdpa_efficient_float32_na.json").read_text())
    assert {r["verdict"] for r in verdicts} == {"unavailable"}
    index = (study / "results" / "index.html").read_text()
    assert "unavailable here" in index and "1 point(s) skipped: unsupported on this device" in index


def test_rerun_does_nothing(study):
    again = snakemake(study, "--cores", "2", "--configfile", DEFAULT, CI)
    assert again.returncode == 0
    assert "Nothing to be done" in again.stdout + again.stderr


def test_changing_one_value_reruns_only_what_it_affects(study, tmp_path):
    config = yaml.safe_load(Path(CI).read_text())
    config["sweep"][0]["tokens"] = [16, 100, 40]
    changed = tmp_path / "changed.yaml"
    changed.write_text(yaml.safe_dump(config))
    dry = snakemake(study, "-n", "--cores", "2", "--configfile", DEFAULT, str(changed))
    assert dry.returncode == 0, dry.stderr[-2000:]
    stats = dict(re.findall(r"^(\w+)\s+(\d+)$", dry.stdout, re.M))
    assert stats["measure"] == "12"  # 6 impls × causal and not, at the new T only
    assert "validate" not in stats  # env reruns: it records the config hash


def damage(path: Path, how: str) -> None:
    text = path.read_text()
    if how == "cut short":
        path.write_text(text[: len(text) // 3])
    elif how == "NaN":
        path.write_text(text.replace('"max_abs_error": ', '"max_abs_error": NaN, "was": ', 1))
    else:
        path.write_text(text.replace('"status": "ok"', '"status": "fine"', 1))


def test_deleted_and_damaged_records_are_measured_again(study, tmp_path):
    copy = tmp_path / "copy of the study"
    shutil.copytree(study, copy, symlinks=True)
    points = copy / "results" / "points"
    deleted = points / "sdpa" / "float32" / "B1-H1-T100-d16-causal-na-normal.json"
    damaged = {
        "cut short": points / "triton_flash" / "float16" / "B1-H1-T16-d16-full-bm16-bn32-normal.json",
        "NaN": points / "torch_naive" / "float16" / "B1-H1-T16-d16-causal-na-normal.json",
        "off the schema": points / "sdpa" / "float16" / "B1-H1-T16-d16-full-na-normal.json",
    }
    deleted.unlink()
    for how, path in damaged.items():
        damage(path, how)

    # a dry run names the damage and plans the remaking, and changes nothing
    dry = snakemake(copy, "-n", "--cores", "2", *CONFIG)
    assert dry.returncode == 0, dry.stderr[-2000:]
    for how, path in damaged.items():
        name = path.relative_to(copy)
        assert f"Damaged: {name}: " in dry.stdout + dry.stderr, how
        assert path.exists() and not path.with_suffix(".json.damaged").exists()
    stats = dict(re.findall(r"^(\w+)\s+(\d+)$", dry.stdout, re.M))
    assert stats["measure"] == "4" and stats["collect"] == "1"

    # a real run sets them aside and makes them again, here up to the tables (the reports'
    # re-rendering is tested elsewhere and would only lengthen the suite)
    done = snakemake(copy, "--cores", "2", "--until", "collect", *CONFIG)
    assert done.returncode == 0, done.stderr[-3000:]
    for how, path in damaged.items():
        name = path.relative_to(copy)
        said = f"Damaged, set aside as {name}.damaged to be made again: {name}: "
        assert said in done.stdout + done.stderr, how
        assert path.with_suffix(".json.damaged").exists()
    table = pd.read_csv(copy / "results" / "metrics.csv")
    before = pd.read_csv(study / "results" / "metrics.csv")
    assert len(table) == len(before) and table["status"].equals(before["status"])
    again = snakemake(copy, "-n", "--cores", "2", "collect", *CONFIG)
    assert "Nothing to be done" in again.stdout + again.stderr

    # a damaged intermediate is not remade (nothing tells it from an edit) but named
    gathered = copy / "results" / "gathered" / "sdpa_float32.jsonl"
    gathered.write_text(gathered.read_text()[:50] + "\n")
    failed = snakemake(copy, "--cores", "2", "collect", *CONFIG)
    named = "results/gathered/sdpa_float32.jsonl, line 1: "
    assert failed.returncode != 0 and named in failed.stdout + failed.stderr
    assert named in (copy / "results" / "logs" / "collect.log").read_text()


# --- the HTML reports, looked at as a person would ---------------------------------------

REPORTS = sorted(path.stem for path in (ROOT / "reports").glob("*.ipynb"))
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
PROBE = (
    "<script>window.addEventListener('load', () => { const imgs = [...document.images];"
    " document.title = 'IMAGES ' + imgs.length + ' ' +"
    " imgs.filter(i => i.complete && i.naturalWidth > 0).length; });</script>"
)


def chromium(*args, user_dir):
    return subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={user_dir}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_every_report_and_the_index_exist(study):
    results = study / "results"
    index = (results / "index.html").read_text()
    for name in REPORTS:
        assert (results / "reports" / f"{name}.html").stat().st_size > 10_000
        assert f"reports/{name}.html" in index
    assert "Every validation passed" not in index  # the ci study's overflow points failed
    assert "2 point(s) failed" in index


@pytest.mark.parametrize("name", REPORTS)
def test_executed_notebooks_have_no_errors(study, name):
    notebook = nbformat.read(study / "results" / "reports" / f"{name}.ipynb", as_version=4)
    outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    html = (study / "results" / "reports" / f"{name}.html").read_text()
    assert "Traceback" not in html
    assert "import pandas" not in html  # code cells hidden by default


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (apt-get install chromium)")
@pytest.mark.parametrize("name", REPORTS + ["index"])
def test_renders_in_a_browser_with_every_image(study, name, tmp_path):
    source = study / "results" / ("index.html" if name == "index" else f"reports/{name}.html")
    page = source.read_text()
    expected = len(re.findall(r"<img ", page))
    probe = tmp_path / "probe.html"
    probe.write_text(page.replace("</body>", PROBE + "</body>"))
    dom = chromium(
        "--dump-dom", "--virtual-time-budget=10000", probe.as_uri(), user_dir=tmp_path / "profile-dom"
    )
    title = re.search(r"<title>IMAGES (\d+) (\d+)</title>", dom.stdout)
    assert title, dom.stderr[-2000:]
    assert int(title.group(1)) == int(title.group(2)) == expected
    if name != "index":
        assert expected >= 2
    shot = tmp_path / "shot.png"
    chromium(
        f"--screenshot={shot}",
        "--window-size=1200,2400",
        "--hide-scrollbars",
        source.as_uri(),
        user_dir=tmp_path / "profile-shot",
    )
    assert shot.stat().st_size > 20_000  # a rendered page, not a blank one


def render(template, parameters: dict, out_dir, environment=None):
    """Execute a report template with papermill as the report rule does, then its HTML as
    report_html writes it (reports.pages.publish)."""
    notebook = out_dir / "out.ipynb"
    flags = [arg for name, path in parameters.items() for arg in ("-p", name, str(path))]
    done = subprocess.run(
        [sys.executable, "-m", "papermill", str(template), str(notebook), "-k", "python3", *flags],
        capture_output=True,
        text=True,
        timeout=300,
        env=environment or env(),
        cwd=out_dir,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return nbformat.read(notebook, as_version=4), html_of(str(notebook), code=False)


def images(html):
    return [base64.b64decode(m) for m in re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", html)]


def test_reports_follow_the_data_and_are_deterministic(study, tmp_path):
    """Metrics of our own — one point marked failed — render twice to the same figures, and
    the report says that a point failed."""
    results = study / "results"
    metrics = pd.read_parquet(results / "metrics.parquet")
    metrics.loc[0, ["status", "reason"]] = ["failed", "out of memory: a test's own failure"]
    mine = tmp_path / "metrics.parquet"
    metrics.to_parquet(mine, index=False)
    first_dir, second_dir = tmp_path / "a", tmp_path / "b"
    first_dir.mkdir()
    second_dir.mkdir()
    template = ROOT / "reports" / "storage.ipynb"
    parameters = {
        "metrics": mine,
        "env": results / "env.json",
        "sizes": results / "model" / "matrix_sizes.csv",
    }
    nb1, html1 = render(template, parameters, first_dir)
    _, html2 = render(template, parameters, second_dir)
    assert images(html1) and images(html1) == images(html2)
    # the page says not every point ran and links the index's warnings (which name the
    # reasons) in one line instead of repeating them
    assert "not every point ran" in html1 and "../index.html#warnings" in html1
    assert "a test&#39;s own failure" not in html1 and "a test's own failure" not in html1
    summary = next(c for c in nb1.cells if "page.load(" in c.source)
    text = json.dumps(summary.outputs)
    failed = int((metrics["status"] == "failed").sum())  # the study's own and the test's
    assert f"{len(metrics)} points" in text and f"{failed} failed" in text


def test_reports_render_where_torch_cannot_be_imported(study, tmp_path, no_torch):
    """The report stage only reads files: its rules rerun on the study's results, in an
    environment where importing torch or triton fails, and render the same pages, byte for
    byte (cell ids, timings and table ids made independent of the run)."""
    results = tmp_path / "results"
    shutil.copytree(study / "results", results)
    outcomes = results.glob("logs/reports/*.outcome.json")  # else only the HTML is made again
    for page in [*results.glob("reports/*"), *outcomes, results / "index.html"]:
        page.unlink()
    done = snakemake(tmp_path, "--cores", "2", "--configfile", DEFAULT, CI, environment=no_torch)
    assert done.returncode == 0, done.stderr[-3000:]
    ran = set(re.findall(r"^(?:local)?(?:rule|checkpoint) (\w+):", done.stdout + done.stderr, re.M))
    assert ran == {"report_notebook", "report_html", "index", "pack", "all"}
    for name in REPORTS:
        drawn = images((results / "reports" / f"{name}.html").read_text())
        assert drawn and drawn == images((study / "results" / "reports" / f"{name}.html").read_text())
    # and a second render from the same tables is the same file, byte for byte
    for page in [*(study / "results" / "reports").glob("*"), study / "results" / "index.html"]:
        assert (results / page.relative_to(study / "results")).read_bytes() == page.read_bytes(), page.name


PAGE_ERROR = "IndexError: single positional indexer is out-of-bounds"


def test_a_page_that_fails_takes_no_other_down(study, tmp_path):
    """One report's notebook raises (here its template, in a copy of the study): the other
    pages stay, the index renders, links them and names the failed one with its first error
    line and its log, the pack holds what exists, and the run exits non-zero, its closing
    line naming the page. The next run renders the failed page again, unchanged or not."""
    copy = tmp_path / "copy"
    shutil.copytree(study, copy, symlinks=True)
    template = copy / "reports" / "predicted.ipynb"
    notebook = nbformat.read(template, as_version=4)
    at = 1 + next(i for i, c in enumerate(notebook.cells) if "parameters" in c.metadata.get("tags", []))
    notebook.cells.insert(at, nbformat.v4.new_code_cell("import pandas as pd\npd.DataFrame().iloc[0]"))
    nbformat.write(notebook, template)
    results = copy / "results"

    done = snakemake(copy, "--cores", "2", *CONFIG)
    said = done.stdout + done.stderr
    assert done.returncode != 0, said[-3000:]
    closing = said.rstrip().splitlines()[-1]
    assert f"predicted ({PAGE_ERROR})" in closing, said[-2000:]
    assert f"attnio: page failed: predicted: {PAGE_ERROR} (log: results/logs/reports/predicted.log" in said
    ran = re.findall(r"^(?:local)?(?:rule|checkpoint) (\w+):", said, re.M)
    assert sorted(ran) == ["all", "index", "pack", "report_notebook"], ran  # the others stand

    index = unescape((results / "index.html").read_text())
    for name in REPORTS:
        linked = f"href='reports/{name}.html'" in index
        assert linked == (name != "predicted"), name
        if name != "predicted":
            assert (results / "reports" / f"{name}.html").read_bytes() == (
                study / "results" / "reports" / f"{name}.html"
            ).read_bytes()
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


def test_report_zip_works_offline(study, tmp_path):
    """In `snakemake --report report.zip`: a caption of its own per report, the index with
    every file it links to (its links resolve inside the zip), the tables packed, and every
    image described by its alternative text."""
    from reports.pack import local_links

    done = snakemake(study, "--cores", "1", "--report", str(tmp_path / "report.zip"), *CONFIG)
    assert done.returncode == 0, done.stderr[-2000:]
    with zipfile.ZipFile(tmp_path / "report.zip") as packed:
        names = set(packed.namelist())
        page = packed.read(next(n for n in names if n.endswith("report/report.html"))).decode()
        index = next(n for n in names if n.endswith("/index.html") and "/data/raw/" in n)
        pages = {n: packed.read(n).decode() for n in names if n.endswith(".html") and "/data/raw/" in n}
    assert {Path(n).name for n in names} >= {f"{r}.html" for r in REPORTS} | {"index.html"}
    captions = re.findall(r'"caption": "<p><strong>([^<]+)</strong>', page)
    assert len(set(captions)) == len(REPORTS), captions
    assert "The study's landing page" in page

    beside = Path(index).parent
    links = local_links(pages[index])
    assert len(links) > len(REPORTS) + 2 * 25  # reports, tables, a record and a log per point
    assert [link for link in links if (beside / link).as_posix() not in names] == []
    for table in ("metrics.csv", "metrics.parquet", "stages.csv", "build.csv", "model/predictions.csv"):
        assert (beside / table).as_posix() in names, table

    placeholder = "No description has been provided for this image"
    for name, html in pages.items():
        for image in re.findall(r"<img [^>]*>", html):
            alt = re.search(r'alt="([^"]*)"', image)
            assert alt and alt.group(1).startswith("Figure") and placeholder not in image, name
    assert sum(html.count("<img ") for html in pages.values()) >= 2 * len(REPORTS)
    for log in (study / "results" / "logs" / "reports").glob("*.html.log"):
        assert "Alternative text is missing" not in log.read_text(), log.name


# The budget's estimate held against the study it estimates: here, where the study runs.


def job_stats(output: str) -> dict[str, int]:
    """The jobs a run started, rule → jobs, from the header line of each job in its output
    (the first "Job stats" table lacks the jobs a checkpoint adds once it has run)."""
    started = re.findall(r"^(?:local)?(?:rule|checkpoint) (\w+):$", output, re.M)
    return {rule: started.count(rule) for rule in dict.fromkeys(started) if rule != "all"}


def idle_share(load: dict) -> float:
    """The share of the machine's CPUs the other processes left the study (1 unmeasured)."""
    if load["verdict"] == "unknown":
        return 1.0
    return max(0.0, 1 - load["others_cpus"] / load["cpus"])


def test_the_ci_estimate_holds_against_the_ci_study(study):
    """The budget rule run where the ci study ran (the study fixture records its wall time):
    its estimate of that study, from this machine's figures measured now, within a factor of
    1.5 of what the study took, with every rule's jobs counted as the run had them. The
    estimate is for an idle machine; the study ran beside the other tests, so the lower
    bound is the study's time on the CPUs they left it (where the study's jobs ran side by
    side it would have been that much faster alone; a chain of one job at a time, no faster)."""
    done = snakemake(
        study, "budget", "--forcerun", "budget", "--cores", "2",
        "--configfile", "config/config.yaml", "config/presets/ci.yaml", timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads((study / "results" / "budget.json").read_text())
    took = float((study / "study-seconds.txt").read_text())
    load = json.loads((study / "study-load.json").read_text())
    left = idle_share(load)
    said = "\n".join(budget.summary(found)) + f"\nthe study took {took:.0f} s; {load['reason']}"
    print(said)  # shown with -rA: the estimate beside the run, rule by rule
    assert {rule: e["jobs"] for rule, e in found["rules"].items()} == job_stats(
        (study / "snakemake-output.txt").read_text()
    ), said
    assert took * left / 1.5 <= found["total_s"] <= 1.5 * took, said
    assert found["points"] == 37 and found["device"] == "cpu"


# --- leaves (on copies of the shared ci study, here so that it runs once) ---
# Every leaf of a study checked against its own schema (kernels/io/*.schema.json): one of the
# wrong shape, or saying something else than its file name, is damaged. A dry run names the
# damage and changes nothing; a real run sets it aside and makes it again, and its closing line
# counts the records on disk. Reports and the index are leaves too. All on copies of the shared
# ci study (conftest.study).

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
    stray = "names the point triton_flash/float16/B1-H1-T100-d16-causal-bm16-bn32-normal, which"
    assert f"{stray} is not built by triton_flash_float16_bm16-bn32/T16-d16" in said
    assert {path: path.read_bytes() for path in results.rglob("*") if path.is_file()} == before
    planned = jobs_planned(dry.stdout)  # what the real run will do: the dry run plans it
    assert planned["env"] == planned["build"] == planned["validate"] == 1
    assert planned["measure"] == 1 + 1 + 3  # the record, the deleted one, the build's three
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
    assert f"Damaged, set aside as results/{RECORD}.damaged to be made again: results/{RECORD}: " in said
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


def test_the_run_ends_with_the_summary_and_the_index_not_the_input_list(study):
    output = (study / "snakemake-output.txt").read_text()
    end = output[output.rindex("localrule all:") :]
    assert re.match(r"localrule all:\n    input: \d+ files, every leaf of the study", end), end[:300]
    assert "results/points/" not in end and "reason:" not in end  # no list of paths
    # (beside the suite's other tests, a line may say how many points were timed while busy)
    busy = r"(attnio: \d+ of them timed while other processes held CPUs .*\n)?"
    assert re.search(rf"^attnio: \d+ points: .*\n{busy}attnio: reports: results/index.html$", end, re.M)


# --- a full disk (on a copy of the shared ci study, results/ a small tmpfs of the test's own) ---


def test_a_full_disk_is_named_nothing_partial_is_kept_and_the_next_run_recovers(study, tmp_path):
    """With two HTML pages and the index to make again and no room where results/ is, the
    run fails saying so (its jobs' logs may have had no room either), leaves no temporary
    file and no leaf cut short under its final name (a dry run finds no damage); with room
    again the next run makes what is missing and nothing is left to do."""
    copy = tmp_path / "copy"
    shutil.copytree(study, copy, symlinks=True)
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
