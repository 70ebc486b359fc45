"""The Cache hand-off page follows the tables it is given: timed stages and predictions whose
numbers this test chooses (a 4 MiB cache, four lengths on both sides of it, one stage bound by
memory whose warm/cold ratio falls past the cache, three bound by arithmetic), read back from
its sentences, its figures and the index; and every section of a study that cannot fill it
says why."""

from __future__ import annotations

import html
import json
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from workflow_run import ROOT, env

from kernels.io.derived import stage_rates
from reports.pages import handoff, handoff_text
from reports.pages.common import NOTHING, number

CACHE = 4 << 20
CASE = {"impl": "torch_naive", "batch": 1, "heads": 1, "head_dim": 64, "dtype": "float32", "causal": False}
CASE |= {"inputs": "normal", "block_m": None, "block_n": None, "device": "cpu"}
TOKENS = (256, 512, 1024, 2048)  # S + P: 1/8, 1/2, 2 and 8 times the cache
# stage → (warm ms per T², cold over warm inside the cache, past it), bytes per T², FLOPs, exps
STAGES = {
    "scores": ((4e-6, 1.0, 1.0), 4, 128, 0),
    "scale": ((1e-6, 1.6, 1.05), 8, 0, 0),
    "softmax": ((3e-6, 1.0, 1.0), 8, 0, 1),
    "pv": ((5e-6, 1.0, 1.0), 4, 128, 0),
}
REST_MS = (-0.1, 0.2, 2.0, 9.0)  # the call beyond its stages: negative at the shortest T
CEILINGS = {"device": "cpu", "device_name": "test CPU", "threads": 2, "copy_gbps": 9.0}
CEILINGS |= {"matmul_tflops": 0.2, "matmul_dtype": "float32", "exp_per_s": 2e9, "call_us": 4.0}
CEILINGS |= {"levels": [{"level": "L3", "bytes": CACHE, "footprint_bytes": CACHE // 2, "copy_gbps": 40.0}]}
CEILINGS["levels"] += [{"level": "DRAM", "bytes": 1 << 34, "footprint_bytes": CACHE * 4, "copy_gbps": 9.0}]
PROVENANCE = {"device": "cpu", "cpu": "test CPU", "cpu_count": 2, "versions": {}, "config": {}}


def stage_times(tokens=TOKENS) -> pd.DataFrame:
    rows = []
    for t in tokens:
        inside = 8 * t * t <= CACHE
        key = CASE | {"tokens": t, "status": "ok", "bytes_S": 4 * t * t, "bytes_P": 4 * t * t}
        key |= {"last_cache_bytes": CACHE}
        times = {s: per * t * t for s, ((per, _, _), *_) in STAGES.items()}
        rest = REST_MS[TOKENS.index(t)]
        key["call_time_ms"] = sum(times.values()) + rest
        for order, (stage, ((_, fit, past), per_byte, flops, exps)) in enumerate(STAGES.items()):
            warm = times[stage]
            rows.append(
                key
                | {
                    "order": order,
                    "stage": stage,
                    "does": f"{stage} ({'in place' if stage == 'scale' else 'new'})",
                }
                | {"time_ms": warm, "cold_time_ms": warm * (fit if inside else past)}
                | {"bytes": per_byte * t * t, "flops": flops * t * t, "exps": exps * t * t}
            )
        rows.append(key | {"order": len(STAGES), "stage": "rest", "does": "the call's own", "time_ms": rest})
    return stage_rates(pd.DataFrame(rows))


def predicted_ms(r) -> tuple[float, float, float]:
    """This machine's (warm low, warm high, cold): every stage at 0.8 of its warm time but
    scale, cold at 0.8 of its cold time and warm at a quarter and a half of it inside the cache
    (its optimistic end predicting 0.8 × 1.6 / 0.25 = 5.12 cold over warm, its pessimistic end
    2.56), half of it and its cold time past the cache (1.68, and 1)."""
    if r.stage != "scale":
        return 0.8 * r.time_ms, 0.8 * r.time_ms, 0.8 * r.time_ms
    cold = 0.8 * r.cold_time_ms
    return (
        (0.25 * r.time_ms, 0.5 * r.time_ms, cold) if r.sp_over_cache <= 1 else (0.5 * r.time_ms, cold, cold)
    )


def predictions(timed: pd.DataFrame) -> pd.DataFrame:
    """This machine's predictions (predicted_ms), bound by products, DRAM or exponentials;
    the H200's a thousand times shorter, its softmax bound by DRAM."""
    staged = timed[timed["stage"] != "rest"]
    bound = {"scores": "products", "scale": "DRAM", "softmax": "exponentials", "pv": "products"}
    rows = []
    for r in staged.itertuples():
        low, high, cold = predicted_ms(r)
        key = {k: getattr(r, k) for k in handoff.KEY} | {"stage": r.stage, "does": r.does, "bytes": r.bytes}
        key |= {"flops": r.flops, "exps": r.exps}
        this = key | {"target": "this machine", "largest_cache_bytes": CACHE}
        this |= {"predicted_warm_low_ms": low, "predicted_warm_high_ms": high}
        this |= {"predicted_cold_ms": cold} | dict.fromkeys(
            ["bound_warm_low", "bound_warm_high", "bound_cold"], bound[r.stage]
        )
        gpu_bound = "DRAM" if r.stage == "softmax" else bound[r.stage]
        gpu = this | {"target": "H200", "largest_cache_bytes": 60 << 20}
        gpu |= {
            k: this[k] / 1e3 for k in ("predicted_warm_low_ms", "predicted_warm_high_ms", "predicted_cold_ms")
        }
        gpu |= dict.fromkeys(["bound_warm_low", "bound_warm_high", "bound_cold"], gpu_bound)
        rows += [this, gpu]
    return pd.DataFrame(rows)


def metrics(status="ok", reason=None, impl="torch_naive") -> pd.DataFrame:
    """One point with every column the pages read (empty but the few this page looks at)."""
    from reports.pages.inputs import METRICS

    row = dict.fromkeys(METRICS) | {"impl": impl, "status": status, "stage_time_reason": reason}
    return pd.DataFrame([row | {"tokens": 256, "batch": 1, "heads": 1, "head_dim": 64, "dtype": "float32"}])


def view(timed=None, predicted=None, ceilings=CEILINGS, ran=None) -> handoff.View:
    timed = stage_times() if timed is None else timed
    predicted = predictions(timed) if predicted is None else predicted
    data = SimpleNamespace(stage_times=timed, stage_predictions=predicted, ceilings=ceilings)
    data.metrics = metrics() if ran is None else ran
    return handoff.view(data)


@pytest.fixture(scope="module")
def timed() -> pd.DataFrame:
    return stage_times()


def _at(timed: pd.DataFrame, stage: str) -> pd.DataFrame:
    return timed[timed["stage"] == stage]


def test_the_bounds_name_the_memory_stage_and_its_rates_on_both_sides_of_the_cache(timed):
    said = handoff_text.bounds_text(view(), CEILINGS)
    scale = _at(timed, "scale")
    fit, past = scale[scale["sp_over_cache"] <= 1], scale[scale["sp_over_cache"] > 1]
    assert "**Bound by memory here** (the roofline's bound for this machine at T = 2,048" in said
    assert ": scale by DRAM." in said
    warm_in, warm_out = fit["gbps"].median(), past["gbps"].median()
    cold_in, cold_out = fit["cold_gbps"].median(), past["cold_gbps"].median()
    assert (
        f"**scale** moved a median {number(warm_in)} GB/s warm and {number(cold_in)} GB/s cold at the 2 "
        f"lengths whose S + P fit in the largest cache, {number(warm_out)} and {number(cold_out)} GB/s at "
        f"the 2 past it (each call's fixed cost included: the ceilings timed none, so at short lengths "
        f"this compares fixed costs as much as bytes): past the cache its time per byte is "
        f"{number(warm_in / warm_out)}× (warm) and {number(cold_in / cold_out)}× (cold)"
    ) in said
    assert (
        "**Bound by arithmetic**: scores and pv by the matrix products; softmax by the exponentials." in said
    )
    pv = _at(timed, "pv").iloc[-1]
    assert (
        f"pv ran at {number(pv['tflops'])} TFLOP/s ({number(100 * pv['tflops'] / 0.2)}% of the measured 0.2"
        in said
    )
    assert "scores, softmax and pv ran as fast cold as warm (within 10%): the hand-off does not show" in said


def test_measured_over_predicted_and_the_band_end(timed):
    said = handoff_text.prediction_text(view(), CEILINGS)
    assert "the median over 4 lengths" in said
    # scores: 1/0.8 warm and cold; scale's medians over its two lengths on each side
    assert f"scores {number(1 / 0.8)} warm, {number(1 / 0.8)} cold" in said
    scale = _at(timed, "scale")
    pessimistic = pd.Series([2.0, 2.0, 1 / (0.8 * 1.05), 1 / (0.8 * 1.05)]).median()
    assert (
        f"scale {number(pd.Series([4.0, 4.0, 2.0, 2.0]).median())} warm ({number(pessimistic)} against "
        f"the pessimistic end), {number(1 / 0.8)} cold" in said
    )
    assert "Faster than the bound" not in said  # every prediction here is below its measurement
    assert f"warm over cold measured {number(1.6)} while S + P fit and {number(1.05)} past the cache" in said
    assert (
        "the band's optimistic end (every cache serves the share of the footprint that fits) "
        f"predicts {number(0.8 * 1.6 / 0.25)} while S + P fit and {number(0.8 * 1.05 / 0.5)} past the cache"
        in said
    )
    assert (
        f"its pessimistic end (a cache serves it only where it fits with room to spare) {number(2.56)}"
        in said
    )
    assert "nearer its pessimistic end at 4 of the 4 lengths" in said
    assert (
        f"Past the cache the median is {number(scale['warm_speedup'].iloc[2:].median())}×: "
        "the caches no longer serve" in said
    )


def test_an_in_place_stage_faster_than_the_dram_copy_is_explained_only_when_it_is(timed):
    quick = timed.copy()
    scale = quick["stage"] == "scale"
    quick.loc[scale, "cold_time_ms"] = quick.loc[scale, "bytes"] / 12e9 * 1e3  # 12 GB/s > 9 GB/s
    said = handoff_text.prediction_text(view(stage_rates(quick)), CEILINGS)
    assert (
        "**scale** works in place, and cold at T = 2,048 it moved 12 GB/s, more than DRAM's copy "
        "rate (9 GB/s)" in said
    )
    assert "write-allocate" in said
    assert "write-allocate" not in handoff_text.prediction_text(view(), CEILINGS)


def test_the_time_at_the_largest_length_and_the_rest(timed):
    said = handoff_text.time_text(view())
    at = timed[timed["tokens"] == 2048].set_index("stage")
    assert (
        f"(T = 2,048), **pv** takes the most time of the stages: {number(at.loc['pv', 'time_ms'])} ms" in said
    )
    share = 100 * at.loc["rest", "share_of_call"]
    assert f"takes {number(share)}% of it ({number(9.0)} ms)" in said
    short = handoff_text.time_text(view(stage_times((256,))))
    assert "faster than its stages one by one" in short and f"{number(0.1)} ms" in short


def test_the_gpu_section_says_predicted_and_where_the_softmax_changes_bound(timed):
    said = handoff_text.gpu_text(view())
    at = predictions(timed)
    at = at[(at["tokens"] == 2048) & (at["target"] == "H200")].set_index("stage")["predicted_warm_high_ms"]
    share = (at["scale"] + at["softmax"]) / at.sum()
    assert said.startswith("Predicted, not measured: on the H200 at T = 2,048")
    assert f"(scale and softmax by DRAM) take {number(100 * share)}% of the chain's predicted time" in said
    assert "Softmax is bound by DRAM there and by exponentials here." in said
    assert "a larger share of the chain's time there than here" in said
    table = handoff.bound_table(view())
    assert set(table["target"]) == {"H200", "this machine"} and set(table["tokens"]) == {2048}


def _drawn(fig, kind, panel=None):
    from reports.pages.figure_text import series

    return [
        xy
        for s in series(fig)
        if s.kind == kind and (panel is None or s.panel.startswith(panel))
        for xy in zip(s.x, s.y, strict=True)
    ]


def _has(drawn, x, y):
    return any(abs(a - x) <= 1e-9 * abs(x) and abs(b - y) <= 1e-9 * abs(y) for a, b in drawn)


def test_each_figure_draws_the_numbers_of_its_tables(timed):
    import matplotlib.pyplot as plt

    v = view()
    rates = handoff.rate_figure(v, CEILINGS)
    for r in timed[timed["stage"] != "rest"].itertuples():
        assert _has(_drawn(rates, "points", r.stage), r.sp_over_cache, r.gbps)
        assert _has(_drawn(rates, "points", r.stage), r.sp_over_cache, r.cold_gbps)
    scale = v.rows[v.rows["stage"] == "scale"].iloc[0]
    optimistic = scale["bytes"] / (scale["predicted_warm_low_ms"] / 1e3) / 1e9
    assert _has(_drawn(rates, "line", "scale"), scale["sp_over_cache"], optimistic)
    guides = {y for _, y in _drawn(rates, "guide")}
    assert {40.0, 9.0, 1.0} <= guides | {x for x, _ in _drawn(rates, "guide")}  # the levels and the crossing
    shares = handoff.share_figure(v)
    for r in timed.itertuples():
        assert _has(_drawn(shares, "line"), r.tokens, 100 * r.share_of_call)
    gpu = handoff.gpu_figure(v)
    h200 = predictions(timed).query("target == 'H200'")
    for r in h200.itertuples():
        assert _has(_drawn(gpu, "points", "H200"), r.tokens, r.predicted_warm_high_ms)
    plt.close("all")


def test_the_index_finding_gives_the_largest_ratio_inside_and_the_ratio_past(timed):
    from reports.pages.index import render, validation_summary

    scale = _at(timed, "scale")
    found = handoff_text.finding(timed, PROVENANCE)
    top = scale.loc[scale["warm_speedup"].idxmax()]
    assert (
        f"slowed it by up to {number(top['warm_speedup'])}× (scale at T = {int(top['tokens']):,}, S + P at "
        f"{number(top['sp_over_cache'])}× the largest cache)"
    ) in found
    assert f"scale's ratio was {number(1.05)}× in the median" in found
    page = render(PROVENANCE, metrics(), validation_summary([]), {}, pd.DataFrame(), stage_times=timed)
    page = html.unescape(page)
    assert found in page
    assert handoff_text.finding(timed.iloc[:0], PROVENANCE) is None
    assert handoff_text.finding(None, PROVENANCE) is None


def test_a_study_without_timed_stages_says_why_in_every_section():
    blank = stage_times().iloc[:0]
    reason = "not timed: Triton interpreter (correctness and counting only)"
    interpreted = metrics(reason=reason, impl="triton_naive")
    v = view(blank, predictions(stage_times()).iloc[:0], ran=interpreted)
    why = "its materialized points were not timed stage by stage (triton_naive: Triton interpreter"
    for text in (
        handoff.case_text(v),
        handoff_text.bounds_text(v, CEILINGS),
        handoff_text.prediction_text(v, CEILINGS),
        handoff_text.time_text(v),
    ):
        assert text.startswith(f"**{NOTHING}:** this section would show") and why in text
    assert handoff.rate_figure(v, CEILINGS) is None and handoff.share_figure(v) is None
    assert "this study has no forward point timed stage by stage to predict" in handoff_text.gpu_text(v)
    skipped = view(blank, predictions(stage_times()).iloc[:0], ran=metrics(status="skipped"))
    assert "no point of this study ran (1 skipped" in handoff_text.time_text(skipped)
    fused = view(blank, predictions(stage_times()).iloc[:0], ran=metrics(impl="sdpa"))
    said = handoff_text.time_text(fused)
    assert "none of its points that ran is a materialized path whose stages are timed" in said


def test_one_length_no_cache_difference_and_no_prediction_here():
    one = view(stage_times((512,)))
    assert (
        "Every timed length keeps S + P within the largest cache (0.5× its size)"
        in handoff_text.bounds_text(one, CEILINGS)
    )
    flat = stage_times()
    flat["cold_time_ms"] = flat["time_ms"].where(flat["stage"] != "rest")
    said = handoff_text.bounds_text(view(stage_rates(flat)), CEILINGS)
    assert "time per byte is 1× (warm) and 1× (cold)" in said
    gpu_only = predictions(stage_times()).query("target == 'H200'")
    no_exps = {k: v for k, v in CEILINGS.items() if k != "exp_per_s"}
    v = view(predicted=gpu_only, ceilings=no_exps)
    said = handoff_text.bounds_text(v, no_exps)
    assert said.startswith("Without this machine's prediction (results/ceilings.json has no exp_per_s")
    assert f"{NOTHING}" in handoff_text.prediction_text(v, no_exps)
    assert "On this machine" not in handoff_text.gpu_text(v)
    no_gpu = predictions(stage_times()).query("target == 'this machine'")
    assert "the predictions have no GPU" in handoff_text.gpu_text(view(predicted=no_gpu))


def test_the_notebook_renders_the_test_tables(timed, tmp_path):
    """Through papermill, as the workflow runs it, from files this test wrote."""
    timed.to_csv(tmp_path / "stage_times.csv", index=False)
    predictions(timed).to_csv(tmp_path / "stage_predictions.csv", index=False)
    busy = {"level": "L1d", "bytes": 49152, "footprint_bytes": 24576, "copy_gbps": None}
    busy["reason"] = "the median call took less than its fixed cost"
    (tmp_path / "ceilings.json").write_text(json.dumps(CEILINGS | {"levels": [busy, *CEILINGS["levels"]]}))
    (tmp_path / "env.json").write_text(json.dumps(PROVENANCE))
    metrics().to_parquet(tmp_path / "metrics.parquet")
    (tmp_path / "backward.csv").write_text("")  # no backward point
    files = ["metrics.parquet", "env.json", "stage_times.csv", "stage_predictions.csv", "ceilings.json"]
    files += ["backward.csv"]
    parameters = [arg for file in files for arg in ("-p", file.split(".")[0], str(tmp_path / file))]
    out = tmp_path / "handoff.ipynb"
    template = str(ROOT / "reports" / "handoff.ipynb")
    done = subprocess.run(
        [sys.executable, "-m", "papermill", template, str(out), "-k", "python3", *parameters],
        capture_output=True,
        text=True,
        timeout=300,
        env=env(),
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    shown = [o for c in json.loads(out.read_text())["cells"] for o in c.get("outputs", [])]
    said = "".join("".join(o.get("data", {}).get("text/markdown", "")) for o in shown)
    assert handoff_text.bounds_text(view(), CEILINGS) in said
    assert handoff_text.gpu_text(view()) in said
    assert f"**Not drawn:** the copy rate of L1d ({busy['reason']})" in said  # named, not dropped
    images = [o for o in shown if "<img " in "".join(o.get("data", {}).get("text/html", ""))]
    assert len(images) == 3  # rates, shares, the GPU


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"levels": None}, "levels"),  # measured rates without the levels they were measured at
        ({"exp_per_s": 0}, "exp_per_s"),
        ({"copy_gbps": -1.0}, "copy_gbps"),
    ],
)
def test_the_page_holds_the_ceilings_to_their_schema(tmp_path, change, field):
    """Ceilings the workflow would set aside are refused by the page too, naming the field,
    instead of drawing every stage as DRAM-bound."""
    from reports.pages.inputs import InputError, read

    path = tmp_path / "ceilings.json"
    path.write_text(json.dumps(CEILINGS | change))
    with pytest.raises(InputError, match=field):
        read("ceilings", path)
    path.write_text(json.dumps({k: v for k, v in CEILINGS.items() if k != "levels"}))
    with pytest.raises(InputError, match="levels"):
        read("ceilings", path)


