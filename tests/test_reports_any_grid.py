"""Every page and the index render for the grids a study may plan on machines we have never
seen: the default study's hand-off sweep following the suite machine's 4 MiB cache, the
presets (the GPU ones planned where no GPU is: every point skipped, the model's tables
whole), shapes with T lists of their own, T that are not powers of two, a shape with one T,
only causal or only float16 points. The studies' records come from tests/modelled_study.py
(the package's own records with a made-up machine's times), so a grid of 16,384-token points
costs nothing; the pages are run by the suite's renderer, without torch
(tests/page_renderer.py). Beyond rendering, the pages' sentences are held to the study's own
values: every T a sentence names is one the study has, the hand-off page names the lengths
and the cache its sweep followed."""

from __future__ import annotations

import re
from collections import namedtuple

import pandas as pd
import pytest
from modelled_study import planned_sweep, write_index, write_study
from page_renderer import TEMPLATES, render_in_a_kernel
from test_reports_any_study import said
from workflow_run import ROOT

MIB = 2**20
PRESETS = ROOT / "config" / "presets"


def _grid(impls, tokens, dtype, causal, head_dim=64) -> dict:
    small = {"batch": [1], "heads": [1], "head_dim": [head_dim], "inputs": ["normal"], "blocks": [[64, 64]]}
    return small | {"impls": impls, "tokens": tokens, "dtype": [dtype], "causal": [causal]}


# name -> (sweep, the cache its hand-off follows, device). Each grid reaches branches of the
# pages that the others do not (measured with coverage's branch data); the default study at
# 256 MiB and a separate grid of T lists reached none, so the hand-off's large cache is the
# ci and article presets' 32 MiB and the T lists of their own are the causal grid's shapes.
GRIDS = {
    "default at 4 MiB": (None, 4 * MIB, "cpu"),
    "ci preset": ("ci.yaml", 32 * MIB, "cpu"),
    "article preset": ("article.yaml", 32 * MIB, "cpu"),
    "gpu preset without a GPU": ("gpu.yaml", 60 * MIB, "cuda"),
    # float32 only (no 2-byte timing to hold against float32), three shapes each with a T
    # list of its own, none a power of two: each shape's roofline is at its own largest T
    "only causal, T lists of their own": (
        [
            _grid(["torch_naive", "triton_naive", "triton_flash"], [100, 300], "float32", True),
            _grid(["torch_naive", "sdpa"], [1000], "float32", True, head_dim=32),
            _grid(["torch_naive", "sdpa", "triton_flash"], [333, 777, 1500], "float32", True, head_dim=128),
        ],
        3 * MIB,
        "cpu",
    ),
    "only float16, one T": (
        [
            _grid(
                ["torch_naive", "sdpa", "triton_s_only", "triton_flash", "triton_tile_softmax"],
                [200],
                "float16",
                False,
            )
        ],
        32 * MIB,
        "cpu",
    ),
}

Grid = namedtuple("Grid", "pages index results cache_bytes")


def _sweep(planned) -> list[dict]:
    if planned is None:
        return planned_sweep()
    if isinstance(planned, str):
        return planned_sweep(PRESETS / planned)
    return planned


@pytest.fixture(scope="module")
def studies(tmp_path_factory) -> dict[str, Grid]:
    """Every grid written and rendered once for the module, in one kernel. Slow (about 8 s of
    CPU a grid): the pages draw every figure they show, and drawing is what a grid can break,
    so each grid kept reaches branches of the pages the others miss."""
    base = tmp_path_factory.mktemp("grids")
    folders = {}
    for number, (name, (planned, cache_bytes, device)) in enumerate(GRIDS.items()):
        folders[name] = base / f"study{number}"
        write_study(folders[name] / "results", _sweep(planned), cache_bytes, device)
    rendered = render_in_a_kernel(list(folders.values()))
    found = {}
    for name, folder in folders.items():
        results = folder / "results"
        page = write_index(results, TEMPLATES)
        pages = rendered[folder]
        found[name] = Grid(pages, page, results, GRIDS[name][1])
    return found


