"""Log axes label their ticks in plain text (reports.pages.log_ticks): the labels matplotlib's
own formatter gives, each mathtext expression written with Unicode superscripts."""

import warnings

import matplotlib
import pytest

matplotlib.use("Agg")


@pytest.mark.parametrize(
    "mathtext, text",
    [
        (r"$\mathdefault{10^{-3}}$", "10⁻³"),
        (r"$\mathdefault{2^{10}}$", "2¹⁰"),
        (r"$\mathdefault{5\times10^{2}}$", "5×10²"),
        (r"$\mathdefault{0.5}$", "0.5"),
        ("", ""),
    ],
)
def test_a_mathtext_label_in_plain_text(mathtext, text):
    from reports.pages.log_ticks import plain

    assert plain(mathtext) == text


def test_every_log_axis_made_after_use_labels_in_plain_text():
    import matplotlib.pyplot as plt
    from matplotlib import scale

    from reports.pages import log_ticks

    def labels(fig, ax) -> tuple[list[str], list[str]]:
        ax.plot([16, 100, 1000, 8192], [0.01, 0.2, 3, 80])
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        fig.canvas.draw()
        return [t.get_text() for t in ax.get_xticklabels()], [t.get_text() for t in ax.get_yticklabels()]

    before = labels(*plt.subplots())
    try:
        log_ticks.use()
        after = labels(*plt.subplots())
    finally:
        with warnings.catch_warnings():  # matplotlib's own scale still takes its axis
            warnings.simplefilter("ignore", PendingDeprecationWarning)
            scale.register_scale(scale.LogScale)  # the rest of this process as it was
        plt.close("all")
    assert after == tuple([log_ticks.plain(label) for label in axis] for axis in before)
    assert "2¹⁰" in after[0] and "10⁻²" in after[1] and not any("$" in t for t in after[0] + after[1])
