"""The Snakemake pipeline, run for real on the ci preset, and the HTML reports it renders.
The shared study (conftest.study) is read here, and every Snakemake run inside it is here,
one after another; the tests that change a copy of it are in test_workflow_copies.py."""

import base64
import json
import re
import shutil
import subprocess
import sys
import zipfile
from html import escape, unescape
from pathlib import Path

import nbformat
import pandas as pd
import pytest
import yaml
from workflow_run import ROOT, env, snakemake, worker_processes

from kernels.models import budget
from kernels.models.cost import summarize
from kernels.planning.point import Point
from kernels.planning.sweep import masks_of
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
    assert len(table) == sum(len(g["impls"]) * len(g["tokens"]) * len(masks_of(g)) for g in grids)
    assert set(table["impl"]) == {impl for g in grids for impl in g["impls"]}
    assert set(table["tokens"]) == {t for g in grids for t in g["tokens"]}
    # every point with normal inputs ran, but the SDPA backend a CPU lacks (tested below)
    normal = table[(table["inputs"] == "normal") & (table["impl"] != "sdpa_efficient")]
    assert (normal["status"] == "ok").all(), normal[["impl", "status", "reason"]]
    modelled_kernels = set()
    for row in normal.itertuples():
        point = Point(
            row.impl,
            row.batch,
            row.heads,
            row.tokens,
            row.head_dim,
            row.dtype,
            row.mask,
            None if pd.isna(row.block_m) else int(row.block_m),
            None if pd.isna(row.block_n) else int(row.block_n),
            query_tokens=int(row.query_tokens),
            kv_heads=int(row.kv_heads),
        )
        model = summarize(point)
        modelled_kernels |= {stage["kernel"] for stage in model["stages"]}
        assert row.bytes_S == model["bytes_S"] and row.flops == model["flops"]
        if row.impl.startswith("triton_"):
            assert row.traffic_counted_bytes == row.traffic_model_bytes == model["traffic_model_bytes"]
            assert pd.isna(row.time_ms)
        else:
            assert row.time_ms > 0
    stages = pd.read_csv(study / "results" / "stages.csv")
    # each kernel of the models (the materialized, S-only, fused and split-KV ones), none else
    assert set(stages["kernel"]) == modelled_kernels >= {"scores", "stats", "attention_fwd", "split_kv_merge"}
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


def test_the_ceilings_are_timed_with_the_studys_timing(study):
    """Config timing reaches the ceilings job as it reaches the points: the ci preset's rates
    are sampled a tenth as long as a default study's (kernels.spec.rate_seconds)."""
    [command] = {
        json.loads(path.read_text())["shellcmd"]
        for path in (study / ".snakemake" / "metadata").rglob("*")
        if path.is_file() and json.loads(path.read_text())["rule"] == "ceilings"
    }
    assert "--cpu-seconds 0.3 --stage-seconds 0.1 " in command, command


def test_no_job_runs_beside_a_timed_one(study):
    jobs = job_intervals(study)
    timed = [j for j in jobs if is_timed(j)]
    # ceilings, ci's torch points (float16, float32, large, decode), its torch backward points,
    # and its torch points under masks beyond causal (forward and backward)
    assert len(timed) == 1 + 8 + 4 + 1 + 2 + 2 + 4 + 4
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
    table = pd.read_csv(study / "results" / "backward.csv")
    table = table[table["mask"].isin(["causal", "full"])].set_index("impl")  # masks: tested below
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


