"""The HTML reports, looked at as a person would: rendered in headless Chromium, every image
loaded, no cell in error, the same figures twice from the same metrics, and warnings when
points did not run."""

import base64
import json
import re
import shutil
import subprocess
import sys

import nbformat
import pandas as pd
import pytest
from workflow_run import ROOT, env

pytestmark = pytest.mark.xdist_group("study")  # same worker as the ci study
REPORTS = ["storage", "traffic", "tile_softmax", "performance"]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
PROBE = ("<script>window.addEventListener('load', () => { const imgs = [...document.images];"
         " document.title = 'IMAGES ' + imgs.length + ' ' +"
         " imgs.filter(i => i.complete && i.naturalWidth > 0).length; });</script>")


def chromium(*args, user_dir):
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                           "--no-first-run", "--disable-background-networking",
                           "--disable-component-update", "--disable-sync",
                           f"--user-data-dir={user_dir}", *args],
                          capture_output=True, text=True, timeout=120)


def test_every_report_and_the_index_exist(study):
    results = study / "results"
    index = (results / "index.html").read_text()
    for name in REPORTS:
        assert (results / "reports" / f"{name}.html").stat().st_size > 10_000
        assert f"reports/{name}.html" in index
    assert "Every validation passed and every point ran." in index


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
    dom = chromium("--dump-dom", "--virtual-time-budget=10000", probe.as_uri(),
                   user_dir=tmp_path / "profile-dom")
    title = re.search(r"<title>IMAGES (\d+) (\d+)</title>", dom.stdout)
    assert title, dom.stderr[-2000:]
    assert int(title.group(1)) == int(title.group(2)) == expected
    if name != "index":
        assert expected >= 2
    shot = tmp_path / "shot.png"
    chromium(f"--screenshot={shot}", "--window-size=1200,2400", "--hide-scrollbars",
             source.as_uri(), user_dir=tmp_path / "profile-shot")
    assert shot.stat().st_size > 20_000  # a rendered page, not a blank one


def render(template, metrics, stages, env_json, out_dir):
    notebook = out_dir / "out.ipynb"
    done = subprocess.run([sys.executable, "-m", "papermill", str(template), str(notebook),
                           "-k", "python3", "-p", "metrics", str(metrics), "-p", "stages",
                           str(stages), "-p", "env", str(env_json)],
                          capture_output=True, text=True, timeout=300, env=env(), cwd=out_dir)
    assert done.returncode == 0, done.stderr[-3000:]
    html = subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "html",
                           "--no-input", "--stdout", str(notebook)], capture_output=True,
                          text=True, timeout=300, env=env(), check=True).stdout
    return nbformat.read(notebook, as_version=4), html


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
    nb1, html1 = render(template, mine, results / "stages.csv", results / "env.json", first_dir)
    _, html2 = render(template, mine, results / "stages.csv", results / "env.json", second_dir)
    assert images(html1) and images(html1) == images(html2)
    assert "not every point ran" in html1 and "a test&#39;s own failure" in html1 or \
        "a test's own failure" in html1
    summary = next(c for c in nb1.cells if "run_summary" in c.source)
    text = json.dumps(summary.outputs)
    assert f"{len(metrics)} points" in text and "1 failed" in text
