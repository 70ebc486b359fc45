"""results/index.html: links to every report and what ran where, with a visible warning
when a validation failed or a point was skipped or failed."""

from __future__ import annotations

import html
import json
import os
from pathlib import Path

import pandas as pd

from kernels.io.atomic import write_text_atomic
from reports.pages.common import device_label, nonfinite

STYLE = """body{font-family:system-ui,sans-serif;max-width:60em;margin:2em auto;padding:0 1em;
color:#222}table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;
padding:.3em .6em;text-align:left}.warn{background:#fff3cd;border:2px solid #d39e00;
padding:1em;margin:1em 0}.ok{background:#e8f5e9;border:1px solid #66bb6a;padding:1em}
code{background:#f4f4f4;padding:0 .2em}"""


def _table(frame: pd.DataFrame) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row) + "</tr>"
        for row in frame.itertuples(index=False)
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def validation_summary(paths) -> pd.DataFrame:
    rows = []
    for path in paths:
        results = json.loads(Path(path).read_text())
        unexpected = [r for r in results if not r["as_expected"]]
        first = results[0] if results else {}
        rows.append(
            {
                "impl": first.get("impl", Path(path).stem),
                "dtype": first.get("dtype"),
                "blocks": f"{first.get('block_m')}×{first.get('block_n')}" if first.get("block_m") else "-",
                "checks": len(results),
                "unexpected": len(unexpected),
                "verdict": "passed" if results and not unexpected else "FAILED",
            }
        )
    return pd.DataFrame(rows)


def build_summary(builds: pd.DataFrame) -> pd.DataFrame:
    """Per target: variants built, and those that cannot run there."""
    if builds.empty:
        return pd.DataFrame({"target": ["none"], "variants": [0], "cannot run": [0]})
    return (
        builds.assign(bad=builds["status"] != "ok")
        .groupby("target")
        .agg(variants=("variant", "size"), **{"cannot run": ("bad", "sum")})
        .reset_index()
    )


def title(notebook: str | os.PathLike) -> str:
    """A report's title: the first heading of its notebook."""
    for cell in json.loads(Path(notebook).read_text())["cells"]:
        if cell["cell_type"] == "markdown":
            for line in "".join(cell["source"]).splitlines():
                if line.startswith("# "):
                    return line.removeprefix("# ").strip()
    return Path(notebook).stem


def render(
    env: dict, metrics: pd.DataFrame, validation: pd.DataFrame, reports: dict[str, str], builds: pd.DataFrame
) -> str:
    warnings = []
    failed = validation[validation["verdict"] != "passed"]
    if not failed.empty:
        warnings.append(
            f"{len(failed)} validation(s) failed: "
            + ", ".join(f"{r.impl} {r.dtype}" for r in failed.itertuples())
            + ". Their points were not measured."
        )
    broken = nonfinite(metrics)
    if not broken.empty:
        warnings.append(
            f"Finding: {len(broken)} point(s) returned non-finite outputs where the float64 "
            "definition is finite ("
            + ", ".join(f"{r.impl} {r.dtype} T={r.tokens} inputs={r.inputs}" for r in broken.itertuples())
            + "); the Storage and Tile-softmax reports explain why."
        )
    for status in ("skipped", "failed"):
        bad = metrics[metrics["status"] == status]
        for reason, group in bad.groupby("reason"):
            warnings.append(f"{len(group)} point(s) {status}: {reason}")
    banner = (
        "<div class='warn'><strong>Warning: not everything ran.</strong><ul>"
        + "".join(f"<li>{html.escape(w)}</li>" for w in warnings)
        + "</ul></div>"
        if warnings
        else "<div class='ok'>Every validation passed and every point ran.</div>"
    )
    versions = env.get("versions", {})
    git = env.get("git") or {}
    commit = f"{git.get('commit')}{' (uncommitted changes)' if git.get('dirty') else ''}"
    facts = pd.DataFrame(
        {
            "": ["device", "python / torch / triton", "git commit", "config hash", "points"],
            "value": [
                device_label(env),
                f"{versions.get('python')} / {versions.get('torch')} / {versions.get('triton')}",
                commit,
                env.get("config_hash"),
                ", ".join(f"{n} {s}" for s, n in metrics["status"].value_counts().items()),
            ],
        }
    )
    links = "".join(
        f"<li><a href='reports/{name}.html'>{html.escape(text)}</a></li>" for name, text in reports.items()
    )
    config = html.escape(json.dumps(env.get("config"), indent=1))
    return (
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>attnio results"
        f"</title><style>{STYLE}</style></head><body><h1>attnio: why attention is hard to "
        f"optimize</h1>{banner}<h2>Reports</h2><ul>{links}</ul><h2>What ran where</h2>"
        f"{_table(facts)}<h2>Build</h2>{_table(build_summary(builds))}"
        f"<h2>Validation</h2>{_table(validation)}<p>Tables: "
        f"<a href='metrics.csv'>metrics.csv</a> (a row per point), "
        f"<a href='stages.csv'>stages.csv</a> (a row per point and stage), "
        f"<a href='build.csv'>build.csv</a> (a row per kernel variant and target).</p>"
        f"<h2>Configuration</h2><pre>{config}</pre></body></html>\n"
    )


def write(
    env_path, metrics_path, validation_paths, notebooks: list[str], builds_path, out: str | os.PathLike
) -> None:
    """The index for the executed report ``notebooks`` (results/reports/<name>.ipynb)."""
    env = json.loads(Path(env_path).read_text())
    metrics = pd.read_parquet(metrics_path)
    builds = pd.read_csv(builds_path)
    reports = {Path(path).stem: title(path) for path in notebooks}
    page = render(env, metrics, validation_summary(validation_paths), reports, builds)
    write_text_atomic(out, page)
