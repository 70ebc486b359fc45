"""results/index.html: links to every report that rendered and names each that did not (its
first error line, its log), and what ran where, with a visible warning when a page did not
render, a validation failed or a point was skipped or failed."""

from __future__ import annotations

import html
import json
import os
from pathlib import Path

import pandas as pd

from kernels import masks
from kernels.io.atomic import write_text_atomic
from kernels.io.benchmarks import DAMAGED, STALE, WORKER
from kernels.io.tables import POINT_KEY as TABLE_KEY
from reports.pages import decode, handoff_text, inputs, outcome
from reports.pages import masks as masks_page
from reports.pages import training as training_page
from reports.pages.common import (
    SORTABLE_SCRIPT,
    busy,
    busy_listed,
    causal_or_full,
    device_label,
    names,
    nonfinite,
    number,
    square,
    status_counts,
    why_nothing_ran,
)
from reports.pages.paths import tile_local_path, triton_path

STYLE = """body{font-family:system-ui,sans-serif;max-width:60em;margin:2em auto;padding:0 1em;
color:#222}table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;
padding:.3em .6em;text-align:left}.warn{background:#fff3cd;border:2px solid #d39e00;
padding:1em;margin:1em 0}.ok{background:#e8f5e9;border:1px solid #66bb6a;padding:1em}
code{background:#f4f4f4;padding:0 .2em}tr.failed td,li.failed{background:#fdecea}
tr.skipped td{background:#fff8e1}.findings li{margin:.4em 0}.when{color:#555}"""


def _table(frame: pd.DataFrame) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row) + "</tr>"
        for row in frame.itertuples(index=False)
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _verdict(results: list[dict], unexpected: list[dict]) -> str:
    if not results or unexpected:
        return "FAILED"
    if all(r["verdict"] == "unavailable" for r in results):
        return "unavailable here"
    unfit = sum(r["verdict"] == "unfit" for r in results)
    if unfit:
        return f"passed ({unfit} left out: their launches do not fit this GPU; see the log)"
    return "passed"


def validation_summary(paths) -> pd.DataFrame:
    rows = []
    for path in paths:
        results = inputs.read("validation", path)
        unexpected = [r for r in results if not r["as_expected"]]
        first = results[0] if results else {}
        rows.append(
            {
                "impl": first.get("impl", Path(path).stem),
                "dtype": first.get("dtype"),
                "blocks": f"{first.get('block_m')}×{first.get('block_n')}" if first.get("block_m") else "-",
                "checks": len(results),
                "unexpected": len(unexpected),
                "verdict": _verdict(results, unexpected),
            }
        )
    return pd.DataFrame(rows, columns=["impl", "dtype", "blocks", "checks", "unexpected", "verdict"])


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


STATUS_ORDER = {"failed": 0, "skipped": 1, "ok": 2}  # what needs a reader's eye first
# a point as the workflow names it (the tables also key on the device, which files lack)
POINT_KEY = [k for k in TABLE_KEY if k != "device"]


def _link(href: str, text: str) -> str:
    return f"<a href='{html.escape(href)}'>{html.escape(text)}</a>"


def _reason(r) -> str:
    """A point's reason, or for one timed on a busy machine how busy it was."""
    if isinstance(r.reason, str):
        return r.reason
    if str(getattr(r, "contention_verdict", None)) == "busy":
        return f"timed on a busy machine: {r.contention_reason}"
    return ""


def with_inference_dims(frame: pd.DataFrame) -> pd.DataFrame:
    """A table written before the inference dimensions holds the square problem, and one
    written before masks the mask its causal column says."""
    unmasked = frame["causal"].map(lambda causal: masks.from_causal(bool(causal)).spelled())
    return frame.assign(
        query_tokens=frame.get("query_tokens", frame["tokens"]),
        kv_heads=frame.get("kv_heads", frame["heads"]),
        mask=frame["mask"].fillna(unmasked) if "mask" in frame else unmasked,
    )


