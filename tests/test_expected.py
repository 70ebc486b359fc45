"""The expected time of a stage from the operations' rates (kernels.models.expected), the rates
themselves (kernels.measure.op_rates: real torch calls, on machines with other caches), and
the time gate and the stage predictions using them."""

import json
import random
import re
from pathlib import Path

import pytest

from kernels.cli import read_ceilings
from kernels.measure import gates, op_rates
from kernels.models import expected, stage_predictions
from kernels.models.hierarchy import from_ceilings
from kernels.models.stages import stage_costs
from kernels.planning.point import Point
from kernels.planning.sweep import parse_product_shape, product_shapes

MIB = 1 << 20
rng = random.Random(33)


def ops_file(cache: int = 32 * MIB) -> dict:
    """Operation rates drawn fresh (never round numbers), as the ceilings write them."""
    products = [
        {
            "dtype": dt,
            "head_dim": 64,
            "shape": shape,
            "place": place,
            "tokens": t,
            "flops_per_s": rng.uniform(1, 3) * 1e11 * (0.05 if dt == "float16" else 1),
            "method": "m",
        }
        for dt in ("float32", "float16")
        for shape in ("qk", "pv")
        for place, t in (("inside", 1024), ("past", 4096))
    ]
    passes = [
        {
            "dtype": dt,
            "op": op,
            "place": place,
            "per_s": rng.uniform(1, 9) * 1e10,
            "unit": "bytes",
            "method": "m",
        }
        for dt in ("float32", "float16")
        for op in ("scale", "mask", "softmax", "cast")
        for place in ("inside", "flushed", "handed", "past")
    ]
    fixed = {kind: rng.uniform(5, 50) for kind in op_rates.KINDS}
    return {"threads": 2, "cache_bytes": cache, "products": products, "passes": passes, "fixed_us": fixed}


CEILINGS = {
    "device": "cpu",
    "device_name": "a test machine",
    "threads": 2,
    "copy_gbps": 30.0,
    "matmul_tflops": 0.2,
    "levels": [
        {"level": "L3", "bytes": 32 * MIB, "footprint_bytes": 16 * MIB, "copy_gbps": 120.0},
        {"level": "DRAM", "bytes": 1 << 34, "footprint_bytes": 128 * MIB, "copy_gbps": 30.0},
    ],
    "exp_per_s": 2e9,
    "call_us": 1.0,
}


def test_a_product_stage_is_its_fixed_cost_and_its_flops_at_the_dtypes_rate_along_t():
    ops_dict = ops_file()
    ops = expected.read({"ops": ops_dict})
    rate = {(p["dtype"], p["shape"], p["tokens"]): p["flops_per_s"] for p in ops_dict["products"]}
    for dtype in ("float32", "float16"):
        for tokens, want_rate in (
            (512, rate[(dtype, "qk", 1024)]),
            (1024, rate[(dtype, "qk", 1024)]),
            (8192, rate[(dtype, "qk", 4096)]),
        ):
            point = Point("torch_naive", 1, 1, tokens, 64, dtype, False)
            scores = stage_costs(point)[0]
            found = expected.stage_expected(scores, point, ops)
            assert found["fixed_s"] == pytest.approx(ops_dict["fixed_us"]["product"] * 1e-6)
            assert found["data_s"] == pytest.approx(scores.flops / want_rate)
        # at T = 2048, halfway in log T between 1024 and 4096: the mean of the two rates
        middle = expected.product_rate(ops, dtype, 64, "pv", 2048)
        assert middle == pytest.approx((rate[(dtype, "pv", 1024)] + rate[(dtype, "pv", 4096)]) / 2)
    # a head dimension never timed takes the nearest one's rates; a dtype never timed, none
    assert expected.product_rate(ops, "float32", 128, "qk", 1024) == rate[("float32", "qk", 1024)]
    assert expected.product_rate(ops, "bfloat16", 64, "qk", 1024) is None