# --- the answers first (reports.pages.handoff_answers) ---


def with_expected(timed: pd.DataFrame, ratios: dict[str, float]) -> pd.DataFrame:
    """predictions(timed) with expected times: each stage's warm time over ``ratios[stage]``,
    cold likewise, and a fixed cost of 1 µs (every stage's data dominates but at T = 256
    for the one given a larger fixed cost)."""
    found = predictions(timed)
    mine = found["target"] == "this machine"
    merged = found[mine].merge(
        timed[[*handoff.KEY, "stage", "time_ms", "cold_time_ms"]], on=[*handoff.KEY, "stage"]
    )
    found.loc[mine, "expected_warm_ms"] = (merged["time_ms"] / merged["stage"].map(ratios)).to_numpy()
    found.loc[mine, "expected_cold_ms"] = (merged["cold_time_ms"] / merged["stage"].map(ratios)).to_numpy()
    found.loc[mine, "expected_fixed_ms"] = 1e-3
    return found


OPS = {
    "products": [
        {"dtype": "float32", "head_dim": 64, "shape": s, "place": place, "tokens": t, "flops_per_s": r}
        for s in ("qk", "pv")
        for place, t, r in (("short", 256, 61.3e9), ("inside", 512, 93.7e9), ("past", 2048, 88.1e9))
    ],
    "passes": [
        {"dtype": "float32", "op": op, "place": place, "per_s": r}
        for op, rates in {"scale": (41.7e9, 9.3e9), "softmax": (2.31e9, 2.17e9)}.items()
        for place, r in zip(("inside", "past"), rates, strict=True)
    ],
    "fixed_us": {"elementwise": 1.0, "product": 1.0, "softmax": 1.0, "masked_fill": 1.0},
}


