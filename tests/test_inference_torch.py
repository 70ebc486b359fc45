"""The PyTorch paths on the inference shapes (issue 47): fewer queries than keys (query_tokens,
causal aligned to the end of the keys) and grouped K/V heads (kv_heads), against the float64
definition; torch_naive's products read the shared K/V head without copying it; its stage
models at a decode point, by hand from the shape; and validation's inference cases."""

import json
import random
import subprocess
import sys
from dataclasses import replace

import pytest
import torch

from kernels import catalog
from kernels.impl.inputs import make_qkv
from kernels.impl.reference import reference_float64
from kernels.impl.registry import attention
from kernels.io.records import read_leaf, validate_record
from kernels.measure.memory import peak_allocated_cpu, profiled_cpu
from kernels.measure.run import measure
from kernels.measure.saved import saved_bytes, saved_during
from kernels.measure.timing import Windows, windows
from kernels.measure.validate import INFERENCE_CPU_SHAPES, validate
from kernels.models import expected
from kernels.models.cost import compulsory_transfers
from kernels.models.stages import stage_costs
from kernels.paths.sdpa.forward import sdpa, unavailable
from kernels.paths.torch_naive.forward import torch_naive, torch_naive_stages
from kernels.paths.torch_naive.model import kept
from kernels.planning.point import Point

H, T, D = 8, 37, 16
TOLERANCE = {torch.float32: 1e-5, torch.float16: 3e-3}
rng = random.Random(47)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("impl", ["torch_naive", "sdpa", "sdpa_math", "sdpa_flash"])
def test_outputs_match_float64_on_inference_shapes(impl, dtype):
    """Tq 1 and 7 against odd T, kv_heads 8, 2 and 1 of 8 heads, causal and not, strided
    (bthd) and contiguous; the forced backends a CPU has (math, flash) too."""
    seed = 0
    for layout in ("bthd", "contiguous"):
        for queries in (1, 7):
            for kv_heads in (H, 2, 1):
                for causal in (False, True):
                    seed += 1
                    q, k, v = make_qkv(
                        2, H, T, D, dtype, "cpu", seed, layout, query_tokens=queries, kv_heads=kv_heads
                    )
                    out = attention(q, k, v, impl=impl, causal=causal)
                    error = (out.double() - reference_float64(q, k, v, causal)).abs().max().item()
                    assert out.shape == q.shape and error < TOLERANCE[dtype], (
                        layout,
                        queries,
                        kv_heads,
                        causal,
                    )


def test_causal_queries_are_the_last_positions():
    """With fewer queries than keys the last query sees every key (so equals the unmasked
    result) and the first sees T − Tq + 1 of them: the mask is aligned to the end."""
    q, k, v = make_qkv(1, H, T, D, torch.float32, "cpu", 5, query_tokens=7, kv_heads=2)
    for impl in ("torch_naive", "sdpa"):
        causal, full = (attention(q, k, v, impl=impl, causal=c) for c in (True, False))
        assert torch.allclose(causal[..., -1, :], full[..., -1, :], atol=1e-6)
        seen = T - 7 + 1
        first = attention(q[..., :1, :], k[..., :seen, :], v[..., :seen, :], impl=impl, causal=False)
        assert torch.allclose(causal[..., :1, :], first, atol=1e-6)


@pytest.mark.parametrize("causal", [False, True])
def test_the_stage_chain_computes_torch_naive_on_grouped_heads(causal):
    q, k, v = make_qkv(2, H, T, D, torch.float16, "cpu", 9, "bthd", query_tokens=7, kv_heads=2)
    stages, out = torch_naive_stages(q, k, v, causal)
    point = Point("torch_naive", 2, H, T, D, "float16", causal, query_tokens=7, kv_heads=2)
    assert [name for name, _ in stages] == [c.stage for c in stage_costs(point)]
    out.fill_(float("nan"))
    for _, run in stages:
        run()
    assert torch.equal(out, torch_naive(q, k, v, causal))