def points_table(metrics: pd.DataFrame, files: list[dict]) -> str:
    """Every planned point: what it is, its status and reason, and links to its record and
    its log (paths as the workflow wrote them, relative to results/)."""
    where = pd.DataFrame(files) if files else pd.DataFrame(columns=[*POINT_KEY, "record", "log"])
    for column in ("block_m", "block_n", "num_splits"):  # absent from tables written before num_splits
        where[column] = pd.array(where.get(column, pd.Series(pd.NA, index=where.index)), dtype="Int64")
        found = metrics.get(column, pd.Series(pd.NA, index=metrics.index))
        metrics = metrics.assign(**{column: pd.array(found, dtype="Int64")})
    # a forward and a backward point share every other field; records from before passes are forward's
    where = where.assign(
        **{"pass": where.get("pass", pd.Series("forward", index=where.index)).fillna("forward")}
    )
    metrics = metrics.assign(
        **{"pass": metrics.get("pass", pd.Series("forward", index=metrics.index)).fillna("forward")}
    )
    metrics, where = with_inference_dims(metrics), with_inference_dims(where)
    rows = metrics.merge(where, on=[*POINT_KEY, "pass"], how="left").rename(columns={"pass": "direction"})
    rows = rows.assign(_order=rows["status"].map(STATUS_ORDER).fillna(len(STATUS_ORDER)))
    rows = rows.sort_values(["_order", "impl", "dtype", "tokens", "causal", "inputs"])
    head = [
        "impl",
        "pass",
        "dtype",
        "T",
        "d",
        "B×H",
        "causal",
        "inputs",
        "blocks",
        "status",
        "reason",
        "files",
    ]
    body = []
    for r in rows.itertuples(index=False):
        blocks = f"{r.block_m}×{r.block_n}" if pd.notna(r.block_m) else "–"
        blocks += f", {r.num_splits} splits" if pd.notna(r.num_splits) else ""
        links = " · ".join(
            _link(path, label)
            for path, label in ((r.record, "record"), (r.log, "log"))
            if isinstance(path, str)
        )
        cells = [
            r.impl,
            r.direction,
            r.dtype,
            f"{r.tokens:,}",
            r.head_dim,
            f"{r.batch}×{r.heads}",
            r.causal,
            r.inputs,
            blocks,
        ]
        body.append(
            f"<tr class='{html.escape(str(r.status))}'>"
            + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells)
            + f"<td><strong>{html.escape(str(r.status))}</strong></td>"
            + f"<td>{html.escape(_reason(r))}</td>"
            + f"<td>{links}</td></tr>"
        )
    header = "".join(f"<th>{h}</th>" for h in head)
    return (
        f"<table class='attnio-sortable'><thead><tr>{header}</tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table>"
    )


def run_span(metrics: pd.DataFrame) -> str:
    """When the points were measured, from the records' own clocks (UTC)."""
    started = pd.to_datetime(metrics["started_at"], utc=True, errors="coerce").dropna()
    finished = pd.to_datetime(metrics["finished_at"], utc=True, errors="coerce").dropna()
    if started.empty or finished.empty:
        return "unknown"
    first, last = started.min(), finished.max()
    minutes = (last - first).total_seconds() / 60
    return (
        f"{first:%Y-%m-%d %H:%M} to {last:%Y-%m-%d %H:%M} UTC "
        f"({minutes:,.1f} min from the first point to the last)"
    )


def sweep_table(config: dict) -> pd.DataFrame:
    """The sweep as one row per grid, lists written as values."""
    sweep = config.get("sweep") or []
    grids = sweep if isinstance(sweep, list) else [sweep]

    def shown(value):
        if isinstance(value, list):
            return ", ".join(
                "×".join(map(str, v))
                if isinstance(v, list)
                else f"{v:,}"
                if isinstance(v, int) and not isinstance(v, bool)
                else str(v)
                for v in value
            )
        return "–" if value is None else str(value)

    rows = [{"grid": i + 1, **{k: shown(v) for k, v in grid.items()}} for i, grid in enumerate(grids)]
    return pd.DataFrame(rows)


