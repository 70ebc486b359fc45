"""The Decode page follows its tables: the decode model of a small sweep (kernels.models.decode,
four query heads sharing 4, 2 and 1 K/V heads at one query row) and the records of that sweep
on the made-up machine of tests/modelled_study.py (the package's own records, timed by that
machine's rates, the Triton paths counted as their models say). Each section's sentence and
figure is read back against numbers computed here from the same tables; a study without an
inference case says why in every section; and the notebook renders without torch."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from modelled_study import write_study
from workflow_run import ROOT, without_torch

from kernels.spec import ELEMENT_BYTES
from reports.pages import decode as page
from reports.pages import inputs
from reports.pages.common import NOTHING, number

CACHE = 1 << 20
BASE = {"batch": [1], "heads": [4], "head_dim": [16], "inputs": ["normal"], "causal": [False]}
SWEEP = [
    # timed: K + V from a quarter of the cache to four times it, T stepping by 4
    BASE
    | {"impls": ["torch_naive", "sdpa"], "kv_heads": [None, 2, 1], "query_tokens": [1], "dtype": ["float32"]}
    | {"tokens_across_cache": {"from": 0.25, "to": 4, "step": 4, "fills": "kv"}},
    # counted: the Triton paths at one length, the split-KV kernel among them
    BASE
    | {"impls": ["triton_naive", "triton_flash", "triton_split_kv"], "kv_heads": [None, 2, 1]}
    | {"query_tokens": [1], "tokens": [64], "dtype": ["float16"], "blocks": [[16, 16]]},
    # the square problem beside them, which no decode section reads
    BASE | {"impls": ["torch_naive"], "tokens": [64], "dtype": ["float32"]},
    # the split-KV kernel at a split count of its own (num_splits), beside its default
    BASE
    | {"impls": ["triton_split_kv"], "kv_heads": [2], "query_tokens": [1], "tokens": [64], "num_splits": [2]}
    | {"dtype": ["float16"], "blocks": [[16, 16]]},
]
SQUARE_ONLY = [SWEEP[2]]
SENTENCE = rf"\*\*{NOTHING}:\*\* this section would show [^;]+; .+\."


def _study(folder: Path, sweep: list[dict]) -> SimpleNamespace:
    """results/ of ``sweep`` with its decode model, read through the pages' loader."""
    from kernels.models import decode

    results = folder / "results"
    grids = write_study(results, sweep, CACHE)
    decode.write(grids, results / "model" / "decode.csv")
    paths = {"metrics": "metrics.parquet", "env": "env.json", "decode": "model/decode.csv"}
    paths |= {"gpus": "model/gpus.csv", "ceilings": "ceilings.json"}
    found = SimpleNamespace(**{name: inputs.read(name, results / path) for name, path in paths.items()})
    found.folder = folder
    return found


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> SimpleNamespace:
    return _study(tmp_path_factory.mktemp("decode"), SWEEP)


def one_row(decode: pd.DataFrame) -> pd.DataFrame:
    return decode[decode["query_tokens"] == 1].drop_duplicates([*page.CASE])


def test_s_and_p_shrink_to_a_row_while_k_and_v_stay(study):
    """At one query row S and P are one row of T scores per query head (each written and
    read once), K and V all T rows per K/V head: the share the page states, and draws, is
    that one."""
    decode = study.decode
    rows = one_row(decode)
    e = rows["dtype"].map(ELEMENT_BYTES)
    sp = 4 * rows["batch"] * rows["heads"] * rows["tokens"] * e
    kv = 2 * rows["batch"] * rows["kv_heads"] * rows["tokens"] * rows["head_dim"] * e
    qo = 2 * rows["batch"] * rows["heads"] * rows["head_dim"] * e
    assert (rows["sp_bytes"] == sp).all() and (rows["kv_bytes"] == kv).all()
    text = page.share_text(decode)
    for group, part in rows.assign(share=sp / (sp + kv + qo)).groupby("group_size"):
        said = page.span(part["share"], 100)
        assert f"{said}% with {group} query head" in text
    fig = page.share_figure(decode)
    cases = decode.drop_duplicates(page.CASE)
    assert len(fig.axes[0].lines) == len(cases)
    for line in fig.axes[0].lines:  # each ends at one query row, its share there
        x, y = line.get_data()
        assert x.min() == 1 and any(abs(y[x == 1][0] - 100 * s) < 1e-9 for s in sp / (sp + kv + qo))


