"""What every report page shares: one ``load`` of its input files, one look for its figures,
and the run summary shown under each title."""

from __future__ import annotations

from functools import partial
from types import SimpleNamespace

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from kernels import masks
from kernels.spec import LARGE_INPUT
from reports.pages import inputs, log_ticks

MIB = 1 << 20
# What names a point in a table for a reader, before the columns a table is about.
POINT_COLUMNS = ["impl", "tokens", "head_dim", "dtype", "causal", "inputs"]


def style() -> None:
    """One look for every figure; fixed so that two renderings are byte-identical. In a
    notebook every figure is shown as an image with alternative text (figure_text)."""
    describe_figures()
    log_ticks.use()
    sns.set_theme(style="whitegrid", context="notebook")
    plt.rcParams.update(
        {
            "figure.dpi": 100,
            "savefig.dpi": 100,
            "figure.figsize": (7.5, 4.5),
            "svg.hashsalt": "attnio",
            "axes.titleweight": "bold",
        }
    )


def describe_figures() -> None:
    """Show figures as <img> with alternative text read from their artists instead of the
    inline backend's bare PNG (nbconvert's templates have no other way to give one)."""
    from IPython import get_ipython
    from matplotlib.figure import Figure

    from reports.pages.figure_text import figure_html

    shell = get_ipython()
    if shell is None:
        return
    # the inline backend registers its PNG formatter when a first figure resolves the
    # backend, dropping every other formatter for figures: resolve it first
    plt.close(plt.figure())
    formatters = shell.display_formatter.formatters
    formatters["image/png"].pop(Figure, None)
    formatters["text/html"].for_type(Figure, figure_html)


def square(table):
    """The rows of the square problem: as many queries as keys and a K/V head per query head
    (a table without those columns, or not a table, is returned as it is)."""
    if not isinstance(table, pd.DataFrame) or not {"query_tokens", "kv_heads"} <= set(table.columns):
        return table
    return table[(table["query_tokens"] == table["tokens"]) & (table["kv_heads"] == table["heads"])]


def load(
    summary: bool = True, problems: str = "square", masks: str = "causal or full", **paths: str
) -> SimpleNamespace:
    """Read every input of a page (``metrics=...``, ``env=...``, ...) through the one loader
    (reports.pages.inputs: a file that cannot be used stops the page with its name and the
    reason), set the figure style and, when there are metrics and provenance, show the run
    summary (of every point). ``problems="square"``: the tables narrowed to the square
    problem, the question of every page but the decode one (which asks for "all").
    ``masks="causal or full"``: the tables narrowed to the two masks every page but the Masks
    one compares (which asks for "all")."""
    from IPython.display import Markdown, display

    read = {name: inputs.read(name, path) for name, path in paths.items()}
    style()
    if summary and "metrics" in read and "env" in read:
        display(Markdown(run_summary(read["metrics"], read["env"], read.get("backward"))))
    if masks != "all":
        masked = beyond_causal(read.get("metrics"))
        read = {name: causal_or_full(value) for name, value in read.items()}
    left_out = points_elsewhere(read.get("metrics") if problems == "square" else None, read.get("backward"))
    if masks != "all":
        left_out[MASKED_ELSEWHERE] = masked
    if problems == "square":
        read = {name: square(value) for name, value in read.items()}
    if "metrics" in read:
        read["metrics"].attrs["elsewhere"] = left_out
    return SimpleNamespace(**read)


def causal_or_full(table):
    """The rows of a table under the causal mask or none (a table without a mask column, or
    not a table, as it is)."""
    if not isinstance(table, pd.DataFrame) or "mask" not in table.columns:
        return table
    return table[table["mask"].isin(UNMASKED)]


def beyond_causal(table) -> int:
    """How many rows of a table hold a mask beyond causal (0 without a table or mask column)."""
    if not isinstance(table, pd.DataFrame) or "mask" not in table.columns:
        return 0
    return int((~table["mask"].isin(UNMASKED)).sum())


UNMASKED = tuple(masks.from_causal(causal).spelled() for causal in (True, False))
MASKED_ELSEWHERE = "under a mask beyond causal (the Masks page shows them)"