def test_the_answers_say_what_bounds_each_stage_from_the_operation_rates(timed):
    from reports.pages import handoff_answers as answers

    ratios = {"scores": 1.1, "scale": 1.6, "softmax": 0.9, "pv": 1.04}
    v = view(timed, with_expected(timed, ratios), CEILINGS | {"ops": OPS})
    said = answers.stage_answers(v, CEILINGS | {"ops": OPS})
    lines = said.splitlines()
    assert "T = 2,048" in lines[0] and len(lines) == 5
    assert "**scores**" in lines[1] and "bound by its matrix products" in lines[1]
    assert "61.3 GFLOP/s at T = 256 (the sweep's shortest), 93.7 GFLOP/s at T = 512" in lines[1]
    # scale's rate inside (41.7) is over 1.5 times its rate past (9.3): memory; softmax's not
    assert "**scale**" in lines[2] and "bound by memory once S + P outgrow the cache" in lines[2]
    assert "**softmax**" in lines[3] and "bound by its own arithmetic" in lines[3]
    # the rate reached: scale moves 8·T² bytes in 1e-6·T² ms, less the 1 µs fixed cost
    t = 2048
    reached = 8 * t * t / ((1e-6 * t * t - 1e-3) / 1e3) / 1e9
    assert f"it reached {number(reached)} GB/s with its fixed cost taken out" in lines[2]
    assert "warm it took 1.6× its expected time, cold 1.6×" in lines[2]
    accuracy = answers.accuracy_text(v)
    # scale's 8 measurements (4 lengths, warm and cold) miss the ±25 % band, the other 24 hold
    assert "24 of 32 stage times (warm and cold) within ±25% of expected" in accuracy
    assert "worst: scale" in accuracy
    table = answers.accuracy_table(v)
    assert len(table) == 16 and table["warm_ratio"].round(6).isin([1.1, 1.6, 0.9, 1.04]).all()
    fig = answers.accuracy_figure(v)
    assert [ax.get_title() for ax in fig.axes] == ["scores", "scale", "softmax", "pv"]


