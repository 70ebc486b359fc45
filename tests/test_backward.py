"""Gradients through kernels.attention for every implementation: PyTorch's autograd for the
torch paths, each Triton path's own backward behind one autograd Function; a path that
cannot give one is refused naming why; what each keeps for its backward, measured with
saved-tensor hooks, equals the model's count (kernels.models.backward_cost)."""

import json
import subprocess
import sys
import textwrap

import pytest
import torch
from backward_helpers import case, check_gradients, gradients
from workflow_run import env

import kernels
from kernels import catalog
from kernels.measure.saved import saved_bytes, saved_during
from kernels.measure.traffic import count_traffic
from kernels.models.backward_cost import by_tensor, compulsory_backward, convention_flops_backward, kept_bytes
from kernels.paths.triton_flash.backward_model import flops_flash_backward
from kernels.paths.triton_naive.backward_model import flops_naive_backward
from kernels.planning.point import Point

TRITON_PATHS = ("triton_naive", "triton_s_only", "triton_flash")
TORCH_PATHS = ("torch_naive", "sdpa", "sdpa_math")


def through_attention(impl, causal, **blocks):
    return lambda q, k, v: kernels.attention(q, k, v, impl=impl, causal=causal, **blocks)


@pytest.mark.parametrize("impl", TRITON_PATHS)
@pytest.mark.parametrize(
    "dtype, causal, T, blocks",
    [(torch.float16, True, 45, (16, 32)), (torch.bfloat16, False, 33, (32, 16))],
)
def test_gradients_through_each_triton_path(impl, dtype, causal, T, blocks):
    q, k, v, do = case(1, 2, T, 32, dtype, seed=T)
    got = gradients(through_attention(impl, causal, block_m=blocks[0], block_n=blocks[1]), q, k, v, do)
    assert check_gradients(got, q, k, v, do, causal) == []


# Shapes of public suites' backward tests: FlashAttention's odd lengths (113, 203) at the
# head dims we take, and Triton's fused-attention tutorial's inputs from N(0, 0.5) with
# 64 × 64 tiles, causal (its backward is causal only), at a length the interpreter runs. One
# head: the interpreter's time goes with the programs, and two heads are the cases above.
PUBLIC_CASES = [
    (torch.float16, True, 113, 64, (64, 64), 1.0),
    (torch.bfloat16, False, 203, 32, (32, 64), 1.0),
    (torch.float16, True, 256, 64, (64, 64), 0.5),
]


@pytest.mark.parametrize("impl", TRITON_PATHS)
@pytest.mark.parametrize("dtype, causal, T, d, blocks, std", PUBLIC_CASES)
def test_gradients_on_public_suites_shapes(impl, dtype, causal, T, d, blocks, std):
    q, k, v, do = case(1, 1, T, d, dtype, seed=T + d)
    q, k, v = ((t.float() * std).to(dtype) for t in (q, k, v))
    got = gradients(through_attention(impl, causal, block_m=blocks[0], block_n=blocks[1]), q, k, v, do)
    assert check_gradients(got, q, k, v, do, causal) == []


@pytest.mark.parametrize("impl", TORCH_PATHS)
def test_gradients_through_the_torch_paths(impl):
    q, k, v, do = case(2, 1, 37, 16, torch.float32, seed=5)
    got = gradients(through_attention(impl, True), q, k, v, do)
    assert check_gradients(got, q, k, v, do, True) == []


def test_a_gradient_into_out_keeps_the_graph():
    q, k, v, do = case(1, 1, 20, 16, torch.float32, seed=2)
    leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
    out = torch.empty_like(q)
    kernels.attention(*leaves, impl="triton_flash", causal=False, block_m=16, block_n=16, out=out)
    out.backward(do)
    assert check_gradients([t.grad for t in leaves], q, k, v, do, False) == []


def test_only_what_asks_for_a_gradient_gets_one():
    q, k, v, do = case(1, 1, 20, 16, torch.float32, seed=3)
    q.requires_grad_(True)
    o = kernels.attention(q, k, v, impl="triton_s_only", causal=True, block_m=16, block_n=16)
    o.backward(do)
    assert q.grad is not None and k.grad is None and v.grad is None
    with torch.no_grad():
        assert kernels.attention(q, k, v, impl="triton_s_only", causal=True).grad_fn is None


def test_the_tile_local_softmax_is_refused_naming_why():
    q, k, v, _ = case(1, 1, 20, 16, torch.float32)
    v.requires_grad_(True)
    with pytest.raises(
        ValueError, match=r"v.requires_grad=True: impl='triton_tile_softmax' has no backward"
    ) as err:
        kernels.attention(q, k, v, impl="triton_tile_softmax", causal=False)
    assert "wrong on purpose" in str(err.value)
    assert "triton_flash" in str(err.value)  # and which paths have one
    assert "triton_tile_softmax" not in catalog.backward_names()


PLUGIN = """
import torch
from kernels.catalog import implementation

def attention(q, k, v, causal):
    s = (q @ k.transpose(-1, -2)) / q.shape[-1] ** 0.5
    return torch.softmax(s, dim=-1) @ v

@implementation("bw_plain", stores="SP")
def plain(q, k, v, *, causal):
    return attention(q, k, v, causal)

@implementation("bw_detached", stores="SP")
def detached(q, k, v, *, causal):
    return attention(q, k, v, causal).detach()

@implementation("bw_triton", stores="none", triton=True)
def triton_like(q, k, v, *, causal, block_m, block_n):
    return attention(q, k, v, causal).detach()

@implementation("bw_said", stores="none", no_backward="it is a sketch")
def said(q, k, v, *, causal):
    return attention(q, k, v, causal)
"""