def settings_line(config: dict) -> str:
    """Every setting that is not the sweep, on one line."""

    def flat(prefix: str, value) -> list[str]:
        if isinstance(value, dict):
            return [item for k, v in value.items() for item in flat(f"{prefix}{k}.", v)]
        return [f"{prefix[:-1]} = {value}"]

    return "; ".join(item for k, v in config.items() if k != "sweep" for item in flat(f"{k}.", v))


def config_yaml(config: dict) -> str:
    try:
        import yaml

        return yaml.safe_dump(config, sort_keys=False, default_flow_style=None)
    except ImportError:  # the report stage runs without Snakemake's dependencies too
        return json.dumps(config, indent=1)


MIB = float(1 << 20)


def _largest(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[frame["tokens"] == frame["tokens"].max()] if len(frame) else frame


def _normal(metrics: pd.DataFrame) -> pd.DataFrame:
    return metrics[metrics["inputs"] == "normal"]


def finding_storage(metrics: pd.DataFrame) -> str | None:
    normal = _normal(metrics[metrics["status"] == "ok"])  # sizes of points that ran
    stored = _largest(normal[normal["bytes_S"] > 0])
    if stored.empty:
        return None
    two_bytes = stored[stored["dtype"].isin(["float16", "bfloat16"])]  # the seed's case first
    r = (two_bytes if len(two_bytes) else stored).sort_values("bytes_S").iloc[-1]
    return (
        f"At T = {r['tokens']:,} ({r['dtype']}, B={r['batch']}, H={r['heads']}), S and P take "
        f"{number(r['bytes_S'] / MIB)} MiB each, {number(2 * r['bytes_S'] / MIB)} MiB together: "
        "doubling T quadruples them."
    )


def _pair(
    metrics: pd.DataFrame, a: str | None, b: str | None, column: str
) -> tuple[pd.Series, pd.Series] | None:
    """The rows of implementations a and b at the largest T where both have a value in column,
    same shape, not causal where possible (None where the study ran either not)."""
    key = ["batch", "heads", "tokens", "head_dim", "dtype", "causal", "block_m", "block_n"]
    data = _normal(metrics).dropna(subset=[column])
    left, right = data[data["impl"] == a], data[data["impl"] == b]
    both = left.merge(right, on=key, suffixes=("_a", "_b"))
    if both.empty:
        return None
    both = _largest(both).sort_values("causal")
    row = both.iloc[0]
    pick = lambda side: pd.Series({k: row[k] for k in key} | {column: row[f"{column}_{side}"]})  # noqa: E731
    return pick("a"), pick("b")


def finding_traffic(metrics: pd.DataFrame) -> str | None:
    materialized, s_only, fused = (triton_path(stores, metrics) for stores in ("SP", "S", "none"))
    pair = _pair(metrics, materialized, fused, "traffic_model_bytes")
    if pair is None:
        return None
    naive, fused = pair
    found = (
        f"At T = {naive['tokens']:,} (d={naive['head_dim']}, {naive['dtype']}), the materialized "
        f"kernels load and store {number(naive['traffic_model_bytes'] / MIB)} MiB, the fused kernel "
        f"{number(fused['traffic_model_bytes'] / MIB)} MiB: "
        f"{number(naive['traffic_model_bytes'] / fused['traffic_model_bytes'])}× as much."
    )
    between = _pair(metrics, materialized, s_only, "traffic_model_bytes")
    if between is None or between[0]["tokens"] != naive["tokens"] or between[0]["causal"] != naive["causal"]:
        return found
    s_only = between[1]["traffic_model_bytes"]
    return (
        f"{found} Storing S but never P moves {number(s_only / MIB)} MiB there, "
        f"{number(s_only / naive['traffic_model_bytes'] * 100)} % of the materialized kernels' bytes."
    )


def finding_tile_softmax(metrics: pd.DataFrame) -> str | None:
    ran = metrics[metrics["status"] == "ok"]
    pair = _pair(ran, tile_local_path(metrics), triton_path("none", metrics), "max_abs_error")
    if pair is None:
        return None
    tile, fused = pair
    return (
        f"At T = {tile['tokens']:,} with {int(tile['block_n'])}-key tiles, a softmax done tile by "
        f"tile is off by up to {tile['max_abs_error']:.2g}; carrying the row statistics across "
        f"tiles (the fused kernel) brings it to {fused['max_abs_error']:.1e}."
    )


def finding_speed(metrics: pd.DataFrame, env: dict) -> str | None:
    native = "float32" if env.get("device") == "cpu" else None
    timed = _normal(metrics).dropna(subset=["speedup_vs_materialized"])
    timed = timed[(timed["impl"] != timed["twin"]) & (timed["dtype"] == native if native else True)]
    if timed.empty:
        return None
    r = _largest(timed).sort_values("causal").iloc[0]
    where = "this CPU" if env.get("device") == "cpu" else env.get("gpu_name") or "this GPU"
    case = ["tokens", "head_dim", "dtype", "causal", "inputs"]
    same = (metrics[case] == r[case]).all(axis=1)
    pair = metrics[metrics["impl"].isin([r["impl"], r["twin"]]) & same]
    marked = " (timed on a busy machine: see the warnings)" if not busy(pair).empty else ""
    return (
        f"On {where}, {r['impl']} ({r['dtype']}) runs {number(r['speedup_vs_materialized'])}× as fast "
        f"as {r['twin']} at T = {r['tokens']:,}, {'causal' if r['causal'] else 'not causal'} "
        f"({number(r['time_ms'])} ms per call){marked}."
    )


def _both_paths(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows of the shapes and lengths predicted for both the materialized and the fused
    path (a fused kernel that cannot launch there has no row of its own to compare)."""
    if rows.empty:
        return rows
    both = {"materialized", "fused"}
    paired = rows.groupby(["shape", "tokens"])["path"].transform(lambda paths: both <= set(paths))
    return rows[paired.astype(bool)]


def finding_prediction(predictions: pd.DataFrame | None) -> str | None:
    if predictions is None or predictions.empty:
        return None
    swept = predictions[predictions["in_sweep"].astype(bool)]
    swept = swept[swept["gpu"] == "H200"] if (swept["gpu"] == "H200").any() else swept
    rows = _both_paths(swept[swept["launch_reason"].isna()])
    if rows.empty:  # left out, saying why: no length at which both paths launch
        reasons = swept["launch_reason"].dropna()
        if reasons.empty:
            return None
        return (
            f"Predicted, not measured: on an {swept['gpu'].iloc[0]} no swept shape has both paths "
            f"launchable at one length ({reasons.iloc[0]}), so no pair is compared."
        )
    rows = _largest(rows.sort_values(["causal", "shape"]))
    shape = rows["shape"].iloc[0]
    at = rows[rows["shape"] == shape].set_index("path")
    mat, fused = at.loc["materialized"], at.loc["fused"]

    def band(low: float, high: float) -> str:
        low, high = number(low), number(high)
        return low if low == high else f"{low}–{high}"

    def dram(r: pd.Series) -> str:
        return band(r["dram_low_bytes"] / MIB, r["dram_high_bytes"] / MIB)

    floors = band(mat["time_low_s"] * 1e6, mat["time_high_s"] * 1e6)
    return (
        f"Predicted, not measured: on an {mat['gpu']} at T = {mat['tokens']:,}, the materialized path "
        f"would move {dram(mat)} MiB through DRAM (the range is L2 serving the S/P hand-off or "
        f"not), the fused one {dram(fused)} MiB; time floors {floors} µs against "
        f"{number(fused['time_high_s'] * 1e6)} µs."
    )


def findings(
    metrics: pd.DataFrame,
    env: dict,
    predictions: pd.DataFrame | None,
    reports: dict,
    stage_times: pd.DataFrame | None = None,
    training: tuple | None = None,
    masked: str | None = None,
) -> str:
    """The study's answers in a few lines, each computed from this run's tables and linked to
    the page that shows it; ``training``: the backward, training-shape and crossing tables;
    ``masked``: the Masks page's finding (from every point, not only ``metrics``' causal and
    full ones)."""
    # each page's question is the square problem's, but the decode page's
    squares, square_stages = square(metrics), square(stage_times)
    items = [
        ("storage", finding_storage(squares)),
        ("traffic", finding_traffic(squares)),
        ("tile_softmax", finding_tile_softmax(squares)),
        ("performance", finding_speed(squares, env)),
        ("handoff", handoff_text.finding(square_stages, env)),
        ("predicted", finding_prediction(predictions)),
        ("training", training_page.finding(*training) if training else None),
        ("decode", decode.finding(metrics)),
        ("masks", masked),
    ]
    # a finding whose page did not render names it instead of linking it
    lines = [
        f"<li>{html.escape(text)} "
        + (
            _link(f"reports/{page}.html", reports[page] + " →")
            if page in reports
            else f"<span class='when'>(its page, {html.escape(page)}, did not render: see Reports)</span>"
        )
        + "</li>"
        for page, text in items
        if text
    ]
    if lines:
        return "<ul class='findings'>" + "".join(lines) + "</ul>"
    why = why_nothing_ran(metrics) or (
        f"none of its points ({names(metrics['impl'])}) answers a question the findings ask"
    )
    return f"<p>No finding: {html.escape(why)}.</p>"


# What each table holds, for the list of tables (a table not named here is linked bare).
TABLE_CONTENTS = {
    "metrics.csv": "a row per point",
    "metrics.parquet": "the same, with its types",
    "stages.csv": "a row per point and stage",
    "stage_times.csv": "the materialized paths' stages timed warm and cold, a row per point and stage",
    "build.csv": "a row per kernel variant and target",
    "tile_errors.csv": "the tile-local and fused kernels' error per T and BLOCK_N",
    "env.json": "device, versions and configuration of the run",
    "ceilings.json": "the machine's measured copy bandwidth and GEMM rate",
    "model/matrix_sizes.csv": "S and P sizes against T from the model",
    "model/block_traffic.csv": "the fused kernel's modelled traffic against its block size",
    "model/softmax_example.json": "the seed's Figure 4 example, computed",
    "model/gpus.csv": "the GPUs the predictions are for",
    "model/predictions.csv": "predicted bytes and time floors per shape, T, GPU and path",
    "model/predicted_kernels.csv": "the same per kernel",
    "model/stage_predictions.csv": "the roofline per stage of the materialized paths, on the GPUs and here",
    "backward.csv": "a row per backward point",
    "backward_stages.csv": "the backward's traffic, a row per point, kernel and tensor",
    "backward_stage_times.csv": "the materialized backward's stages timed warm and cold",
    "model/backward_predictions.csv": "the backward's roofline per point, target and kernel",
    "model/recompute_crossing.csv": "storing P against recomputing it over T, per target",
    "model/training_memory.csv": "what each path keeps at the training shape, per target",
}


def tables_list(tables: list[str]) -> str:
    """The tables the reports were computed from, each linked (paths relative to results/)."""
    if not tables:
        return ""
    items = "".join(
        f"<li>{_link(path, path)}"
        + (f" — {html.escape(TABLE_CONTENTS[path])}" if path in TABLE_CONTENTS else "")
        + "</li>"
        for path in tables
    )
    return f"<h2>Tables</h2><p>Every number of the reports comes from these files.</p><ul>{items}</ul>"


TIME_HEADINGS = {
    "rule": "rule",
    "jobs": "jobs",
    "total_wall_s": "wall s, all jobs",
    "share_of_wall": "share",
    "median_wall_s": "median s",
    "max_wall_s": "longest s",
    "total_cpu_s": "CPU s",
    "peak_rss_mb": "peak RSS MiB",
    "measured_in": "CPU and memory of",
}


LEFT_OUT_NAMED = 3  # records of each kind named on the page; the table has every one


def left_out_text(left: pd.DataFrame | None, link: str) -> str:
    """The records the tables leave out, said (kernels.io.benchmarks): stale ones (of a job
    not in this sweep) and damaged ones (cut short or unreadable, each with why), a few named
    and the rest counted, with a link to the table of every one."""
    if left is None or left.empty:
        return ""
    said = []
    for kind in (STALE, DAMAGED):
        mine = left[left["left_out"] == kind]
        if mine.empty:
            continue
        names = [
            f"{row.benchmark} ({row.why})" if isinstance(row.why, str) and row.why else row.benchmark
            for row in mine.head(LEFT_OUT_NAMED).itertuples()
        ]
        more = f" and {len(mine) - LEFT_OUT_NAMED:,} more" if len(mine) > LEFT_OUT_NAMED else ""
        records = "record" if len(mine) == 1 else "records"
        said.append(f"{kind} ({len(mine):,} {records}): {', '.join(names)}{more}")
    return (
        f"<p class='warn'>Left out of these tables: {html.escape('; '.join(said))}. "
        f"Every one: {_link(link, link)}.</p>"
    )


def time_spent(
    by_rule: pd.DataFrame | None,
    jobs_link: str,
    rules_link: str,
    left: pd.DataFrame | None = None,
    left_link: str = "",
) -> str:
    """Where the run's time went: the benchmark records of the study's jobs added up per rule
    (kernels.io.benchmarks), the most time first, with links to the two tables; ``left``:
    the records they leave out (stale, damaged), named (left_out_text)."""
    if by_rule is None:
        return ""
    head = "<h2 id='time'>Where the run's time went</h2>"
    links = f"Every job: {_link(jobs_link, jobs_link)}; per rule: {_link(rules_link, rules_link)}."
    left_out = left_out_text(left, left_link)
    if by_rule.empty:
        return (
            f"{head}<p>No job of this study left a benchmark record under benchmarks/. {links}</p>{left_out}"
        )
    shown = by_rule.assign(
        share_of_wall=[f"{number(100 * v)} %" for v in by_rule["share_of_wall"]],
        **{c: [number(v) for v in by_rule[c]] for c in ("total_wall_s", "median_wall_s", "max_wall_s")},
        total_cpu_s=[number(v) for v in by_rule["total_cpu_s"]],
        peak_rss_mb=[number(v, 4) for v in by_rule["peak_rss_mb"]],
        measured_in=by_rule["measured_in"].fillna(""),
    )
    shown = shown[list(TIME_HEADINGS)].rename(columns=TIME_HEADINGS)
    warm = ", ".join(by_rule.loc[by_rule["measured_in"].fillna("").str.contains(WORKER), "rule"]) or "none"
    return (
        f"{head}<p>How long each rule's jobs took, from Snakemake's record of each job (its "
        "<code>benchmark:</code>, under benchmarks/), the rule with the most time first. A job's "
        "seconds are its own from start to end, so where jobs ran side by side they add up to "
        "more than the run took. CPU seconds and peak resident memory are those of the job's "
        f"processes, but for the rules measured in a warm worker ({warm}): these hand their "
        "command to a worker, so theirs are "
        "the worker's for that command (the line it ends the job's log with; the worker's start "
        "is not counted), and the job's own thin client is in the per-job table. Snakemake "
        "samples a job's processes every half second, every 30 s after its first 15 s, so a job "
        "under half a second reads near zero CPU and memory. A job this "
        "run did not need to run keeps its record from the run that made it. The index and the "
        f"pack are not counted: their records are written after they end. {links}</p>"
        f"{left_out}{_table(shown)}"
    )


def title(notebook: str | os.PathLike) -> str:
    """A report's title: the first heading of its notebook."""
    for cell in inputs.read("notebook", notebook)["cells"]:
        if cell["cell_type"] == "markdown":
            for line in "".join(cell["source"]).splitlines():
                if line.startswith("# "):
                    return line.removeprefix("# ").strip()
    return Path(notebook).stem


def failed_page(result: dict, root: str | os.PathLike) -> dict:
    """A failed page's outcome (reports.pages.outcome) as the index shows it: its title (from
    its executed notebook when that can be read), first error line, and its log and executed
    notebook relative to ``root`` (the index's folder)."""
    try:
        name = title(result["notebook"])
    except (inputs.InputError, OSError):
        name = result["page"]
    return {
        "page": result["page"],
        "title": name,
        "error": result["error"],
        "log": os.path.relpath(result["log"], root),
        "notebook": os.path.relpath(result["notebook"], root),
    }


def failed_pages(outcomes: list[str], index: str | os.PathLike) -> list[dict]:
    """The pages among ``outcomes`` (their outcome files) that failed, as the index at
    ``index`` shows them (failed_page)."""
    return [failed_page(result, Path(index).parent) for result in outcome.failed(outcomes)]


def reports_list(reports: dict[str, str], failed: list[dict]) -> str:
    """A link to every page that rendered; each that failed, named, with its first error line,
    its log and its executed notebook (where the error is shown in place)."""
    links = "".join(
        f"<li><a href='reports/{html.escape(name)}.html'>{html.escape(text)}</a></li>"
        for name, text in reports.items()
    )
    broken = "".join(
        f"<li class='failed'><strong>{html.escape(f['title'])}</strong>: did not render. "
        f"<code>{html.escape(f['error'])}</code> ({_link(f['log'], 'log')} · "
        f"{_link(f['notebook'], 'executed notebook')})</li>"
        for f in failed
    )
    return f"<ul id='reports'>{links}{broken}</ul>"


def render(
    env: dict,
    metrics: pd.DataFrame,
    validation: pd.DataFrame,
    reports: dict[str, str],
    builds: pd.DataFrame,
    files: list[dict] | None = None,
    predictions: pd.DataFrame | None = None,
    tables: list[str] | None = None,
    stage_times: pd.DataFrame | None = None,
    failed_pages: list[dict] | None = None,
    training: tuple | None = None,
    time: tuple[pd.DataFrame, str, str, pd.DataFrame, str] | None = None,
    mask_tiles: pd.DataFrame | None = None,
) -> str:
    """The index page; ``failed_pages``: each page that did not render (failed_page);
    ``training``: the backward points' table, the training shape's and the crossing's (the
    backward points are listed and warned about with the forward ones); ``time``: the
    benchmarks per rule, the links to the per-job and per-rule tables, the records left out
    and the link to their table (time_spent)."""
    failed_pages = failed_pages or []
    forward = causal_or_full(metrics)  # the findings compare the pages' masks; every point is listed
    masked = masks_page.finding(metrics, mask_tiles) if mask_tiles is not None else None
    if training and training[0] is not None and not training[0].empty:
        metrics = pd.concat([metrics, training[0]], ignore_index=True)
    warnings = [
        f"The page {f['title']} did not render: {f['error']} (see its log, {f['log']}, under Reports)."
        for f in failed_pages
    ]
    failed = validation[validation["verdict"] == "FAILED"]
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
    found = busy(metrics)
    if not found.empty:
        warnings.append(
            f"{len(found)} point(s) were timed while other processes held CPUs their threads "
            "needed: their times measure that contention as much as the kernels, and the pages "
            "and findings that show them say so (results/metrics.csv: contention_reason): "
            + busy_listed(found)
            + ". To time them again, delete their records and run again on a quiet machine."
        )
    for status in ("skipped", "failed"):
        bad = metrics[metrics["status"] == status]
        for reason, group in bad.groupby("reason"):
            warnings.append(f"{len(group)} point(s) {status}: {reason}")
    banner = (
        "<div class='warn' id='warnings'><strong>Warning: not everything ran.</strong><ul>"
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
                status_counts(metrics) or "none",
            ],
        }
    )
    config = env.get("config") or {}
    ran = (metrics["status"] == "ok").any()
    return (
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>attnio results"
        f"</title><style>{STYLE}</style></head><body><h1>attnio: why attention is hard to "
        f"optimize</h1><p class='when'>{'Measured' if ran else 'Recorded (no point ran)'} "
        f"{html.escape(run_span(metrics))}; "
        f"{html.escape(device_label(env))}.</p><h2>What this run found</h2>"
        f"{findings(forward, env, predictions, reports, stage_times, training, masked)}{banner}"
        f"<h2>Reports</h2>{reports_list(reports, failed_pages)}"
        f"<h2>What ran where</h2>{_table(facts)}<h2>Every point</h2><p>A row per point of the sweep "
        f"(click a heading to sort), with its record and the log of its job.</p>"
        f"{points_table(metrics, files or [])}{SORTABLE_SCRIPT}<h2>Build</h2>{_table(build_summary(builds))}"
        f"<h2>Validation</h2>{_table(validation)}{time_spent(*(time or (None, '', '')))}"
        f"{tables_list(tables or [])}"
        f"<h2>Configuration</h2>{_table(sweep_table(config))}<p>{html.escape(settings_line(config))}</p>"
        f"<details><summary>The whole configuration (YAML)</summary><pre>"
        f"{html.escape(config_yaml(config))}</pre></details></body></html>\n"
    )