def test_the_machines_drift_beside_each_point_is_taken_out_of_the_ratios(timed):
    """Records that timed the reference pass 1.6 times as slowly as the ceilings (copy) and
    1.1 times (product): each stage's ratio over its drift, the product's for the products and
    the passes the cache holds, the copy's from DRAM; the count within the band both ways."""
    from reports.pages import handoff_answers as answers

    ratios = {"scores": 1.1, "scale": 1.6, "softmax": 0.9, "pv": 1.04}
    then = {"copy_gbps": 48.0, "product_gflops": 187.0, "method": "m"}
    drifted = timed.assign(
        reference_copy_gbps=30.0, reference_product_gflops=170.0, footprint_bytes=timed["bytes_S"]
    )
    end = then | {"copy_gbps": 46.0}
    ceilings = CEILINGS | {"ops": OPS, "reference_pass": then, "reference_pass_end": end}
    v = view(drifted, with_expected(drifted, ratios), ceilings)
    rows = answers.checked(v, ceilings)
    past = rows["footprint_bytes"] > rows["last_cache_bytes"]
    products = rows["flops"] > 0
    assert past.any() and (~past).any() and products.any()
    assert np.allclose(rows.loc[products, "warm_drift"], 187 / 170)
    assert np.allclose(rows.loc[~products & past, "warm_drift"], 1.6)
    assert np.allclose(rows.loc[~products & ~past, "warm_drift"], 187 / 170)
    assert np.allclose(rows.loc[~products, "cold_drift"], 1.6)
    said = answers.accuracy_text(v, ceilings)
    assert "24 of 32 stage times (warm and cold) within ±25% of expected" in said
    assert "from 1.1× to 1.6× as slowly as when the ceilings were measured" in said
    assert "the same pass moved 4.2% for the copy and 0% for the product" in said
    table = answers.accuracy_table(v, ceilings)
    assert set(answers.DRIFT_COLUMNS) <= set(table.columns)
    assert (table["warm_ratio_over_drift"] == table["warm_ratio"] / table["warm_drift"]).all()
    # records without a reference pass: no drift said, none in the table
    assert "reference pass" not in answers.accuracy_text(
        view(timed, with_expected(timed, ratios), ceilings), ceilings
    )


