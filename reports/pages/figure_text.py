"""What a figure shows, read back from what matplotlib drew: the alternative text of its
image (so a reader who cannot see it, and a test, get the same numbers) and the plotted
series a test holds against the tables."""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass

import numpy as np
from matplotlib.collections import PathCollection, QuadMesh
from matplotlib.container import BarContainer
from matplotlib.figure import Figure


@dataclass(frozen=True)
class Series:
    """One thing drawn in one panel: a line, a set of markers, bars or a colour map."""

    panel: str
    label: str
    x: tuple[float, ...]
    y: tuple[float, ...]
    # "line", "points", "bars" or "hbars" (x: the bar's place, y: its length), "colours"
    # (y: the coloured values) or "guide" (a line across the panel, axhline/axvline: partly
    # in panel coordinates, so not in the ranges)
    kind: str


def _floats(values) -> np.ndarray:
    return np.asarray(np.ma.filled(np.ma.asarray(values, dtype=float), np.nan), dtype=float).ravel()


def _finite(values) -> tuple[float, ...]:
    array = _floats(values)
    return tuple(float(v) for v in array[np.isfinite(array)])


def _pairs(x, y) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The (x, y) points that are drawn: both coordinates finite."""
    x, y = _floats(x), _floats(y)
    keep = np.isfinite(x) & np.isfinite(y)
    return tuple(float(v) for v in x[keep]), tuple(float(v) for v in y[keep])


def _shown_label(label: str) -> str:
    return "" if label.startswith("_") else label


def _bars(ax) -> list[Series]:
    found = []
    for container in ax.containers:
        if not isinstance(container, BarContainer):
            continue
        horizontal = container.orientation == "horizontal"
        ends = [p.get_width() if horizontal else p.get_height() for p in container.patches]
        places = [
            p.get_y() + p.get_height() / 2 if horizontal else p.get_x() + p.get_width() / 2
            for p in container.patches
        ]
        found.append(
            Series(
                ax.get_title(),
                _shown_label(container.get_label()),
                _finite(places),
                _finite(ends),
                "hbars" if horizontal else "bars",
            )
        )
    return found


def panels(fig: Figure) -> list:
    """The figure's axes that draw data (not colour bars, not hidden spare panels)."""
    return [ax for ax in fig.axes if not _is_colour_bar(ax) and ax.get_visible() and ax.has_data()]


def _is_colour_bar(ax) -> bool:
    # a colour bar's own axes, or one given to it (cbar_ax), carries its Colorbar
    return ax.get_label() == "<colorbar>" or getattr(ax, "_colorbar", None) is not None


def panel_series(ax) -> list[Series]:
    """Every line, marker set, bar set and colour map of one panel, with its data."""
    found: list[Series] = []
    for line in ax.get_lines():
        kind = "line" if line.get_transform() == ax.transData else "guide"
        x, y = _pairs(line.get_xdata(orig=False), line.get_ydata(orig=False))
        found.append(Series(ax.get_title(), _shown_label(line.get_label()), x, y, kind))
    for collection in ax.collections:
        if isinstance(collection, PathCollection) and len(collection.get_offsets()):
            offsets = np.asarray(collection.get_offsets())
            x, y = _pairs(offsets[:, 0], offsets[:, 1])
            found.append(Series(ax.get_title(), _shown_label(collection.get_label()), x, y, "points"))
        elif isinstance(collection, QuadMesh) and collection.get_array() is not None:
            found.append(Series(ax.get_title(), "", (), _finite(collection.get_array()), "colours"))
    found += _bars(ax)
    return found


def series(fig: Figure) -> list[Series]:
    return [s for ax in panels(fig) for s in panel_series(ax)]


LISTED_POINTS = 8  # up to this many markers in a panel are each given; more, their range


def _number(value: float) -> str:
    if value == 0 or 1e-3 <= abs(value) < 1e3:
        return f"{value:.3g}"
    return f"{value:,.0f}" if abs(value) >= 1e3 else f"{value:.2e}"


def _span(values) -> str:
    low, high = min(values), max(values)
    return _number(low) if low == high else f"{_number(low)} to {_number(high)}"


def _axis(name: str, label: str, scale: str) -> str:
    return f"{name}: {label or 'unlabelled'}{' (log scale)' if scale == 'log' else ''}"


def _legend(artist) -> list[str]:
    legend = artist.get_legend() if hasattr(artist, "get_legend") else None
    return [t.get_text() for t in legend.get_texts()] if legend is not None else []


def _values_text(drawn: list[Series]) -> list[str]:
    """Markers one by one (or their range when many), lines and bars by range."""
    parts = []
    points = [xy for s in drawn if s.kind == "points" for xy in zip(s.x, s.y, strict=True)]
    if 0 < len(points) <= LISTED_POINTS:
        parts.append("points at " + ", ".join(f"({_number(x)}, {_number(y)})" for x, y in points))
    elif points:
        xs, ys = zip(*points, strict=True)
        parts.append(f"{len(points)} points, x {_span(xs)}, y {_span(ys)}")
    lines = [s for s in drawn if s.kind == "line" and s.x]
    if lines:
        xs = [v for s in lines for v in s.x]
        ys = [v for s in lines for v in s.y]
        parts.append(f"{len(lines)} line{'s' * (len(lines) > 1)} over x {_span(xs)}, y {_span(ys)}")
    lengths = [v for s in drawn if s.kind in ("bars", "hbars") for v in s.y]
    if lengths:
        parts.append(f"{len(lengths)} bars from {_span(lengths)}")
    colours = [v for s in drawn if s.kind == "colours" for v in s.y]
    if colours:
        parts.append(f"colours for values {_span(colours)}")
    return parts


def _panel_text(ax, drawn: list[Series], shared_legend: set[str]) -> str:
    parts = [f"panel “{ax.get_title()}”" if ax.get_title() else "panel"]
    parts += [_axis("x", ax.get_xlabel(), ax.get_xscale()), _axis("y", ax.get_ylabel(), ax.get_yscale())]
    parts += _values_text(drawn)
    named = _legend(ax) or list(dict.fromkeys(s.label for s in drawn if s.label))
    if named and not set(named) <= shared_legend:
        parts.append("legend: " + ", ".join(named))
    return "; ".join(parts)


def alt_text(fig: Figure) -> str:
    """The figure in words, from its artists: its title, and per panel the axis labels,
    the plotted points (or their range), the range of lines, bars and colours, and what the
    legend names."""
    title = fig.get_suptitle()
    figure_legend = [t.get_text() for legend in fig.legends for t in legend.get_texts()]
    described = [_panel_text(ax, panel_series(ax), set(figure_legend)) for ax in panels(fig)]
    shared = ["legend: " + ", ".join(figure_legend)] if figure_legend else []
    return ". ".join([f"Figure: {title}" if title else "Figure", *described, *shared]) + "."


def figure_html(fig: Figure) -> str:
    """The figure as an <img> with its alternative text, as the inline backend would draw it
    (PNG, tight bounding box), for every figure a page shows (common.style registers it)."""
    from IPython.core.pylabtools import print_figure

    png = print_figure(fig, "png", bbox_inches="tight")
    data = base64.b64encode(png).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" alt="{html.escape(alt_text(fig), quote=True)}"/>'