def test_a_cold_product_pays_its_flushed_extra_for_the_share_the_cache_held_warm():
    ops_dict = ops_file(cache=32 * MIB)
    inside = next(
        p for p in ops_dict["products"] if (p["dtype"], p["shape"], p["place"]) == ("float32", "pv", "inside")
    )
    slower = rng.uniform(1.2, 2.0)  # the flushed call: this much slower than the warm one
    flushed = inside | {
        "place": "flushed",
        "flops_per_s": inside["flops_per_s"] / slower,
        "matrix_bytes": 4 * MIB,
    }
    ops = expected.read({"ops": ops_dict | {"products": [*ops_dict["products"], flushed]}})
    flops = 2 * 1024**2 * 64
    per_byte = (flops / flushed["flops_per_s"] - flops / inside["flops_per_s"]) / (4 * MIB)
    assert ops.cold_extra == {("float32", 64, "pv"): pytest.approx(per_byte)}
    for tokens, share in (
        (1024, 1.0),
        (2048 + 512, expected.cache_share((2048 + 512) ** 2 * 4, 32 * MIB)),
        (4096, 0.0),
    ):
        point = Point("torch_naive", 1, 1, tokens, 64, "float32", False)
        pv = next(s for s in stage_costs(point) if s.stage == "pv")
        warm = expected.stage_expected(pv, point, ops)
        cold = expected.stage_expected(pv, point, ops, cold=True)
        assert cold["time_s"] - warm["time_s"] == pytest.approx(per_byte * pv.handoff_bytes * share)
        # Q·Kᵀ had no flushed product timed here: cold as warm
        scores = stage_costs(point)[0]
        assert expected.stage_expected(scores, point, ops, cold=True) == expected.stage_expected(
            scores, point, ops
        )
    assert 0 < expected.cache_share((2048 + 512) ** 2 * 4, 32 * MIB) < 1


def test_a_pass_stage_runs_inside_the_cache_warm_from_dram_cold_and_past_it_at_the_past_rate():
    ops_dict = ops_file(cache=32 * MIB)
    ops = expected.read({"ops": ops_dict})
    per_s = {(p["dtype"], p["op"], p["place"]): p["per_s"] for p in ops_dict["passes"]}
    fixed = ops_dict["fixed_us"]["elementwise"] * 1e-6
    small = Point("torch_naive", 1, 1, 1024, 64, "float32", False)  # S: 4 MiB, under half the cache
    large = Point("torch_naive", 1, 1, 4096, 64, "float32", False)  # S: 64 MiB, past it
    for point, warm_place, cold_place in ((small, "handed", "flushed"), (large, "past", "past")):
        scale = next(s for s in stage_costs(point) if s.stage == "scale")
        warm = expected.stage_expected(scale, point, ops)
        cold = expected.stage_expected(scale, point, ops, cold=True)
        assert warm["time_s"] == pytest.approx(fixed + scale.bytes / per_s[("float32", "scale", warm_place)])
        assert cold["time_s"] == pytest.approx(fixed + scale.bytes / per_s[("float32", "scale", cold_place)])
    # between half the cache and all of it, the share held falls linearly
    assert expected.cache_share(16 * MIB, 32 * MIB) == 1.0
    assert expected.cache_share(24 * MIB, 32 * MIB) == pytest.approx(0.5)
    assert expected.cache_share(32 * MIB, 32 * MIB) == 0.0
    # softmax follows scale (no product before it), so warm it runs at the inside rate
    softmax = next(s for s in stage_costs(small) if s.stage == "softmax")
    assert expected.stage_expected(softmax, small, ops)["data_s"] == pytest.approx(
        1024 * 1024 / per_s[("float32", "softmax", "inside")]
    )
    # a float16 softmax adds its cast into P and a second fixed cost
    point = Point("torch_naive", 1, 1, 1024, 64, "float16", False)
    softmax = next(s for s in stage_costs(point) if s.stage == "softmax")
    n = 1024 * 1024
    want = (
        ops_dict["fixed_us"]["softmax"] * 1e-6
        + n / per_s[("float16", "softmax", "inside")]
        + n * 6 / per_s[("float16", "cast", "inside")]
        + ops_dict["fixed_us"]["elementwise"] * 1e-6
    )
    assert expected.stage_expected(softmax, point, ops)["time_s"] == pytest.approx(want)


def test_product_lengths_follow_the_cache_and_the_sweep():
    """Inside: the T×T tensor a quarter of the cache; past: four times it; in whole multiples
    of 64, clamped to the sweep's lengths, on machines with other caches."""
    assert op_rates.product_lengths(4, 32 * MIB, 16, 100_000) == {"short": 16, "inside": 1472, "past": 5824}
    assert op_rates.product_lengths(4, 48 * MIB, 16, 100_000) == {"short": 16, "inside": 1792, "past": 7104}
    assert op_rates.product_lengths(2, 32 * MIB, 16, 100_000) == {"short": 16, "inside": 2048, "past": 8192}
    assert op_rates.product_lengths(4, 256 * MIB, 256, 8192) == {"short": 256, "inside": 4096, "past": 8192}
    assert op_rates.product_lengths(4, 32 * MIB, 16, 100) == {"short": 16, "inside": 100}
    assert op_rates.product_lengths(4, None, 256, 1024) == {"short": 256, "past": 1024}
    # a ten-million-token sweep times no product whose T×T tensor is over 1 GiB
    assert op_rates.product_lengths(4, 32 * MIB, 10**7, 10**7) == {"short": 16384}
    assert op_rates.product_lengths(2, None, 256, 10**7) == {"short": 256, "past": 23168}