def _lengths(results) -> set[int]:
    """Every T the study has anywhere: its points, and the model's grids."""
    tables = [pd.read_parquet(results / "metrics.parquet")]
    models = ("predictions.csv", "stage_predictions.csv", "recompute_crossing.csv", "training_memory.csv")
    tables += [pd.read_csv(results / "model" / f) for f in models]
    return {int(t) for table in tables if "tokens" in table for t in table["tokens"]}


def _named_lengths(text: str) -> set[int]:
    """The T values a text names: 'T = 1,024', 'T = 256 and 1,024', 'T from 256 to 8,192'."""
    found = set()
    for run in re.findall(r"T (?:=|from) ((?:[\d,]+(?:, | and | to )?)+)", text):
        found |= {int(n.replace(",", "")) for n in re.findall(r"\d[\d,]*", run)}
    return found


@pytest.mark.parametrize("name", GRIDS)
def test_every_page_and_the_index_render_for_the_grid(studies, name):
    pages, index, results, _ = studies[name]
    assert set(pages) == {t.stem for t in TEMPLATES}
    for page, result in pages.items():
        assert result["error"] is None, f"{name}: {page}: {result['error']}"
        assert result["outputs"], f"{name}: {page} shows nothing"
    metrics = pd.read_parquet(results / "metrics.parquet")
    backward = pd.read_csv(results / "backward.csv")  # the backward points, listed beside them
    assert "<h1>" in index and index.count("<tr class=") == len(metrics) + len(backward)


@pytest.mark.parametrize("name", GRIDS)
def test_every_length_a_page_names_is_one_the_study_has(studies, name):
    pages, index, results, _ = studies[name]
    lengths, named_anywhere = _lengths(results), set()
    for page, result in {**pages, "index": {"outputs": [{"text/html": index}]}}.items():
        named = _named_lengths(re.sub(r"<[^>]+>", "", said(result)))
        assert named <= lengths, f"{name}: {page} names T = {sorted(named - lengths)}, not in the study"
        named_anywhere |= named
    assert named_anywhere, f"{name}: no page names a T (the pattern no longer reads the pages)"


@pytest.mark.parametrize("name", [n for n, (_, _, device) in GRIDS.items() if device == "cpu"])
def test_the_handoff_page_names_the_lengths_and_the_cache_its_sweep_followed(studies, name):
    from reports.pages import handoff
    from reports.pages.common import number

    pages, _, results, cache_bytes = studies[name]
    timed = handoff.keyed(pd.read_csv(results / "stage_times.csv"))
    timed = timed[timed["status"] == "ok"]
    if timed.empty:
        pytest.skip("this grid times no stage")
    case = handoff.main_case(timed)
    tokens = sorted(set(handoff.of_case(timed, case)["tokens"]))
    shown = next(
        o["text/markdown"] for o in pages["handoff"]["outputs"] if "**Shown:**" in o.get("text/markdown", "")
    )
    assert (
        f"at {len(tokens)} length{'s' * (len(tokens) != 1)} ({handoff.lengths_of(pd.Series(tokens))})"
        in shown
    )
    assert f"the largest cache ({number(cache_bytes / MIB)} MiB)" in shown


@pytest.mark.parametrize("name", GRIDS)
def test_the_roofline_is_drawn_at_each_shapes_own_largest_length(studies, name):
    """The roofline's T is the shown shape's largest swept length, and the kernel table has
    that shape's kernels there (the page shows the figure, not the sentence for nothing)."""
    from reports.pages import predicted

    _, _, results, _ = studies[name]
    predictions = pd.read_csv(results / "model" / "predictions.csv")
    kernels = pd.read_csv(results / "model" / "predicted_kernels.csv")
    for shape, rows in predictions.groupby("shape"):
        largest = predicted.largest_swept(predictions, shape)
        assert largest == rows.loc[rows["in_sweep"].astype(bool), "tokens"].max()
        assert ((kernels["shape"] == shape) & (kernels["tokens"] == largest)).any(), (name, shape)
    assert predicted.empty("roofline", "").split(";")[0] not in said(studies[name].pages["predicted"])