def test_the_cache_answer_reads_the_largest_cache_against_dram():
    from reports.pages import handoff_answers as answers

    v = view()
    said = answers.cache_answer(v, CEILINGS)
    assert said.startswith("**Can this machine's caches serve the hand-off?** yes:")
    assert "the L3 copies at 40 GB/s, DRAM at 9 GB/s, 4.44× faster" in said
    assert "S + P fill the L3 (4 MiB) at T ≈ 724 in float32" in said
    slow = CEILINGS | {"levels": [CEILINGS["levels"][0] | {"copy_gbps": 10.1}, CEILINGS["levels"][1]]}
    assert "hardly: the L3 copies at 10.1 GB/s, DRAM at 9 GB/s (only 1.12×)" in answers.cache_answer(v, slow)
    assert "give no copy rate" in answers.cache_answer(v, CEILINGS | {"levels": []})
    # no expected times (ceilings without operation rates): said, and which is missing
    assert "no stage has both a measured and an expected time" in answers.accuracy_text(v)
    said = answers.accuracy_text(v, CEILINGS)
    assert "results/ceilings.json holds no operation rates (its ops are missing or null" in said
    only_half = {"products": [{"dtype": "float16", "flops_per_s": 1e9}], "passes": [], "fixed_us": {}}
    said = answers.accuracy_text(v, CEILINGS | {"ops": only_half})
    assert "times no product of the stages' shapes in float32 (only in float16)" in said
    untimed = view(stage_times().iloc[:0], predicted=predictions(stage_times()))
    assert answers.accuracy_text(untimed, CEILINGS).endswith(f"here: {untimed.why_untimed}.")
    assert answers.accuracy_figure(v) is None and answers.stage_answers(v, CEILINGS) == ""