# the points a square page's metrics leave out, by where they are shown
BACKWARD_ELSEWHERE = "backward (the Training page shows them)"
INFERENCE_ELSEWHERE = "forward of an inference shape (the Decode page shows them)"


def points_elsewhere(metrics: pd.DataFrame | None, backward: pd.DataFrame | None) -> dict[str, int]:
    """How many of the study's points a page's metrics do not hold (the backward ones, and the
    inference shapes when ``metrics`` is narrowed to the square problem), by where they are
    shown: so a section with no point says where the study's points went."""
    inference = 0 if metrics is None else len(metrics) - len(square(metrics))
    return {INFERENCE_ELSEWHERE: inference, BACKWARD_ELSEWHERE: 0 if backward is None else len(backward)}


def elsewhere(metrics: pd.DataFrame) -> str | None:
    """'2 backward (the Training page shows them)': the study's points a page's metrics do not
    hold (reports.pages.common.load), or None."""
    found = {what: n for what, n in (metrics.attrs.get("elsewhere") or {}).items() if n}
    return " and ".join(f"{n:,} {what}" for what, n in found.items()) or None


def no_point(metrics: pd.DataFrame, kind: str = "") -> str:
    """'this study has no point' (of ``kind``), and where its points are when the page's table
    was narrowed to the square forward problem."""
    where = elsewhere(metrics)
    if where is None:
        return f"this study has no {kind}point"
    return f"this page has no {kind}point (the study's points: {where})"


def ok(metrics: pd.DataFrame) -> pd.DataFrame:
    return metrics[metrics["status"] == "ok"]


def headline_shape(predictions: pd.DataFrame) -> str | None:
    """The shape (of results/model/predictions.csv) the headline figures show: a 2-byte,
    not causal one where the sweep has it (the seed's case), else the first; None where the
    table has no row (no_prediction says why)."""
    if predictions.empty:
        return None
    shapes = predictions.drop_duplicates("shape")
    preferred = shapes[shapes["dtype"].isin(["float16", "bfloat16"]) & ~shapes["causal"].astype(bool)]
    return (preferred if len(preferred) else shapes)["shape"].iloc[0]


def no_prediction(metrics: pd.DataFrame) -> str:
    """Why results/model/predictions.csv has no row: the predict rule predicts the sweep's
    shapes of the square problem, and the study has no such point (where its points are)."""
    return f"the predictions are made for the square problem's shapes, and {no_point(metrics)}"


def describe_case(row) -> str:
    return (
        f"B={row['batch']}, H={row['heads']}, d={row['head_dim']}, {row['dtype']}, "
        f"{'causal' if row['causal'] else 'not causal'}"
    )


def device_label(env: dict) -> str:
    if env.get("device") == "cuda":
        return f"GPU: {env.get('gpu_name')} (driver {env.get('driver')}, CUDA {env.get('cuda')})"
    return f"CPU: {env.get('cpu')} ({env.get('cpu_count')} cores) — CPU timings, not GPU ones"


# where a report (results/reports/<name>.html) finds the index's list of what did not run
INDEX_WARNINGS = "../index.html#warnings"


def status_counts(metrics: pd.DataFrame) -> str:
    """'5 ok, 2 skipped, 1 failed': the points by status, in that order."""
    counts = metrics["status"].value_counts()
    order = [s for s in ("ok", "skipped", "failed") if s in counts] + sorted(
        s for s in counts.index if s not in ("ok", "skipped", "failed")
    )
    return ", ".join(f"{counts[s]:,} {s}" for s in order)


def run_summary(metrics: pd.DataFrame, env: dict, backward: pd.DataFrame | None = None) -> str:
    """The run in one line, every point counted (forward and, given its table, backward), and,
    when some point did not run, one line that links the index's warnings (which say why,
    point by point) instead of repeating them."""
    versions = env.get("versions", {})
    commit = (env.get("git") or {}).get("commit") or "unknown"
    passes = [metrics] if backward is None else [metrics, backward]
    every = pd.concat([table[["status"]] for table in passes], ignore_index=True)
    points = f"{len(every):,} point{'s' if len(every) != 1 else ''}"
    if backward is not None and len(backward):
        points += f" ({len(metrics):,} forward, {len(backward):,} backward)"
    line = (
        f"**Run:** {device_label(env)}; torch {versions.get('torch')}, triton "
        f"{versions.get('triton')}; commit `{commit[:12]}`; config `{env.get('config_hash')}`. "
        f"{points}: {status_counts(every) or 'none'}."
    )
    bad = every[every["status"] != "ok"]
    if bad.empty:
        return line
    return (
        line + f"\n\n**Warning: not every point ran**: {len(bad):,} of {len(every):,} did not "
        f"({status_counts(bad)}); why, point by point: [the index's warnings]({INDEX_WARNINGS})."
    )


