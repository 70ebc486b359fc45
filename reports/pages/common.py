"""What every report page shares: one ``load`` of its input files, one look for its figures,
and the run summary shown under each title."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

MIB = 1 << 20
# What names a point in a table for a reader, before the columns a table is about.
POINT_COLUMNS = ["impl", "tokens", "head_dim", "dtype", "causal", "inputs"]


def style() -> None:
    """One look for every figure; fixed so that two renderings are byte-identical. In a
    notebook every figure is shown as an image with alternative text (figure_text)."""
    describe_figures()
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


def read(path: str | Path):
    """A results file by its kind: parquet or CSV → DataFrame, JSON → its value."""
    path = Path(path)
    if path.suffix == ".parquet":
        return pd.read_parquet(path)
    if path.suffix == ".csv":
        return pd.read_csv(path)
    if path.suffix == ".json":
        return json.loads(path.read_text())
    raise ValueError(f"{path}: cannot read a {path.suffix or 'suffix-less'} file as a table")


def load(summary: bool = True, **paths: str) -> SimpleNamespace:
    """Read every input of a page (``metrics=...``, ``env=...``, ...), set the figure style
    and, when there are metrics and provenance, show the run summary."""
    from IPython.display import Markdown, display

    style()
    data = SimpleNamespace(**{name: read(path) for name, path in paths.items()})
    if summary and hasattr(data, "metrics") and hasattr(data, "env"):
        display(Markdown(run_summary(data.metrics, data.env)))
    return data


def ok(metrics: pd.DataFrame) -> pd.DataFrame:
    return metrics[metrics["status"] == "ok"]


def headline_shape(predictions: pd.DataFrame) -> str:
    """The shape (of results/model/predictions.csv) the headline figures show: a 2-byte,
    not causal one where the sweep has it (the seed's case), else the first."""
    shapes = predictions.drop_duplicates("shape")
    preferred = shapes[shapes["dtype"].isin(["float16", "bfloat16"]) & ~shapes["causal"].astype(bool)]
    return (preferred if len(preferred) else shapes)["shape"].iloc[0]


def describe_case(row) -> str:
    return (
        f"B={row['batch']}, H={row['heads']}, d={row['head_dim']}, {row['dtype']}, "
        f"{'causal' if row['causal'] else 'not causal'}"
    )


def device_label(env: dict) -> str:
    if env.get("device") == "cuda":
        return f"GPU: {env.get('gpu_name')} (driver {env.get('driver')}, CUDA {env.get('cuda')})"
    return f"CPU: {env.get('cpu')} ({env.get('cpu_count')} cores) — CPU timings, not GPU ones"


def run_summary(metrics: pd.DataFrame, env: dict) -> str:
    counts = metrics["status"].value_counts()
    versions = env.get("versions", {})
    commit = (env.get("git") or {}).get("commit") or "unknown"
    lines = [
        f"**Run:** {device_label(env)}; torch {versions.get('torch')}, triton "
        f"{versions.get('triton')}; commit `{commit[:12]}`; config `{env.get('config_hash')}`. "
        f"{len(metrics)} points: " + ", ".join(f"{n} {s}" for s, n in counts.items()) + "."
    ]
    bad = metrics[metrics["status"] != "ok"]
    if not bad.empty:
        reasons = bad.groupby(["status", "reason"]).size().reset_index(name="points")
        lines.append("\n**Warning: not every point ran.**\n")
        lines += [f"- {r.points} {r.status}: {r.reason}" for r in reasons.itertuples()]
    return "\n".join(lines)


def nonfinite(metrics: pd.DataFrame) -> pd.DataFrame:
    """Points whose output held non-finite values (counted by the measurement)."""
    return metrics[metrics["nonfinite_outputs"].fillna(0) > 0]


def overflow_finding(metrics: pd.DataFrame) -> str:
    """One paragraph on the large-input points: which outputs overflowed, which stayed
    finite, and why, from the records."""
    from kernels.spec import ELEMENT_BYTES, LARGE_INPUT

    large = metrics[(metrics["inputs"] == "large") & metrics["status"].isin(["ok", "failed"])]
    if large.empty:
        return (
            f"No point with large inputs (q = k = {LARGE_INPUT:,.0f}) ran in this study, so "
            "nothing here shows how a stored S overflows its dtype."
        )
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


def _column_format(name: str, values: pd.Series) -> tuple[str, object]:
    """A column's heading and format for a reader: bytes in MiB, times in ms, rates with a
    few digits, errors in scientific notation, counts with thousands separators."""
    if "bytes" in name and pd.api.types.is_numeric_dtype(values):
        return name.replace("_bytes", "").replace("bytes_", "") + ", MiB", "{:,.2f}"
    if name.endswith("_ms"):
        return name[: -len("_ms")] + ", ms", "{:,.3f}"
    if name == "tflops":
        return "TFLOP/s", "{:,.3f}"
    if name == "gbps":
        return "GB/s", "{:,.1f}"
    if "error" in name:
        return name, "{:.1e}"
    if name.startswith("speedup"):
        return name, "{:.2f}×"
    if name.startswith("fraction"):
        return name, "{:.0%}"
    if pd.api.types.is_integer_dtype(values) and not pd.api.types.is_bool_dtype(values):
        return name, "{:,}"
    if pd.api.types.is_float_dtype(values):
        return name, "{:,.3g}"
    return name, None


def readable(table: pd.DataFrame, uuid: str):
    """A table as a reader wants it: MiB, ms and rates with sensible digits, no index
    column, empty cells for missing values, sortable when long (SORTABLE_SCRIPT). The uuid
    keeps the page's element ids fixed from one render to the next."""
    shown, formats = pd.DataFrame(index=table.index), {}
    for name in table.columns:
        heading, fmt = _column_format(name, table[name])
        values = table[name] / MIB if heading.endswith(", MiB") else table[name]
        heading = heading.replace("_", " ")
        shown[heading] = values
        if fmt:
            formats[heading] = fmt
    styler = shown.reset_index(drop=True).style.hide(axis="index").set_uuid(uuid)
    styler = styler.format(formats, na_rep="")
    if len(table) >= LONG_TABLE:
        styler = styler.set_table_attributes('class="attnio-sortable"')
    return styler


def show(table: pd.DataFrame, uuid: str) -> None:
    """Display a readable table, with the sorting script after it when it is long."""
    from IPython.display import HTML, display

    display(readable(table, uuid))
    if len(table) >= LONG_TABLE:
        display(HTML(SORTABLE_SCRIPT))