def test_across_the_cache_the_rates_leave_the_fixed_cost_out_where_the_ceilings_timed_it(timed):
    """With the fixed cost of a call known (1 µs here), the GB/s held across the cache are the
    bytes over the time less it, and the sentence says so."""
    v = view(timed, with_expected(timed, {"scores": 1.0, "scale": 1.0, "softmax": 1.0, "pv": 1.0}))
    said = handoff_text.bounds_text(v, CEILINGS)
    scale = _at(timed, "scale")
    fit = scale[scale["sp_over_cache"] <= 1]
    warm_in = (fit["bytes"] / ((fit["time_ms"] - 1e-3) / 1e3) / 1e9).median()
    assert f"**scale** moved a median {number(warm_in)} GB/s warm" in said
    assert "(each call's fixed cost of 1 µs, from the ceilings, taken out)" in said


def test_a_stage_no_longer_than_its_fixed_cost_is_said_too_short_to_measure():
    """The issue's case: T = 48, float16, d = 16, every stage timed at its fixed cost. Divided
    by a 1 ps floor, scale's 9,216 bytes gave 9,216,000 GB/s and pv's 73,728 FLOPs 73,728,000
    GFLOP/s; now each says it was too short to measure. A stage whose data time stands above
    its fixed cost but whose rate beats every copy rate the ceilings measured says so too."""
    from reports.pages import handoff_answers as answers

    t, d = 48, 16
    short = stage_times((256,)).assign(
        tokens=t, dtype="float16", head_dim=d, bytes_S=2 * t * t, bytes_P=2 * t * t
    )
    short["bytes"] = short["stage"].map(
        {"scores": 2 * t * t, "scale": 4 * t * t, "softmax": 4 * t * t, "pv": 2 * t * t}
    )
    short["flops"] = short["stage"].map({"scores": 2 * t * t * d, "pv": 2 * t * t * d}).fillna(0)
    short = stage_rates(short.drop(columns=["gbps", "cold_gbps", "tflops", "exps_per_s"]))
    predicted = with_expected(short, dict.fromkeys(STAGES, 1.0))
    mine = predicted["target"] == "this machine"
    predicted.loc[mine, "expected_fixed_ms"] = predicted.loc[mine, "expected_warm_ms"]  # the time, all fixed
    ceilings = CEILINGS | {"ops": OPS}
    said = answers.stage_answers(view(short, predicted, ceilings), ceilings)
    assert number(4 * t * t / 1e-12 / 1e9) == "9,216,000" and "9,216,000" not in said
    assert number(2 * t * t * d / 1e-12 / 1e9) == "73,728,000" and "73,728,000" not in said
    lines = said.splitlines()[1:]
    assert len(lines) == 4 and all("it was too short to measure (it took " in line for line in lines)
    assert "what is left to its data is within the spread of its repeats or under 5% of its time" in lines[1]
    # scale at 20 ns against a fixed cost of 10: measurable, but 9,216 B in 10 ns beats 40 GB/s
    quick = short.copy()
    quick.loc[quick["stage"] == "scale", "time_ms"] = 2e-5
    predicted = with_expected(quick, dict.fromkeys(STAGES, 1.0))
    mine = predicted["target"] == "this machine"
    predicted.loc[mine & (predicted["stage"] == "scale"), "expected_fixed_ms"] = 1e-5
    said = answers.stage_answers(view(quick, predicted, ceilings), ceilings)
    scale = next(line for line in said.splitlines() if "**scale**" in line)
    assert (
        "it was too short to measure (its bytes over its time would beat the fastest rate this "
        "machine's ceilings measured, 40 GB/s)" in scale
    )
    assert number(4 * t * t / 1e-8 / 1e9) not in scale