def test_torch_naive_never_copies_k_or_v():
    """A K/V head's query heads are one product's rows: the call allocates S, P and O and
    nothing else (no K or V per query head, nor one copy of K), and in the stage chain the
    products allocate nothing at all."""
    B, heads, tokens, d = 1, 8, 512, 64
    for queries, kv_heads in ((1, 1), (7, 2)):
        q, k, v = make_qkv(
            B, heads, tokens, d, torch.float32, "cpu", 1, query_tokens=queries, kv_heads=kv_heads
        )
        peak, _ = peak_allocated_cpu(lambda q=q, k=k, v=v: torch_naive(q, k, v, True))
        s = B * heads * queries * tokens * 4  # S, and P alike (float32: no wider softmax result)
        o = B * heads * queries * d * 4
        assert peak == 2 * s + o < B * kv_heads * tokens * d * 4 < B * heads * tokens * d * 4
        stages, _ = torch_naive_stages(q, k, v, True)
        products = dict(stages)
        assert [peak_allocated_cpu(products[name])[0] for name in ("scores", "pv")] == [0, 0]


def test_sdpa_on_grouped_heads_at_decode_copies_neither_k_nor_v():
    """What docs/decode.md says of PyTorch's CPU SDPA with enable_gqa at one query row, and
    what the Decode page reads from the records: one fused CPU operation takes K and V as given
    (no operation that repeats, gathers or concatenates them), and the call allocates nothing
    the size of K and V per query head, nor of one K/V head."""
    B, heads, tokens, d = 1, 8, 4096, 64
    q, k, v = make_qkv(B, heads, tokens, d, torch.float32, "cpu", 1, query_tokens=1, kv_heads=1)
    peak, ops, out = profiled_cpu(lambda: sdpa(q, k, v, False))
    assert out.shape == q.shape and "aten::_scaled_dot_product_flash_attention_for_cpu" in ops
    assert not {"aten::repeat_interleave", "aten::index_select", "aten::cat", "aten::repeat"} & set(ops)
    assert peak < B * tokens * d * 4 < 2 * B * heads * tokens * d * 4


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_autograd_keeps_what_the_model_says_on_grouped_heads(dtype):
    """What torch_naive's backward keeps (kernels.measure.saved) is its kept model to the byte:
    K and V once per K/V head, P per query head."""
    for kv_heads in (2, 1):
        q, k, v = make_qkv(1, H, T, D, getattr(torch, dtype), "cpu", 3, kv_heads=kv_heads)
        for x in (q, k, v):
            x.requires_grad_()
        _, saved = saved_during(lambda q=q, k=k, v=v: torch_naive(q, k, v, True))
        point = Point("torch_naive", 1, H, T, D, dtype, True, kv_heads=kv_heads)
        assert saved_bytes(saved) == sum(kept(point).values())


def test_stage_costs_at_a_decode_point_by_hand():
    B, heads, kv_heads, tokens, d, e = 2, 8, 2, 4097, 64, 2
    point = Point("torch_naive", B, heads, tokens, d, "float16", True, query_tokens=1, kv_heads=kv_heads)
    costs = {c.stage: c for c in stage_costs(point)}
    n = B * heads * 1 * tokens  # scores: one row per query head
    q_bytes, kv_bytes = B * heads * d * e, B * kv_heads * tokens * d * e  # K, V once per K/V head
    for product, operand in (("scores", "K"), ("pv", "V")):
        assert costs[product].flops == 2 * n * d
        assert costs[product].handoff_bytes == costs[product].footprint_bytes == n * e
        assert costs[product].other_bytes == q_bytes + kv_bytes
        assert compulsory_transfers(point)[(product, operand, "load")] == kv_bytes
    assert costs["scale"].bytes == 2 * n * e and costs["mask"].other_bytes == n
    assert costs["softmax"].exps == n and costs["softmax"].handoff_bytes == 2 * n * e + 2 * n * 4
    # the Triton materialized path's stages: S and P one (1 × T) row per query head
    naive = stage_costs(replace(point, impl="triton_naive"))
    assert {c.stage: c.footprint_bytes for c in naive}["scores"] == n * e