def test_each_gpu_turns_compute_bound_where_its_intensity_reaches_its_ridge(study):
    decode = study.decode
    intensity = decode["flops"] / decode["fused_compulsory_bytes"]
    compute = decode[intensity >= decode["ridge_flop_per_byte"]]
    table = page.turn_table(decode).set_index(["gpu", "dtype"])
    for gpu, dtype in table.index:
        fewest = compute[(compute["gpu"] == gpu) & (compute["dtype"] == dtype)]["rows_per_kv_head"]
        shown = table.loc[(gpu, dtype), "compute-bound from (rows)"]
        assert (pd.isna(shown) and fewest.empty) or shown == fewest.min()
    text = page.turn_text(decode)
    assert all(f"the {gpu} (" in text for gpu in set(decode["gpu"])) and "decode waits on memory" in text
    fig = page.intensity_figure(decode)
    assert len(fig.axes) == decode["dtype"].nunique()
    ridges = {round(line.get_ydata()[0], 6) for ax in fig.axes for line in ax.lines if line.get_ls() == "--"}
    assert ridges == {round(r, 6) for r in decode["ridge_flop_per_byte"]}


def test_grouped_heads_are_held_against_a_k_v_head_per_query_head(study):
    """The model's K + V per K/V head count, and this machine's time of each decode point
    over its twin's with a K/V head per query head (the index's finding among them)."""
    metrics = study.metrics
    timed = metrics[(metrics["query_tokens"] == 1) & metrics["time_ms"].notna()]
    table = page.grouped_table(metrics)
    assert len(table) == len(timed)  # every timed decode point has its twin here
    for r in table.itertuples():
        twin = timed[
            (timed["impl"] == r.impl) & (timed["tokens"] == r.tokens) & (timed["kv_heads"] == r.heads)
        ]
        assert r.speedup_measured == pytest.approx(twin["time_ms"].iloc[0] / r.time_ms)
        assert r.speedup_from_kv_size == r.heads / r.kv_heads
        assert r.kv_bytes == 2 * r.kv_heads * r.tokens * r.head_dim * ELEMENT_BYTES[r.dtype]
    one = one_row(study.decode)
    longest = one[one["tokens"] == one["tokens"].max()].sort_values("kv_heads", ascending=False)
    pairs = longest[["kv_bytes", "kv_heads"]].to_numpy()
    listed = ", ".join(f"{number(b / 2**20)} MiB with {page.kv_said(kv)}" for b, kv in pairs)
    assert f"): {listed}." in page.grouped_model_text(study.decode)
    text = page.grouped_measured_text(metrics)
    fewer = table[table["kv_heads"] < table["heads"]]
    for (_, kv), part in fewer.groupby(["impl", "kv_heads"]):
        assert f"{number(part['speedup_measured'].median())}× as fast with {page.kv_said(kv)} of 4" in text
    longest = fewer[fewer["tokens"] == fewer["tokens"].max()]
    least = longest[longest["kv_heads"] == 1].sort_values("impl").iloc[0]
    assert page.finding(metrics) == (
        f"At one query row against T = {least['tokens']:,} (float32), {least['impl']} with 1 K/V head "
        f"for 4 query heads runs {number(least['speedup_measured'])}× as fast as with 4, for 4× fewer "
        "K and V bytes."
    )