# --- why a section has nothing to show, from the data ----------------------------------------


def names(values) -> str:
    """'a', 'a and b', 'a, b and c': the distinct values, sorted."""
    found = sorted({str(v) for v in values})
    if len(found) < 2:
        return found[0] if found else "none"
    return ", ".join(found[:-1]) + " and " + found[-1]


def triton_points(metrics: pd.DataFrame) -> pd.DataFrame:
    """The points of Triton kernels, ours or a plugin's (each record says whether it is one)."""
    return metrics[metrics["triton"].fillna(False).astype(bool)]


def no_point_of(metrics: pd.DataFrame, kind: str) -> str:
    """'this study has no {kind} (its implementations: …)'; where the page's table was narrowed
    to the square forward problem and holds no point at all, 'this page has no {kind} (the
    study's points: …)' (the study may have one on another page)."""
    where = elsewhere(metrics) if metrics.empty else None
    if where:
        return f"this page has no {kind} (the study's points: {where})"
    return f"this study has no {kind} ({implementations(metrics)})"


def implementations(metrics: pd.DataFrame) -> str:
    if metrics.empty and elsewhere(metrics):
        return f"none on this page; the study's points: {elsewhere(metrics)}"
    return f"its implementation{'s' if metrics['impl'].nunique() != 1 else ''}: {names(metrics['impl'])}"


def why_nothing_ran(metrics: pd.DataFrame, kind: str = "") -> str | None:
    """Why no point (of ``kind``: "Triton ", say) has a measurement at all, or None when one
    ran."""
    if metrics.empty:
        return no_point(metrics, kind)
    if (metrics["status"] == "ok").any():
        return None
    return (
        f"no {kind}point of this study ran ({status_counts(metrics)}; "
        f"[the index's warnings]({INDEX_WARNINGS}) say why)"
    )


def why_untimed(metrics: pd.DataFrame, normal_only: bool = False) -> str | None:
    """Why no point of the study was timed, or None when one was: nothing ran, or each
    point that ran says why it was not timed (the records' time_reason). ``normal_only``:
    for a section that leaves the large-input points out."""
    nothing_ran = why_nothing_ran(metrics)
    timed = ok(metrics).dropna(subset=["time_ms"])
    if nothing_ran:
        return nothing_ran
    if normal_only and not timed.empty and (timed["inputs"] != "normal").all():
        return (
            f"the only timed points have large inputs (q = k = {LARGE_INPUT:,.0f}), which this "
            "section leaves out"
        )
    if not timed.empty:
        return None
    untimed = ok(metrics)
    reasons = "; ".join(
        f"{names(group['impl'])}: {str(reason).removeprefix('not timed: ')}"
        for reason, group in untimed.groupby(untimed["time_reason"].fillna("no reason recorded"))
    )
    return f"no point of this study was timed ({reasons})"


def busy(metrics: pd.DataFrame) -> pd.DataFrame:
    """The timed points whose record says the machine was busy while they were timed
    (kernels.measure.contention)."""
    if "contention_verdict" not in metrics:
        return metrics.iloc[:0]
    return metrics[metrics["contention_verdict"].astype("string").eq("busy").fillna(False).astype(bool)]


def busy_listed(found: pd.DataFrame, at_most: int | None = None) -> str:
    """The busy points (``busy``) named one by one, the first ``at_most`` of them."""
    points = [f"{r.impl} {r.dtype} T={r.tokens:,}" for r in found.itertuples()]
    shown = points if at_most is None else points[:at_most]
    return ", ".join(shown) + (f" and {len(points) - len(shown)} more" if len(points) > len(shown) else "")