CHILD = """
import json, torch, kernels
from kernels import catalog
seen = {}
for impl in ("bw_plain", "bw_detached", "bw_triton", "bw_said"):
    q, k, v = (torch.randn(1, 1, 8, 16, requires_grad=True) for _ in range(3))
    try:
        kernels.attention(q, k, v, impl=impl, causal=False).sum().backward()
        seen[impl] = "ok" if q.grad is not None else "no grad"
    except ValueError as err:
        seen[impl] = str(err)
print(json.dumps(seen))
"""


def test_a_plugin_gives_a_backward_or_is_refused_naming_why(tmp_path):
    (tmp_path / "bw_plugin.py").write_text(textwrap.dedent(PLUGIN))
    extra = {"ATTNIO_PLUGINS": "bw_plugin", "PYTHONPATH": str(tmp_path), "ATTNIO_INTERPRET": "1"}
    done = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, env=env() | extra, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["bw_plain"] == "ok"  # its O carries autograd's graph
    assert (
        "impl='bw_detached' has no backward: it returned an O without autograd's graph" in seen["bw_detached"]
    )
    assert "impl='bw_triton' has no backward: it registers no backward" in seen["bw_triton"]
    assert "impl='bw_said' has no backward: it is a sketch" in seen["bw_said"]


@pytest.mark.parametrize(
    "impl, dtype, causal, options",
    [
        ("torch_naive", "float32", False, {}),
        ("torch_naive", "float16", True, {}),
        ("triton_naive", "float16", False, {}),
        ("triton_naive", "bfloat16", True, {"sp_dtype": "float32"}),
        ("triton_s_only", "float16", True, {}),
        ("triton_flash", "bfloat16", False, {}),
        ("triton_flash", "float32", True, {}),
    ],
)
def test_what_each_path_keeps_for_its_backward_is_the_model(impl, dtype, causal, options):
    B, H, T, d = 2, 3, 40, 16
    q, k, v, _ = case(B, H, T, d, getattr(torch, dtype), seed=7)
    leaves = [t.requires_grad_(True) for t in (q, k, v)]
    blocks = {"block_m": 16, "block_n": 16} if catalog.get(impl).triton else {}
    _, saved = saved_during(lambda: kernels.attention(*leaves, impl=impl, causal=causal, **blocks, **options))
    point = Point(impl, B, H, T, d, dtype, causal, **blocks, **options)
    model = kept_bytes(point)
    assert saved_bytes(saved) == sum(model.values()), (saved, model)
    assert sorted(s["bytes"] for s in saved) == sorted(model.values())


@pytest.mark.parametrize("impl", TRITON_PATHS)
def test_a_backward_through_attention_moves_what_its_registered_model_says(impl):
    """The backward autograd runs, counted under the interpreter, against the model its
    registration names (kernels.catalog: backward_traffic_model)."""
    q, k, v, do = case(1, 2, 45, 16, torch.float16, seed=11)
    leaves = [t.requires_grad_(True) for t in (q, k, v)]
    o = kernels.attention(*leaves, impl=impl, causal=True, block_m=16, block_n=32)
    with count_traffic() as counter:
        o.backward(do)
    point = Point(impl, 1, 2, 45, 16, "float16", True, 16, 32)
    assert counter.by_stage() == dict(catalog.get(impl).backward_model()(point))

    compulsory = compulsory_backward(point)
    counted = by_tensor(counter.by_stage())
    assert set(compulsory) <= set(counted)  # the same tensors, named as the counter names them
    assert all(counted[key] >= nbytes for key, nbytes in compulsory.items()), (counted, compulsory)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("tokens", [64, 77, 130])
def test_the_compulsory_backward_is_a_floor_of_every_triton_backward(tokens, causal):
    for impl in TRITON_PATHS:
        for blocks in ((16, 16), (32, 16), (16, 64)):
            point = Point(impl, 1, 2, tokens, 32, "bfloat16", causal, *blocks)
            issued = by_tensor(catalog.get(impl).backward_model()(point))
            for key, nbytes in compulsory_backward(point).items():
                assert issued[key] >= nbytes, (impl, blocks, key)


def test_the_backwards_t_by_t_traffic_against_its_floor():
    """Non-causal, T a multiple of the blocks, one softmax pass: the materialized backward
    moves seven T×T passes against a floor of five (P read by ds and dv, dS by dq and dk), the
    S-only one two against one (dkdv and dq each read S), the fused one none."""
    T, e = 256, 2
    for impl, issued_passes, floor_passes in (
        ("triton_naive", 7, 5),
        ("triton_s_only", 2, 1),
        ("triton_flash", 0, 0),
    ):
        point = Point(impl, 1, 1, T, 64, "bfloat16", False, 64, 32)
        t_by_t = {"P", "DP", "DS", "S"}
        issued = sum(b for (_, t, _), b in catalog.get(impl).backward_model()(point).items() if t in t_by_t)
        floor = sum(b for (t, _), b in compulsory_backward(point).items() if t in t_by_t)
        assert (issued, floor) == (issued_passes * T * T * e, floor_passes * T * T * e), impl


def test_executed_flops_against_the_fields_convention():
    """2.5 × the forward's FLOPs by convention; the materialized backward executes 0.8 of
    that (four products), ours fused 1.4 (seven: S and P recomputed in both loops)."""
    naive = Point("triton_naive", 1, 2, 256, 64, "float16", False, 64, 64)
    flash = Point("triton_flash", 1, 2, 256, 64, "float16", False, 64, 64)
    assert flops_naive_backward(naive) / convention_flops_backward(naive) == pytest.approx(0.8)
    assert flops_flash_backward(flash) / convention_flops_backward(flash) == pytest.approx(1.4)