def test_the_masked_points_ran_forward_and_backward_counted_as_modelled(study):
    """The ci preset's masks beyond causal: every forward ran, its output within the float64
    check, the Triton ones counted at the model's bytes; the fused and the materialized
    backward ran under each mask, counted likewise; the Masks page and the index state what
    the mask kept."""
    forward = pd.read_csv(study / "results" / "metrics.csv")
    masked = forward[~forward["mask"].isin(["causal", "full"])]
    assert set(masked["mask"]) == {"window:20", "documents:30+50+20"}
    assert (masked["status"] == "ok").all(), masked[["impl", "status", "reason"]]
    triton = masked[masked["impl"].str.startswith("triton")]
    assert len(triton) == 4 and (triton["traffic_counted_bytes"] == triton["traffic_model_bytes"]).all()
    backward = pd.read_csv(study / "results" / "backward.csv")
    backward = backward[~backward["mask"].isin(["causal", "full"])].set_index("impl")
    assert (backward["status"] == "ok").all(), backward[["status", "reason"]]
    triton = backward.loc[["triton_naive", "triton_flash"]]
    assert len(triton) == 4 and (triton["traffic_counted_bytes"] == triton["traffic_model_bytes"]).all()
    page = re.sub(r"<[^>]+>", "", unescape((study / "results" / "reports" / "masks.html").read_text()))
    kept = sum(min(i + 1, 20) for i in range(100)) / 100**2  # query i sees keys i − 20 < j ≤ i
    assert f"window:20 at T = 100 (100 queries) keeps {kept:.1%} of the scores" in page
    assert "Under documents:30+50+20 at T = 100" in unescape((study / "results" / "index.html").read_text())


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
    assert len(files) == 11  # 7 implementations in float16 (split-KV among them), 4 torch paths in float32
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
    dry = snakemake(study, "-n", "-p", "--cores", "2", "--configfile", DEFAULT, str(changed))
    assert dry.returncode == 0, dry.stderr[-2000:]
    stats = dict(re.findall(r"^(\w+)\s+(\d+)$", dry.stdout, re.M))
    assert stats["measure"] == "12"  # 6 impls × causal and not, at the new T only
    assert "validate" not in stats  # env reruns: it records the config hash
    # the preset's timing windows reach every measure command
    commands = re.findall(r"^Shell command: python -m kernels measure .*$", dry.stdout, re.M)
    windows = "--cpu-seconds {cpu_seconds} --stage-seconds {stage_seconds}".format(**config["timing"])
    assert len(commands) == 12 and all(windows in c for c in commands), commands[:1]


# --- the HTML reports, looked at as a person would ---------------------------------------

REPORTS = sorted(path.stem for path in (ROOT / "reports").glob("*.ipynb"))
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# Every page and the index, each in a frame of one probe page (srcdoc: the frames share the
# probe's origin, so its script reads their documents), read in one browser launch once all
# have loaded: per page its images, those decoded, those laid out with a visible box, and the
# height it takes (a page drawn blank or hidden takes none).
PROBE = """<script>
window.addEventListener('load', () => {
  const seen = {};
  for (const frame of document.querySelectorAll('iframe')) {
    const doc = frame.contentDocument, imgs = [...doc.images];
    const shown = imgs.filter(i => { const r = i.getBoundingClientRect();
      return r.width > 0 && r.height > 0
        && frame.contentWindow.getComputedStyle(i).visibility === 'visible'; });
    seen[frame.name] = [imgs.length, imgs.filter(i => i.complete && i.naturalWidth > 0).length,
      shown.length, Math.round(doc.body.getBoundingClientRect().height)];
  }
  document.title = 'SEEN ' + JSON.stringify(seen);
});
</script>"""


def in_frames(pages: dict[str, str]) -> str:
    """One HTML page holding each of ``pages`` (name → HTML) in a frame of its own."""
    frames = "".join(
        f'<iframe name="{name}" width="1200" height="2400" srcdoc="{escape(page)}"></iframe>'
        for name, page in pages.items()
    )
    return f"<!DOCTYPE html><html><head><title>probe</title></head><body>{frames}{PROBE}</body></html>"


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
    # the index's list of the study's records is whole: none of its own jobs' is stale
    left = pd.read_csv(results / "benchmarks_left_out.csv")
    assert left.empty, left.to_dict("records")[:3]
    made = {p.relative_to(results).as_posix() for p in (results / "benchmarks").rglob("*.tsv")}
    assert set(pd.read_csv(results / "benchmarks.csv")["benchmark"]) == made - {
        "benchmarks/index.tsv",
        "benchmarks/pack.tsv",
    }


@pytest.mark.parametrize("name", REPORTS)
def test_executed_notebooks_have_no_errors(study, name):
    notebook = nbformat.read(study / "results" / "reports" / f"{name}.ipynb", as_version=4)
    outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    html = (study / "results" / "reports" / f"{name}.html").read_text()
    assert "Traceback" not in html
    assert "import pandas" not in html  # code cells hidden by default