def busy_note(metrics: pd.DataFrame) -> str | None:
    """Where a page shows times, the points among them timed on a busy machine, named: their
    times are drawn as measured and marked here, so that none passes for the kernel's own."""
    found = busy(metrics)
    if found.empty:
        return None
    listed = busy_listed(found, at_most=8)
    timed = int(metrics["time_ms"].notna().sum())
    return (
        f"**Timed on a busy machine:** {len(found)} of the {timed} timed points ({listed}) were timed "
        "while other processes held CPUs their threads needed, so their times measure that "
        "contention as much as the kernels (results/metrics.csv: contention_reason says how much). "
        "They are shown as measured; time them again on a quiet machine before reading them."
    )


def nonfinite(metrics: pd.DataFrame) -> pd.DataFrame:
    """Points whose output held non-finite values (counted by the measurement)."""
    return metrics[metrics["nonfinite_outputs"].fillna(0) > 0]


def overflow_finding(metrics: pd.DataFrame) -> str:
    """One paragraph on the large-input points: which outputs overflowed, which stayed
    finite, and why, from the records."""
    from kernels.spec import ELEMENT_BYTES

    large = metrics[(metrics["inputs"] == "large") & metrics["status"].isin(["ok", "failed"])]
    if large.empty:
        planned = metrics[metrics["inputs"] == "large"]
        why = (
            f"its {len(planned):,} large-input point{'s' if len(planned) != 1 else ''} did not run "
            f"({status_counts(planned)}; [the index's warnings]({INDEX_WARNINGS}) say why)"
            if len(planned)
            else "this study has no point with large inputs"
        )
        return nothing(f"how a stored S overflows its dtype, on points with q = k = {LARGE_INPUT:,.0f}", why)
    broken, finite = nonfinite(large), large[large["nonfinite_outputs"].fillna(0) == 0]
    first = large.iloc[0]
    text = (
        f"**Overflow of a stored S.** With q = k = {LARGE_INPUT:,.0f} everywhere (v random; "
        f"{describe_case(first)}, T = {first['tokens']:,}), every score is far beyond what a "
        f"{ELEMENT_BYTES['float16']}-byte float16 can hold (its largest finite value is "
        f"{float(np.finfo(np.float16).max):,.0f}), "
        "though the float64 definition is finite. "
    )
    if not broken.empty:
        text += (
            "Non-finite outputs: "
            + "; ".join(
                f"{r.impl} {r.dtype}: {int(r.nonfinite_outputs):,} of "
                f"{r.batch * r.heads * r.tokens * r.head_dim:,}"
                for r in broken.itertuples()
            )
            + f" — recorded as failed: “{broken.iloc[0]['reason']}”. "
        )
    if not finite.empty:
        text += (
            "Finite: "
            + "; ".join(
                f"{r.impl} {r.dtype} (max error {r.max_abs_error:.2g})"
                for r in finite.itertuples()
                if pd.notna(r.max_abs_error)
            )
            + ". The fused kernels compute each tile of scores in float32 registers and never "
            "store them in the input dtype, so the same inputs do not overflow there."
        )
    return text


# --- tables for people ---------------------------------------------------------------------

LONG_TABLE = 15  # rows from which a table can be sorted by a click on a column's header
# Sorting in the page itself (no library, no network): a click on a header sorts by that
# column, numbers as numbers; a second click reverses.
SORTABLE_SCRIPT = """<script>
document.querySelectorAll("table.attnio-sortable").forEach(function (table) {
  table.querySelectorAll("thead th").forEach(function (th, column) {
    th.style.cursor = "pointer"; th.title = "click to sort";
    th.addEventListener("click", function () {
      var body = table.tBodies[0], rows = Array.from(body.rows);
      var up = th.dataset.order !== "up"; th.dataset.order = up ? "up" : "down";
      var key = function (row) {
        var text = row.cells[column].innerText.replace(/[,×%]/g, "");
        var value = parseFloat(text); return isNaN(value) ? text : value;
      };
      rows.sort(function (a, b) {
        var x = key(a), y = key(b), order = x < y ? -1 : x > y ? 1 : 0;
        return up ? order : -order;
      });
      rows.forEach(function (row) { body.appendChild(row); });
    });
  });
});
</script>"""