def ops_of(product_rate: float, stream_rate: float, cache: int) -> expected.Ops:
    """Operation rates drawn around the two given (never round numbers), as the ceilings
    write them: products timed square at two lengths and with one row per head (bytes per
    second, inside the cache and past it), passes at every place."""
    products = [
        {
            "dtype": "float16",
            "head_dim": 64,
            "shape": shape,
            "tokens": t,
            "flops_per_s": product_rate * rng.uniform(1, 2),
        }
        for shape in ("qk", "pv")
        for t in (1024, 4096)
    ]
    passes = [
        {"dtype": "float16", "op": op, "place": place, "per_s": stream_rate * rng.uniform(1, 2)}
        for op in ("scale", "mask", "softmax", "cast")
        for place in ("inside", "flushed", "handed", "past")
    ]
    rows = [
        {
            "dtype": "float16",
            "head_dim": 64,
            "shape": shape,
            "place": place,
            "per_s": stream_rate * rng.uniform(1, 2),
        }
        for shape in ("qk", "pv")
        for place in ("flushed", "past")
    ]
    fixed = {kind: rng.uniform(5, 50) for kind in ("product", "elementwise", "softmax", "masked_fill")}
    found = {"cache_bytes": cache, "products": products, "rows": rows, "passes": passes, "fixed_us": fixed}
    return expected.read({"ops": found})