def test_what_each_path_did_with_the_shared_heads_comes_from_its_records(study):
    """A path that allocated less than K and V repeated per query head read the shared heads
    where they lay, and the operations its call ran are named; one whose time fell far less
    than its bytes is said to spend it on something fewer K/V heads do not shrink. A path that
    allocated that much is said to have had room for the copy, and nothing more."""
    metrics = study.metrics.copy()
    decode = (metrics["query_tokens"] == 1) & metrics["time_ms"].notna()
    sdpa = decode & (metrics["impl"] == "sdpa")
    ops = ["aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention_for_cpu"]
    metrics.loc[sdpa, "ops_run"] = json.dumps(ops)
    metrics.loc[sdpa, "peak_alloc_bytes"] = 2048
    twins = metrics[sdpa & (metrics["kv_heads"] == 4)].set_index("tokens")["time_ms"]
    grouped = sdpa & (metrics["kv_heads"] < 4)
    metrics.loc[grouped, "time_ms"] = metrics.loc[grouped, "tokens"].map(twins) / 1.1  # 1.1× for 2× or 4×
    said = page.grouped_measured_text(metrics)
    longest = metrics[sdpa]["tokens"].max()
    copy = 2 * 4 * longest * 16 * 4  # K and V, one head per query head, float32
    assert (
        f"sdpa allocated at most 2 KiB during a call, less than the {number(copy / 2**20)} MiB that K and V "
        f"repeated per query head take at T = {longest:,}: it read each shared head where it lay, without "
        "copying it; its call ran `aten::scaled_dot_product_attention`, "
        f"`aten::_scaled_dot_product_flash_attention_for_cpu`. At T = {longest:,} its time fell 1.1× for 4× "
        "fewer bytes of K and V, which it did not copy: what its call spends is not reading them from memory"
        in said
    )
    naive = metrics[decode & (metrics["impl"] == "torch_naive") & (metrics["kv_heads"] < 4)]
    top = naive["peak_alloc_bytes"].max()
    assert f"torch_naive allocated up to {number(top / 2**20)} MiB during a call, room for K and V" in said
    assert said.count("docs/decode.md") == 1  # the modelled machine's torch_naive follows its bytes


def test_a_read_rate_beyond_the_ceilings_is_not_stated(study):
    """A decode call timed so short that K + V over it beats every copy rate the ceilings
    measured: that path's rates are not stated, the sentence says the calls were too short."""
    metrics = study.metrics.copy()
    sdpa = (metrics["query_tokens"] == 1) & metrics["time_ms"].notna() & (metrics["impl"] == "sdpa")
    metrics.loc[sdpa, "time_ms"] = 1e-9
    found = page.rates(metrics, study.ceilings)
    text = page.rate_text(found, metrics, study.ceilings)
    fastest = max(level[k] for level in study.ceilings["levels"] for k in ("copy_gbps", "update_gbps"))
    assert (
        "sdpa: no rate stated, a call was too short to measure (its bytes over its time would beat the "
        f"fastest rate this machine's ceilings measured, {number(fastest)} GB/s)" in text
    )
    assert "torch_naive: " in text and " GB/s (" in text.split("torch_naive: ")[1]


def test_splitting_the_keys_costs_its_partials_and_names_what_is_not_modelled(study):
    decode, gpus = study.decode, study.gpus
    table = page.split_table(decode, gpus)
    rows = decode[decode["query_tokens"] == 1].reset_index(drop=True)
    rows = rows.sort_values(["gpu", "dtype", "tokens", "kv_heads"]).reset_index(drop=True)
    assert (
        table["fraction_partials_of_kv"].tolist() == (rows["split_partial_bytes"] / rows["kv_bytes"]).tolist()
    )
    assert table["sms"].tolist() == rows["gpu"].map(gpus.set_index("gpu")["sms"]).tolist()
    unmodelled = rows["fused_programs"].isna()
    assert (table.loc[unmodelled, "fused_programs"] == "not modelled").all()
    said = page.split_text(decode, gpus)
    assert ("not modelled yet" in said) == unmodelled.any()
    # once the fused design's programs are modelled, the page says how many, on how many SMs
    modelled = decode.assign(fused_programs=decode["batch"] * decode["heads"])
    said = page.split_text(modelled, gpus)
    assert "not modelled" not in said and "fused 4 programs on 108 SMs" in said


def test_the_read_rate_is_k_and_v_over_the_time_with_busy_points_marked(study):
    metrics = study.metrics.copy()
    timed = metrics.index[(metrics["query_tokens"] == 1) & metrics["time_ms"].notna()]
    metrics["contention_verdict"] = None
    metrics.loc[timed[0], "contention_verdict"] = "busy"
    found = page.rates(metrics, study.ceilings)
    kv = 2 * found["kv_heads"] * found["tokens"] * found["head_dim"] * 4  # float32, one sequence
    assert found["gbps"].tolist() == pytest.approx((kv / found["time_ms"] * 1e3 / 1e9).tolist())
    assert found["kv_over_cache"].tolist() == (kv / CACHE).tolist()  # the records' last_cache_bytes
    assert found["busy"].sum() == 1
    text = page.rate_text(found, metrics, study.ceilings)
    for impl, part in found.groupby("impl"):
        inside, past = part[part["kv_over_cache"] <= 1], part[part["kv_over_cache"] > 1]
        ratio = inside["gbps"].median() / past["gbps"].median()
        assert f"{impl}: {number(inside['gbps'].median())} GB/s ({len(inside)} points) inside" in text
        assert f"{number(ratio)}× as fast inside" in text
    assert f"1 of the {len(found)} points were timed on a busy machine (ringed)" in text
    labels = page.rate_figure(found, study.ceilings).axes[0].get_legend_handles_labels()[1]
    assert "timed on a busy machine" in labels and "K + V = largest cache" in labels
    assert "Timed on a busy machine" in page.busy_note(page.decode_points(metrics))