@pytest.fixture(scope="module")
def seen_in_a_browser(study, tmp_path_factory) -> dict[str, list[int]]:
    """Every report and the index as headless Chromium laid them out (one launch for all):
    name → [images, decoded, shown, height in pixels]."""
    results = study / "results"
    pages = {name: (results / "reports" / f"{name}.html").read_text() for name in REPORTS}
    pages["index"] = (results / "index.html").read_text()
    folder = tmp_path_factory.mktemp("browser")
    probe = folder / "probe.html"
    probe.write_text(in_frames(pages))
    dom = chromium(
        "--dump-dom", "--virtual-time-budget=10000", "--window-size=1300,2500", probe.as_uri(),
        user_dir=folder / "profile",
    )  # fmt: skip
    found = re.search(r"<title>SEEN (.*)</title>", dom.stdout)
    assert found, dom.stderr[-2000:]
    return json.loads(unescape(found.group(1)))


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (apt-get install chromium)")
@pytest.mark.parametrize("name", REPORTS + ["index"])
def test_renders_in_a_browser_with_every_image(study, seen_in_a_browser, name):
    source = study / "results" / ("index.html" if name == "index" else f"reports/{name}.html")
    expected = len(re.findall(r"<img ", source.read_text()))
    images, decoded, shown, height = seen_in_a_browser[name]
    assert images == decoded == shown == expected
    if name != "index":
        assert expected >= 2
    assert height > 500  # a page laid out, not a blank one


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


def test_reports_follow_the_data(study, tmp_path):
    """Metrics of our own, one point marked failed: the report says that a point failed.
    (That a page renders the same bytes twice from the same tables: test_workflow_copies.py,
    the page rendered again without torch.)"""
    results = study / "results"
    metrics = pd.read_parquet(results / "metrics.parquet")
    metrics.loc[0, ["status", "reason"]] = ["failed", "out of memory: a test's own failure"]
    mine = tmp_path / "metrics.parquet"
    metrics.to_parquet(mine, index=False)
    first_dir = tmp_path / "a"
    first_dir.mkdir()
    template = ROOT / "reports" / "storage.ipynb"
    parameters = {
        "metrics": mine,
        "env": results / "env.json",
        "backward": results / "backward.csv",
        "sizes": results / "model" / "matrix_sizes.csv",
    }
    nb1, html1 = render(template, parameters, first_dir)
    assert images(html1)
    # the page says not every point ran and links the index's warnings (which name the
    # reasons) in one line instead of repeating them
    assert "not every point ran" in html1 and "../index.html#warnings" in html1
    assert "a test&#39;s own failure" not in html1 and "a test's own failure" not in html1
    summary = next(c for c in nb1.cells if "page.load(" in c.source)
    text = json.dumps(summary.outputs)
    backward = pd.read_csv(results / "backward.csv")
    failed = int((metrics["status"] == "failed").sum() + (backward["status"] == "failed").sum())
    every = f"{len(metrics) + len(backward)} points ({len(metrics)} forward, {len(backward)} backward)"
    assert every in text and f"{failed} failed" in text  # the study's own failures and the test's


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


@pytest.mark.integration  # make integration, which CI runs after make test
def test_the_budget_plans_the_jobs_the_ci_study_ran(study):
    """The budget rule run where the ci study ran: its plan, Snakemake's dry run with every job
    forced and the pages the checkpoint adds, holds every rule's jobs as the run had them, each
    costed from the run's own benchmark record (no calibration). Whether its time is right is a
    benchmark's question, asked on an idle machine (`make estimate-check`,
    scripts/estimate_check.py): beside the other tests no time can be held to a bound."""
    done = snakemake(
        study, "budget", "--forcerun", "budget", "--cores", "2",
        "--configfile", "config/config.yaml", "config/presets/ci.yaml", timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads((study / "results" / "budget.json").read_text())
    said = "\n".join(budget.summary(found))
    print(said)  # shown with -rA: the estimate rule by rule
    assert {rule: e["jobs"] for rule, e in found["rules"].items()} == job_stats(
        (study / "snakemake-output.txt").read_text()
    ), said
    records = len(list((study / "results" / "points").rglob("*.json")))  # one per point the run measured
    assert found["points"] == records and found["device"] == "cpu" and found["total_s"] > 0, said
    assert found["calibrated_for"] == 0 and found["left_out"] == [], said
    assert all(e["basis"] == {"benchmark": e["jobs"]} for e in found["rules"].values()), said


def test_the_run_ends_with_the_summary_and_the_index_not_the_input_list(study):
    output = (study / "snakemake-output.txt").read_text()
    end = output[output.rindex("localrule all:") :]
    assert re.match(r"localrule all:\n    input: \d+ files, every leaf of the study", end), end[:300]
    assert "results/points/" not in end and "reason:" not in end  # no list of paths
    # (beside the suite's other tests, a line may say how many points were timed while busy)
    busy = r"(attnio: \d+ of them timed while other processes held CPUs .*\n)?"
    assert re.search(rf"^attnio: \d+ points: .*\n{busy}attnio: reports: results/index.html$", end, re.M)