def test_the_sweeps_products_name_each_dtype_and_head_dim_timed():
    points = [
        Point("torch_naive", 1, 1, t, d, dt, False)
        for t in (256, 4096)
        for d in (32, 128)
        for dt in ("float32", "float16")
    ] + [Point("triton_flash", 1, 1, 64, 16, "float16", False, 16, 16)]
    found = product_shapes(points, "cpu")
    assert found == [
        "float16:32:256:4096",
        "float16:128:256:4096",
        "float32:32:256:4096",
        "float32:128:256:4096",
    ]
    # a K/V head with fewer query rows than keys (decode, or a group of 2 rows against 7 keys)
    # marks its dtype and head dimension for the one-row products; 4 rows against 4 keys do not
    fewer = [
        Point("sdpa", 1, 8, 8192, 32, "float16", False, query_tokens=1),
        Point("torch_naive", 1, 4, 7, 128, "float32", True, query_tokens=1, kv_heads=2),
        Point("torch_naive", 1, 4, 4, 64, "float32", True, query_tokens=1, kv_heads=1),
    ]
    assert product_shapes(points + fewer, "cpu") == [
        "float16:32:256:8192:rows",
        "float16:128:256:4096",
        "float32:32:256:4096",
        "float32:64:4:4",
        "float32:128:7:4096:rows",
    ]
    assert "float16:16:64:64" in product_shapes(points, "cuda")
    assert parse_product_shape("float32:64:256:8192") == {
        "dtype": "float32",
        "head_dim": 64,
        "shortest": 256,
        "longest": 8192,
    }
    assert parse_product_shape("float32:64:1:8192:rows")["rows"] is True
    for bad, says in (
        ("float8:64:1:2", "dtype 'float8'"),
        ("float32:64:9:2", "shortest <= longest"),
        ("float32:x:1:2", "whole numbers"),
        ("float32:64", "dtype:head_dim:shortest:longest"),
        ("float32:64:1:2:cols", ":rows where"),
    ):
        with pytest.raises(ValueError, match=says):
            parse_product_shape(bad)


def test_the_gate_holds_a_float16_call_at_the_float16_rates():
    """A float16 point whose products the ceilings timed slow is skipped at those rates; at the
    one float32 square product's rate it would have passed the gate."""
    slow = {
        "threads": 2,
        "cache_bytes": 32 * MIB,
        "passes": [],
        "fixed_us": {k: 10.0 for k in op_rates.KINDS},
        "products": [
            {
                "dtype": "float16",
                "head_dim": 128,
                "shape": s,
                "place": "inside",
                "tokens": 8192,
                "flops_per_s": r,
                "method": "m",
            }
            for s, r in (("qk", 8.6e9), ("pv", 0.44e9))
        ],
    }
    point = Point("torch_naive", 1, 1, 8192, 128, "float16", False)
    assert gates.too_slow(point, CEILINGS, 30) is None  # the square float32 rate: 0.2 s of products
    reason = gates.too_slow(point, CEILINGS | {"ops": slow}, 30)
    assert reason and "GFLOP/s for float16" in reason and "over the budget of 30 s" in reason
    flops = 4 * 8192**2 * 128
    assert gates.predicted_seconds(point, CEILINGS | {"ops": slow}) == pytest.approx(
        flops / 2 / 8.6e9 + flops / 2 / 0.44e9
    )


def test_stage_predictions_carry_the_expected_time_for_torch_naive_on_this_machine_only():
    ceilings = CEILINGS | {"ops": ops_file()}
    sweep = [
        {
            "impls": ["torch_naive", "triton_naive"],
            "batch": [1],
            "heads": [1],
            "inputs": ["normal"],
            "tokens": [256, 2048],
            "head_dim": [64],
            "dtype": ["float32", "float16"],
            "causal": [True],
            "blocks": [[64, 64]],
        }
    ]
    targets, left_out = stage_predictions.machines(ceilings)
    assert left_out is None and targets[-1].ops is not None
    rows = stage_predictions.prediction_rows(sweep, targets)
    mine = [r for r in rows if r["target"] == "this machine" and r["impl"] == "torch_naive"]
    assert {r["stage"] for r in mine} == {"scores", "scale", "mask", "softmax", "pv"} and len(mine) == 20
    for row in mine:
        assert row["expected_warm_ms"] >= row["expected_fixed_ms"] > 0 and row["expected_cold_ms"] > 0
    others = [r for r in rows if r not in mine]
    assert others and all(r["expected_warm_ms"] is None for r in others)
    # the roofline's product ceiling for a dtype is the fastest product timed in it
    machine = from_ceilings(ceilings)
    fastest = max(p["flops_per_s"] for p in ceilings["ops"]["products"] if p["dtype"] == "float16")
    assert machine.product_flops_per_s(Point("torch_naive", 1, 1, 256, 64, "float16", False)) == fastest


