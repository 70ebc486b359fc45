"""The Masks page's tables and sentences from a modelled study of masks beyond causal (the
records tests/modelled_study.py makes from the models, the model's mask table as the model
rule writes it): the kept shares are the definition's, counted bytes stand beside the model,
the materialized path keeps more of its unmasked bytes than the fused one, and the verdict on
time follows the numbers it is given."""

from __future__ import annotations

import pandas as pd
import pytest
from modelled_study import write_study

from kernels.planning.sweep import planned
from reports.pages import masks as page

SWEEP = {
    "impls": ["torch_naive", "sdpa", "triton_naive", "triton_flash"],
    "tokens": [48],
    "heads": [1],
    "batch": [1],
    "head_dim": [16],
    "dtype": ["float16"],
    "mask": ["full", "causal", "window:5", "documents:16"],
    "blocks": [[16, 16]],
}


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    results = tmp_path_factory.mktemp("masks") / "results"
    grids, _, _ = planned([SWEEP], 64 << 10)
    write_study(results, grids, 64 << 10, device="cpu")
    return pd.read_parquet(results / "metrics.parquet"), pd.read_csv(results / "model" / "mask_tiles.csv")


def test_the_kept_share_is_the_definitions(tables):
    _, tiles = tables
    rows = page.coverage_table(tiles)
    window = rows[(rows["mask"] == "window:5") & (rows["T"] == 48)]
    kept = sum(min(i + 1, 5) for i in range(48)) / 48**2  # query i sees keys i − 5 < j ≤ i
    assert window["kept share"].tolist() == pytest.approx([kept] * len(window))
    assert (window["visited share"] >= window["kept share"]).all()


def test_bytes_stand_beside_the_model_and_the_materialized_path_keeps_more_of_its_own(tables):
    metrics, _ = tables
    moved = page.bytes_table(metrics)
    assert moved["counted = model"].all() and set(moved["mask"]) >= {"window:5", "documents:16"}
    masked = page.beyond(moved).set_index(["mask", "path"])["of full"]
    for mask in ("window:5", "documents:16"):
        assert masked[(mask, "triton_naive")] > masked[(mask, "triton_flash")]


def test_the_findings_and_the_index_line_name_each_mask(tables):
    metrics, tiles = tables
    text = page.findings(metrics, tiles)
    assert "**window:5** at T = 48" in text and "**documents:16** at T = 48" in text
    assert "Under " in page.finding(metrics, tiles)
    assert page.finding(metrics.assign(mask="causal"), tiles.iloc[0:0]) is None


@pytest.mark.parametrize(
    "time_share, kept_share, said",
    [(0.95, 0.06, "follows T²"), (0.08, 0.06, "follows what the mask keeps"), (0.4, 0.06, "less than")],
)
def test_the_verdict_on_time_follows_the_numbers(time_share, kept_share, said):
    assert said in page.follows(time_share, kept_share)


def test_paths_side_by_side_are_timed_against_the_fastest_at_each_mask(tables):
    """Each timed path's time over the fastest one's at the same T and mask, from the times
    the table holds; the index's line names the fastest and each other's ratio."""
    metrics, tiles = tables
    rows = page.against_fastest(metrics, tiles)
    assert not rows.empty
    for _, same in rows.groupby(["T", "mask"]):
        fastest = same["time ms"].min()
        assert (same["× fastest"] == same["time ms"] / fastest).all()
        assert (same["× fastest"] == 1).sum() >= 1
    least = page.beyond(rows).sort_values("kept share").iloc[0]
    there = rows[(rows["mask"] == least["mask"]) & (rows["T"] == least["T"])].sort_values("time ms")
    assert len(there) >= 2  # torch_naive and SDPA, both timed
    said = page.finding(metrics, tiles)
    assert f"{there.iloc[0]['path']} was the fastest there" in said
    assert all(f"× for {path}" in said for path in there["path"].iloc[1:])