def test_a_band_whose_ends_agree_says_so_in_a_sentence():
    """Where both ends of the warm band predict the same at every length, the sentence says
    that neither end is nearer (it once read 'the measurements lie both ends of the band
    predict 7.98 at every length')."""
    timed = stage_times()
    agreed = predictions(timed)
    agreed["predicted_warm_low_ms"] = agreed["predicted_warm_high_ms"]
    said = handoff_text.prediction_text(view(timed, agreed), CEILINGS)
    assert "the two ends agree at every length, so neither is nearer the measurements." in said
    assert "lie both ends" not in said and "the measurements lie" not in said


def test_across_the_cache_a_length_too_short_to_measure_is_left_out_and_an_impossible_rate_unsaid(timed):
    """With a fixed cost as long as scale's shortest length, that length has no rate and the
    sentence says it was left out; with every data time a tenth of the stage's, the rates
    (8 bytes in 0.1 ps per T²: 80 GB/s) would beat the fastest copy the ceilings measured
    (40 GB/s), and none is stated."""
    ratios = dict.fromkeys(STAGES, 1.0)
    predicted = with_expected(timed, ratios)
    shortest = _at(timed, "scale")["time_ms"].min()
    predicted.loc[predicted["target"] == "this machine", "expected_fixed_ms"] = shortest
    said = handoff_text.bounds_text(view(timed, predicted), CEILINGS)
    assert (
        f"(each call's fixed cost of {number(shortest * 1e3)} µs, from the ceilings, taken out; 1 of its 4 "
        "timed lengths too short to measure against it, warm or cold, left out)"
    ) in said
    scale = _at(timed, "scale")
    fit = scale[(scale["sp_over_cache"] <= 1) & (scale["time_ms"] > shortest)]
    assert f"at the {len(fit)} length whose S + P fit" in said
    tenth = with_expected(timed, ratios)
    mine = tenth["target"] == "this machine"
    tenth.loc[mine, "expected_fixed_ms"] = 0.9 * tenth.loc[mine, "expected_warm_ms"]
    said = handoff_text.bounds_text(view(timed, tenth), CEILINGS)
    assert (
        "**scale** was too short to measure (its bytes over its time would beat the fastest rate this "
        "machine's ceilings measured, 40 GB/s)"
    ) in said
    assert "**scale** moved" not in said
    longest = with_expected(timed, ratios)
    longest["expected_fixed_ms"] = _at(timed, "scale")["time_ms"].max()
    said = handoff_text.bounds_text(view(timed, longest), CEILINGS)
    assert (
        "**scale** was timed on both sides of the largest cache, but on one side or both every length "
        "was too short to measure against its fixed cost"
    ) in said
