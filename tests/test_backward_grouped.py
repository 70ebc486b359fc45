"""Backward passes with grouped heads (k and v with kv_heads < heads): dQ, dK and dV of every
path with a backward within the validation's rule against autograd through the float64
definition (each K/V head's dK and dV the sum over the query heads sharing it), shaped as q,
k and v; the Triton backwards' counted traffic and kept bytes equal to their models; and a
backward with fewer queries than keys refused, naming query_tokens."""

import pytest
import torch
from backward_helpers import check_gradients, gradients

import kernels
from kernels import catalog
from kernels.impl.inputs import make_qkv
from kernels.measure import validate_backward as rule
from kernels.measure.saved import saved_bytes, saved_during
from kernels.measure.traffic import count_traffic
from kernels.models.backward_cost import by_tensor, compulsory_backward, kept_bytes
from kernels.paths.torch_naive.backward_stages import torch_naive_backward_stages
from kernels.paths.triton_flash import backward as flash_backward
from kernels.planning.point import Point

TRITON_PATHS = ("triton_naive", "triton_s_only", "triton_flash")
H, T, D = 4, 37, 16  # odd T: a partial block in both directions


def grouped_case(kv_heads, dtype=torch.float32, batch=1, tokens=T, seed=0, layout="contiguous"):
    """Fresh random q (batch, H, tokens, D), k and v with kv_heads heads, and dO."""
    q, k, v = make_qkv(batch, H, tokens, D, dtype, "cpu", seed, layout, kv_heads=kv_heads)
    return q, k, v, rule.upstream_gradient(q, seed + 1)


def through_attention(impl, causal, **blocks):
    return lambda q, k, v: kernels.attention(q, k, v, impl=impl, causal=causal, **blocks)


@pytest.mark.parametrize("impl", (*TRITON_PATHS, "torch_naive"))
@pytest.mark.parametrize("kv_heads, causal", [(2, False), (2, True), (1, False), (1, True)])
def test_grouped_gradients_within_the_rule(impl, kv_heads, causal):
    q, k, v, do = grouped_case(kv_heads, seed=kv_heads + 2 * causal)
    blocks = {"block_m": 16, "block_n": 32} if catalog.get(impl).triton else {}
    got = gradients(through_attention(impl, causal, **blocks), q, k, v, do)
    assert [g.shape for g in got] == [q.shape, k.shape, v.shape]
    assert check_gradients(got, q, k, v, do, causal) == []


@pytest.mark.parametrize("impl", TRITON_PATHS)
def test_grouped_strided_and_shorter_than_a_block(impl):
    """bthd views of q, k and v in a 2-byte dtype, and a T shorter than one block."""
    q, k, v, do = grouped_case(2, torch.float16, batch=2, seed=5, layout="bthd")
    assert not q.is_contiguous() and not k.is_contiguous()
    got = gradients(through_attention(impl, True, block_m=32, block_n=16), q, k, v, do)
    assert check_gradients(got, q, k, v, do, True) == []
    q, k, v, do = grouped_case(1, tokens=9, seed=6)
    got = gradients(through_attention(impl, False, block_m=16, block_n=16), q, k, v, do)
    assert check_gradients(got, q, k, v, do, False) == []


@pytest.mark.parametrize("kv_heads, causal, layout", [(2, True, "bthd"), (1, False, "contiguous")])
def test_torch_naive_backward_stages_with_grouped_heads(kv_heads, causal, layout):
    """The timing chain's five stages, run in order, give the gradients the rule asks for."""
    q, k, v, do = grouped_case(kv_heads, batch=2, seed=7, layout=layout)
    stages, got = torch_naive_backward_stages(q, k, v, do, causal)
    for _, run in stages:
        run()
    assert [g.shape for g in got] == [q.shape, k.shape, v.shape]
    assert check_gradients(got, q, k, v, do, causal) == []


@pytest.mark.parametrize("impl", TRITON_PATHS)
def test_grouped_backward_moves_and_keeps_what_its_models_say(impl):
    """Counted under the interpreter at an odd grouped shape (B = 2, H = 4 over 2 K/V heads,
    T = 37, causal): the backward's traffic equals its registered model to the byte, covers
    the compulsory floor (K, V, dK, dV once per K/V head), and what the forward kept equals
    the kept model (K and V with their kv_heads)."""
    q, k, v, do = grouped_case(2, torch.float16, batch=2, seed=11)
    leaves = [t.requires_grad_(True) for t in (q, k, v)]
    forward = lambda: kernels.attention(*leaves, impl=impl, causal=True, block_m=16, block_n=32)  # noqa: E731
    o, saved = saved_during(forward)
    with count_traffic() as counter:
        o.backward(do)
    point = Point(impl, 2, H, T, D, "float16", True, 16, 32, kv_heads=2)
    assert counter.by_stage() == dict(catalog.get(impl).backward_model()(point))
    counted = by_tensor(counter.by_stage())
    compulsory = compulsory_backward(point)
    assert compulsory[("DK", "store")] == 2 * 2 * T * D * 2  # B·Hkv·T·d·e
    assert all(counted[key] >= nbytes for key, nbytes in compulsory.items()), (counted, compulsory)
    kept = kept_bytes(point)
    assert kept["K"] == kept["V"] == 2 * 2 * T * D * 2
    assert saved_bytes(saved) == sum(kept.values()), (saved, kept)


def test_planned_grouped_launches_run_a_dkdv_program_per_kv_head():
    q = torch.empty(2, 8, 100, 64, dtype=torch.float16, device="meta")
    k, v = (torch.empty(2, 2, 100, 64, dtype=torch.float16, device="meta") for _ in range(2))
    launches = flash_backward.planned_backward_launches(q, k, v, causal=True, block_m=32, block_n=64)
    assert [launch.grid for launch in launches[1:]] == [(2, 4), (4, 16)]


@pytest.mark.parametrize("impl", TRITON_PATHS)
def test_a_backward_with_fewer_queries_than_keys_is_refused(impl):
    q, k, v = make_qkv(1, H, T, D, torch.float32, "cpu", 3, query_tokens=7, kv_heads=2)
    with pytest.raises(ValueError, match=r"query_tokens=7 .* tokens=37"):
        kernels.attention(q.requires_grad_(True), k, v, impl=impl, causal=True)
    module = catalog.get(impl).backward_module()
    with pytest.raises(ValueError, match=r"query_tokens=7"):
        module.backward(torch.zeros_like(q), q.detach(), k, v, (), True, 16, 16)