def test_a_decode_product_is_bound_by_its_bytes_a_square_one_by_its_flops():
    """The product rates were timed square; one query row per head (a matrix-vector product)
    takes at least its bytes at the one-row product's measured rates from DRAM (into a cache
    with room, and past it), while a square product keeps its FLOPs at the product rate."""
    cache = 32 << 20
    ops = ops_of(product_rate=1e12, stream_rate=1e9, cache=cache)
    decode = Point("torch_naive", 2, 8, 4097, 64, "float16", True, query_tokens=1, kv_heads=2)
    square = Point("torch_naive", 1, 2, 1024, 64, "float16", True)
    rate = {(s, t): r for (_, _, s), found in ops.products.items() for t, r in found}
    for stage in (c for c in stage_costs(decode) if c.stage in expected.PRODUCT_SHAPE):
        assert stage.bytes <= cache / 2  # held in the cache: warm at the inside rate
        shape = expected.PRODUCT_SHAPE[stage.stage]
        computed = stage.flops / rate[(shape, 4096)]
        for cold in (False, True):  # K and V from DRAM either way, at the rate into a cache with room
            found = expected.stage_expected(stage, decode, ops, cold=cold)
            streamed = stage.bytes / ops.rows[("float16", 64, shape, "flushed")]
            assert streamed > computed and found["data_s"] == pytest.approx(streamed)
    # past the cache, warm: the share the cache holds at the inside rate, the rest past it
    long = replace(decode, tokens=3 * cache // (4 * 2 * 2 * 64 * 2))  # K: 3/4 of the cache
    scores = stage_costs(long)[0]
    share = expected.cache_share(scores.bytes, cache)
    assert 0 < share < 1
    inside, past = (ops.rows[("float16", 64, "qk", place)] for place in ("flushed", "past"))
    want = share * scores.bytes / inside + (1 - share) * scores.bytes / past
    assert expected.stage_expected(scores, long, ops)["data_s"] == pytest.approx(want)
    # a ceilings file without one-row products: no expected time, rather than a guessed one
    older = replace(ops, rows={})
    assert expected.stage_expected(stage_costs(decode)[0], decode, older) is None
    for stage in (c for c in stage_costs(square) if c.stage in expected.PRODUCT_SHAPE):
        computed = stage.flops / rate[(expected.PRODUCT_SHAPE[stage.stage], 1024)]
        assert expected.stage_expected(stage, square, ops)["data_s"] == pytest.approx(computed)
    # a product rate slow enough: the decode product's FLOPs take longer than its bytes
    slow = ops_of(product_rate=1e6, stream_rate=1e9, cache=cache)
    scores = stage_costs(decode)[0]
    want = scores.flops / slow.products[("float16", 64, "qk")][-1][1]
    assert expected.stage_expected(scores, decode, slow)["data_s"] == pytest.approx(want)
    # the softmax's elements: one row of T per query head
    softmax = next(c for c in stage_costs(decode) if c.stage == "softmax")
    found = expected.pass_data_seconds(softmax, decode, ops, 1.0, cold=False)
    n = 2 * 8 * 4097
    sm, cast = (ops.passes[("float16", op, "inside")] for op in ("softmax", "cast"))
    assert found == pytest.approx(n / sm + n * 6 / cast + ops.fixed_s["elementwise"])


def test_a_decode_point_is_measured_with_its_stages():
    point = Point("torch_naive", 1, 8, 1024, 64, "float32", True, query_tokens=1, kv_heads=2)
    threads = torch.get_num_threads()
    try:
        with windows(Windows(cpu_seconds=0.3, stage_seconds=0.1)):
            record = measure(point, "cpu", threads=1)
    finally:
        torch.set_num_threads(threads)
    validate_record(record)
    assert record["status"] == "ok" and record["max_abs_error"] < 1e-5
    assert (record["query_tokens"], record["kv_heads"]) == (1, 2)
    costs = stage_costs(point)
    assert [s["stage"] for s in record["stage_times"]] == [c.stage for c in costs]
    assert [s["bytes"] for s in record["stage_times"]] == [c.bytes for c in costs]
    assert "aten::bmm" in record["ops_run"]  # a K/V head's query rows as one batched product


def test_sdpa_backends_say_which_shape_they_refuse():
    why = unavailable("efficient", torch.float16, "cpu", 64, True, query_tokens=1, kv_heads=2)
    if not torch.cuda.is_available():  # a CPU has no efficient backend at all
        assert "grouped K/V heads (enable_gqa)" in why and "lower-right causal bias" in why
        assert unavailable("math", torch.float16, "cpu", 64, True, query_tokens=1, kv_heads=2) is None
        assert unavailable("flash", torch.float16, "cpu", 64, True, query_tokens=7, kv_heads=1) is None


def test_validation_runs_the_inference_cases_on_the_paths_that_take_them(monkeypatch):
    """Every inference case passes on torch_naive and sdpa, each row saying its shape; a
    registration that takes only kv_heads is validated on the grouped-heads case alone."""
    entry = catalog.get("sdpa_math")
    monkeypatch.setitem(catalog._registered, "sdpa_math", replace(entry, takes=frozenset({"kv_heads"})))
    impls = ("torch_naive", "sdpa", "sdpa_math")
    results = validate(impls=impls, dtypes=("float32", "float16"), shapes=INFERENCE_CPU_SHAPES)
    assert all(r.verdict == "pass" and r.as_expected for r in results)
    shapes = {(r.impl, r.tokens, r.queries, r.kv) for r in results}
    for shape in INFERENCE_CPU_SHAPES:
        said = (shape.tokens, shape.query_tokens or shape.tokens, shape.kv_heads or shape.heads)
        grouped_only = shape.query_tokens is None
        assert {i for i, *s in shapes if tuple(s) == said} == set(impls if grouped_only else impls[:2])
    assert len(results) == 2 * 2 * (2 * len(INFERENCE_CPU_SHAPES) + 1)


def test_the_validate_command_takes_an_inference_shape(tmp_path):
    out = tmp_path / "v.json"
    args = ["--impl", "torch_naive", "sdpa", "--dtype", "float16", "--tokens", "33", "--head-dim", "16"]
    args += ["--heads", "4", "--query-tokens", "1", "--kv-heads", "2", "--quiet", "--json", str(out)]
    done = subprocess.run(
        [sys.executable, "-m", "kernels", "validate", "--device", "cpu", *args],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = read_leaf(out, "validation")
    assert [(r["impl"], r["query_tokens"], r["kv_heads"], r["verdict"]) for r in rows] == [
        (impl, 1, 2, "pass") for _causal in (False, True) for impl in ("torch_naive", "sdpa")
    ]
    assert json.loads(out.read_text()) == rows


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--query-tokens", "34"], "query_tokens=34: at most tokens=33"),
        (["--kv-heads", "3"], "kv_heads=3: must divide heads=4"),
        (["--query-tokens", "1", "--backward"], "--backward with --query-tokens 1: a backward needs as many"),
        (
            ["--kv-heads", "2", "--impl", "sdpa_math"],
            "--impl sdpa_math: impl='sdpa_math' does not take kv_heads",
        ),
    ],
)
def test_the_validate_command_refuses_a_shape_it_cannot_validate(monkeypatch, flags, message):
    from kernels.cli import main

    entry = catalog.get("sdpa_math")
    monkeypatch.setitem(catalog._registered, "sdpa_math", replace(entry, takes=frozenset()))
    args = ["validate", "--device", "cpu", "--tokens", "33", "--heads", "4", "--head-dim", "16"]
    impl = [] if "--impl" in flags else ["--impl", "torch_naive"]
    with pytest.raises(SystemExit, match=message.replace("(", r"\(")):
        main([*args, *impl, *flags])