def write(
    env_path,
    metrics_path,
    validation_paths,
    notebooks: list[str],
    builds_path,
    out: str | os.PathLike,
    files: list[dict] | None = None,
    predictions_path: str | os.PathLike | None = None,
    tables: list[str] | None = None,
    stage_times_path: str | os.PathLike | None = None,
    outcomes: list[str] | None = None,
    training_paths: tuple | None = None,
    benchmark_paths: tuple | None = None,
    mask_tiles_path: str | os.PathLike | None = None,
) -> None:
    """The index for the executed report ``notebooks`` (results/reports/<name>.ipynb, the
    pages that rendered); ``files``: each point's record and log, ``tables``: the tables behind
    the reports, all relative to results/; ``stage_times_path``: the timed stages (the
    hand-off finding); ``outcomes``: every page's outcome (reports.pages.outcome), each failed
    one named with its first error line and its log; ``training_paths``: backward.csv, the
    training shape's and the crossing's tables (the Training finding, the backward points);
    ``benchmark_paths``: the benchmarks' per-job, per-rule and left-out tables
    (kernels.io.benchmarks), linked, the per-rule one shown and the left-out ones named;
    ``mask_tiles_path``: the model's mask table (the Masks finding)."""
    env = inputs.read("env", env_path)
    metrics = inputs.read("metrics", metrics_path)
    builds = inputs.read("builds", builds_path)
    predictions = inputs.read("predictions", predictions_path) if predictions_path else None
    stage_times = inputs.read("stage_times", stage_times_path) if stage_times_path else None
    training = None
    if training_paths:
        training = tuple(
            inputs.read(n, p)
            for n, p in zip(("backward", "training", "crossing"), training_paths, strict=True)
        )
    reports = {Path(path).stem: title(path) for path in notebooks}
    failed = failed_pages(outcomes or [], out)
    time = None
    if benchmark_paths:
        jobs_path, rules_path, left_path = benchmark_paths
        here = lambda path: os.path.relpath(path, Path(out).parent)  # noqa: E731
        by_rule, left = (
            inputs.read("benchmarks_by_rule", rules_path),
            inputs.read("benchmarks_left_out", left_path),
        )
        time = (by_rule, here(jobs_path), here(rules_path), left, here(left_path))
    page = render(
        env,
        metrics,
        validation_summary(validation_paths),
        reports,
        builds,
        files,
        predictions,
        tables,
        stage_times,
        failed,
        training,
        time,
        inputs.read("mask_tiles", mask_tiles_path) if mask_tiles_path else None,
    )
    write_text_atomic(out, page)