def number(value, digits: int = 3) -> str:
    """A value as a reader wants it: ``digits`` significant figures, thousands separators,
    no trailing zeros, integers as integers, scientific notation only below 0.001
    (2.04, 40, 0.00195, 1,555, 131,072, 8.43e-07); missing: empty."""
    if value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value)):
        return ""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
        return str(value)
    value = float(value)
    if not np.isfinite(value):
        return str(value)
    if value == 0:
        return "0"
    magnitude = int(np.floor(np.log10(abs(value))))
    if magnitude < -3:
        return f"{value:.{digits - 1}e}"
    decimals = max(digits - 1 - magnitude, 0)  # never rounds away a digit before the point
    text = f"{round(value, decimals):,.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _column_format(name: str, values: pd.Series, digits: int = 3) -> tuple[str, object, float]:
    """A column's heading, format and divisor for a reader: bytes in MiB, times in ms, rates
    and measures in significant figures, errors in scientific notation, speed-ups with ×,
    fractions as percentages, counts with thousands separators."""
    numeric = pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values)
    figures = partial(number, digits=digits)
    if "bytes" in name and numeric:
        return name.replace("_bytes", "").replace("bytes_", "") + ", MiB", figures, MIB
    if name.endswith("_ms") and numeric:
        return name[: -len("_ms")] + ", ms", figures, 1
    if name == "tflops":
        return "TFLOP/s", figures, 1
    if name == "gbps":
        return "GB/s", figures, 1
    if not numeric:
        return name, None, 1
    if "error" in name:
        return name, "{:.1e}", 1
    if name.startswith("speedup"):
        return name, lambda v: figures(v) + "×" if pd.notna(v) else "", 1
    if name.startswith("fraction"):
        return name, lambda v: number(100 * v, 2) + "%" if pd.notna(v) else "", 1
    return name, figures, 1


def readable(table: pd.DataFrame, uuid: str, colour=None, digits: int = 3):
    """A table as a reader wants it: MiB, ms and rates in significant figures, no index
    column, empty cells for missing values, sortable when long (SORTABLE_SCRIPT). The uuid
    keeps the page's element ids fixed from one render to the next; ``colour``: a function
    of a row giving each cell's CSS (Styler.apply); ``digits``: significant figures."""
    shown, formats = pd.DataFrame(index=table.index), {}
    for name in table.columns:
        heading, fmt, divisor = _column_format(name, table[name], digits)
        heading = heading.replace("_", " ")
        shown[heading] = table[name] / divisor if divisor != 1 else table[name]
        if fmt:
            formats[heading] = fmt
    styler = shown.reset_index(drop=True).style.hide(axis="index").set_uuid(uuid)
    styler = styler.format(formats, na_rep="")
    if colour is not None:
        styler = styler.apply(colour, axis=1)
    if len(table) >= LONG_TABLE:
        styler = styler.set_table_attributes('class="attnio-sortable"')
    return styler


NOTHING = "Nothing to show here"  # how a section with nothing to show starts


def nothing(what: str, why: str) -> str:
    """The sentence a section shows in place of a figure or table the study has no data
    for: what it would show, and why this study has nothing for it."""
    return f"**{NOTHING}:** this section would show {what}; {why}."


def sections(would_show: dict[str, str]):
    """A page's ``empty(section, why)``: the nothing(...) sentence of one of its sections,
    from what each section would show."""

    def empty(section: str, why: str | None) -> str:
        return nothing(would_show[section], why or "this study has no data for it")

    return empty


def show(table: pd.DataFrame, uuid: str, empty: str | None = None, colour=None, digits: int = 3) -> None:
    """Display a readable table, with the sorting script after it when it is long; a table
    without rows shows ``empty`` instead (a sentence of nothing(...)), or nothing."""
    from IPython.display import HTML, Markdown, display

    if table.empty:
        if empty:
            display(Markdown(empty))
        return
    display(readable(table, uuid, colour, digits))
    if len(table) >= LONG_TABLE:
        display(HTML(SORTABLE_SCRIPT))