def one_mib_machine(root: Path) -> Path:
    """An OS cache tree (ATTNIO_SYSFS_CPU) whose CPUs share one 1 MiB cache and have no other:
    the ceilings copy through one level and DRAM, and a float32 stage at T = 256 (768 KiB)
    outgrows the half of it a pass is timed inside, so passes are timed past it too."""
    from kernels.planning.cpu_caches import affinity

    cpus = affinity() or [0, 1]
    for cpu in cpus:
        folder = root / f"cpu{cpu}" / "cache" / "index0"
        folder.mkdir(parents=True)
        files = {"level": 2, "type": "Unified", "size": "1024K", "shared_cpu_list": ",".join(map(str, cpus))}
        for name, value in (files | {"coherency_line_size": 64}).items():
            (folder / name).write_text(f"{value}\n")
    return root


@pytest.fixture(scope="module")
def handoff_shapes(tmp_path_factory) -> Path:
    """Head dimensions 32 and 128, float32 and float16, two lengths, causal and not, given as
    configuration only, on the 1 MiB machine: the workflow's ceilings and stage predictions
    (one ceilings job for both tests that read it: the microbenchmarks cost the time here)."""
    from workflow_run import ROOT, checkout_copy, env, snakemake

    base = tmp_path_factory.mktemp("shapes")
    workdir = checkout_copy(base / "study")
    (workdir / "shapes.yaml").write_text(
        "device: cpu\n"
        "timing: {cpu_seconds: 0.3, stage_seconds: 0.1}\n"  # the ci preset's: rates sampled a tenth as long
        "sweep:\n"
        "  - {impls: [torch_naive], tokens: [64, 256], head_dim: [32, 128], dtype: [float32, float16],"
        " causal: [true, false]}\n"
        "  - {impls: [torch_naive], query_tokens: [1], heads: [8], kv_heads: [null, 2], tokens: [256],"
        " head_dim: [128], dtype: [float32], causal: [false]}\n"  # decode: one-row products, float32 d 128
    )
    machine = {"ATTNIO_SYSFS_CPU": str(one_mib_machine(base / "cpu"))}
    done = snakemake(
        workdir, "results/model/stage_predictions.csv", "--cores", "2",
        "--configfile", str(ROOT / "config" / "config.yaml"), "shapes.yaml", environment=env() | machine,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return workdir / "results"


@pytest.mark.integration  # make integration (CI): a workflow of its own, 20 s
def test_the_ceilings_command_times_the_sweeps_operations(handoff_shapes):
    """The real microbenchmarks, as the workflow's ceilings job runs them for the sweep: every
    product shape at its shortest length and inside the cache (clamped to the sweep's
    longest: past it is longer than any T swept), passes inside, flushed and past the cache,
    every product's rate positive and saying how it was had, the file held to its schema by
    the stage predictions' command."""
    found = json.loads((handoff_shapes / "ceilings.json").read_text())
    ops = found["ops"]
    assert ops["cache_bytes"] == 1 * MIB
    assert {(p["dtype"], p["head_dim"], p["shape"]) for p in ops["products"]} == {
        (dt, d, s) for dt in ("float32", "float16") for d in (32, 128) for s in ("qk", "pv")
    }
    # the shortest length, and inside and past clamped to the sweep's longest
    for dtype in ("float32", "float16"):
        places = {(p["place"], p["tokens"]) for p in ops["products"] if p["dtype"] == dtype}
        assert places == {("short", 64), ("inside", 256), ("flushed", 256)}, dtype
    # (a flushed call on a 1 MiB machine can take less than a product's fixed cost: no rate then)
    assert all(p["flops_per_s"] > 0 for p in ops["products"] if p["place"] != "flushed")
    assert all(p["method"] for p in ops["products"])
    # one-row products where the sweep decodes (float32, d 128), K or V inside the cache and past it
    assert {(p["dtype"], p["head_dim"], p["shape"], p["place"]) for p in ops["rows"]} == {
        ("float32", 128, s, place) for s in ("qk", "pv") for place in ("flushed", "past")
    }
    kv = {
        place: {p["heads"] * p["tokens"] * 128 * 4 for p in ops["rows"] if p["place"] == place}
        for place in ("flushed", "past")
    }
    assert max(kv["flushed"]) <= ops["cache_bytes"] / 2 < ops["cache_bytes"] < min(kv["past"])
    # a flushed call of half a 1 MiB cache can take less than a product's fixed cost: no rate then
    assert all((p["per_s"] is None or p["per_s"] > 0) and p["method"] for p in ops["rows"])
    assert {(p["op"], p["place"]) for p in ops["passes"] if p["dtype"] == "float16"} == {
        (op, place) for op in ("scale", "mask", "softmax", "cast") for place in ("inside", "flushed", "past")
    } | {("scale", "handed")}
    assert set(ops["fixed_us"]) == set(op_rates.KINDS) and all(v >= 0 for v in ops["fixed_us"].values())
    held = read_ceilings(str(handoff_shapes / "ceilings.json"))  # the workflow's schema for it
    point = {
        "impls": ["torch_naive"],
        "batch": [1],
        "heads": [1],
        "inputs": ["normal"],
        "tokens": [128],
        "head_dim": [128],
        "dtype": ["float16"],
        "causal": [True],
    }
    rows = stage_predictions.prediction_rows([point], stage_predictions.machines(held)[0])
    mine = [r for r in rows if r["target"] == "this machine"]
    assert len(mine) == 5 and all(r["expected_warm_ms"] > 0 for r in mine)


@pytest.mark.integration  # make integration (CI): reads that workflow
def test_a_handoff_sweep_of_other_shapes_gets_an_expected_time_for_every_stage(handoff_shapes):
    """Every torch_naive stage of the configured shapes on this machine gets its expected
    warm and cold time (how close they come is a benchmark's question, not a test's)."""
    import csv

    with open(handoff_shapes / "model" / "stage_predictions.csv") as table:
        rows = [r for r in csv.DictReader(table) if r["target"] == "this machine"]
    cases = {
        (r["tokens"], r["head_dim"], r["dtype"], r["causal"], r["query_tokens"], r["kv_heads"]) for r in rows
    }
    assert len(cases) == 18 and len(rows) == 18 * 4 + 8  # four stages, five where causal; two decode
    for row in rows:
        assert float(row["expected_warm_ms"]) > 0 and float(row["expected_cold_ms"]) > 0, row


def test_the_handoff_shapes_preset_plans_on_machines_with_other_caches(tmp_path):
    """config/presets/handoff_shapes.yaml, planned (a dry run) for a 32 MiB and a 48 MiB
    cache: torch_naive at d = 32 and 128, float32 and float16, causal and not, four lengths
    each, and the ceilings job that times those products."""
    from workflow_run import ROOT, checkout_copy, snakemake

    workdir = checkout_copy(tmp_path / "plan")
    preset = [str(ROOT / "config" / f) for f in ("config.yaml", "presets/handoff_shapes.yaml")]
    for mib in (32, 48):
        cache = f"cache_bytes={mib << 20}"
        done = snakemake(workdir, "-n", "-p", "--cores", "2", "--configfile", *preset, "--config", cache)
        assert done.returncode == 0, done.stderr[-3000:]
        planned = re.findall(r"points/torch_naive/(float\w+)/B1-H1-T(\d+)-d(\d+)-(causal|full)", done.stdout)
        cases = {(dtype, int(d), mask) for dtype, _, d, mask in planned}
        assert len(cases) == 8 and len({(dtype, t) for dtype, t, _, _ in planned}) == 8
        ceilings = next(line for line in done.stdout.splitlines() if "kernels ceilings" in line)
        for dtype, d in {(dt, d) for dt, d, _ in cases}:  # each dtype and d the sweep runs
            assert f" {dtype}:{d}:" in ceilings, ceilings


def test_a_product_too_slow_to_time_at_the_length_wanted_is_timed_shorter():
    """At the rate found so far, a call of 2·T²·d FLOPs over PRODUCT_CALL_MAX_S is timed at
    the longest multiple of 64 under it (a slow float16 P·V cannot use up the ceilings' time)."""
    limit = op_rates.PRODUCT_CALL_MAX_S
    assert op_rates.capped_length(8192, 128, None) == 8192  # nothing timed yet
    assert op_rates.capped_length(4096, 64, 1e12) == 4096
    rate = 2.7e9  # FLOP/s
    capped = op_rates.capped_length(8192, 128, rate)
    assert capped % 64 == 0 and 2 * capped**2 * 128 / rate <= limit < 2 * (capped + 64) ** 2 * 128 / rate