def test_the_triton_paths_counted_the_model_to_the_byte(study):
    metrics = study.metrics
    counted = page.inference_points(metrics).dropna(subset=["traffic_counted_bytes"])
    table = page.counted_table(metrics)
    assert len(table) == len(counted) == 10  # three paths, three K/V head counts; one at 2 splits
    assert (table["counted = model"] == "to the byte").all()
    splits = table[table["impl"] == "triton_split_kv"].set_index(["kv_heads", "num_splits"])
    assert sorted(splits.index) == [(1, "–"), (2, "2"), (2, "–"), (4, "–")]
    assert splits.loc[(2, "2"), "traffic_model_bytes"] != splits.loc[(2, "–"), "traffic_model_bytes"]
    assert set(table.loc[table["impl"] != "triton_split_kv", "num_splits"]) == {"–"}
    assert (
        table["model / compulsory"] == table["traffic_model_bytes"] / table["traffic_compulsory_bytes"]
    ).all()
    text = page.counted_text(table, metrics, study.env)
    assert text.startswith("The interpreter counted exactly the model's bytes at 10 of the 10 points of an")
    for r in table[table["kv_heads"] == 1].itertuples():  # one length: the median is the point's
        assert f"{r.impl}: " in text and f"{number(r[-1])}× with 1 K/V head at query_tokens 1" in text


def test_a_study_without_an_inference_case_says_why_in_every_section(tmp_path):
    empty = _study(tmp_path, SQUARE_ONLY)
    assert empty.decode.empty and list(empty.decode.columns)  # the header alone
    said = [
        page.share_text(empty.decode),
        page.turn_text(empty.decode),
        page.grouped_model_text(empty.decode),
        page.grouped_measured_text(empty.metrics),
        page.split_text(empty.decode, empty.gpus),
        page.rate_text(page.rates(empty.metrics, empty.ceilings), empty.metrics, empty.ceilings),
        page.counted_text(page.counted_table(empty.metrics), empty.metrics, empty.env),
    ]
    for sentence in said:
        assert re.fullmatch(SENTENCE, sentence, re.S), sentence
    assert "this study has no inference case" in said[0]
    assert "this study has no point at query_tokens 1 (its implementation: torch_naive)" in said[-2]
    assert "no point whose query_tokens or kv_heads differ from T and H (its implementation" in said[-1]
    figures = (page.share_figure(empty.decode), page.intensity_figure(empty.decode))
    assert figures == (None, None) and page.finding(empty.metrics) is None
    assert page.rate_figure(page.rates(empty.metrics, empty.ceilings), empty.ceilings) is None


def test_the_loader_names_a_decode_table_without_a_column(study, tmp_path):
    path = tmp_path / "decode.csv"
    study.decode.drop(columns="sp_share").to_csv(path, index=False)
    with pytest.raises(inputs.InputError, match="lacks the column sp_share that the reports read"):
        inputs.read("decode", path)


def test_the_notebook_renders_without_torch(study):
    """The page as papermill runs it, in a shell where torch and triton cannot be imported."""
    template = ROOT / "reports" / "decode.ipynb"
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT / 'tests')!r}); import page_renderer; "
        f"from pathlib import Path; page_renderer.TEMPLATES = [Path({str(template)!r})]; "
        f"page_renderer.main([{str(study.folder)!r}])"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env=without_torch(study.folder / "no-torch") | {"MPLBACKEND": "Agg"},
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rendered = json.loads((study.folder / "rendered.json").read_text())["decode"]
    assert rendered["error"] is None, rendered["error"]
    text = "\n".join(v for o in rendered["outputs"] for v in o.values())
    assert NOTHING not in text  # this study fills every section
    assert text.count("<img") == 3 and page.share_text(study.decode) in text
    assert not re.search(r"\d\.\d{6}", text)  # tables print numbers for people
    assert ">speedup from kv size<" in text and ">kv, MiB<" in text  # a ratio is not a size
