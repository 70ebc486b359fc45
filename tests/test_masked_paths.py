"""Every mask through the paths that take it (the float64 reference, torch_naive with a dense
mask, SDPA with a dense attn_mask), against the float64 definition (tests/test_masks.py holds
it to attn-gym's); gradients through PyTorch's autograd; a path, a plugin or a call that
cannot take a mask refused, saying why."""

from __future__ import annotations

import pytest
import torch
from helpers import max_abs

import kernels
from kernels import catalog, masks
from kernels.catalog import PluginError
from kernels.impl.inputs import make_qkv
from kernels.impl.reference import reference_float64

MASKS = ("window:5", "documents:5+20+12", "documents-full:8", "prefix:13", "causal", "full")
PYTORCH_PATHS = ("torch_naive", "sdpa", "sdpa_math")


def problem(dtype, queries: int = 37, kv_heads: int = 4, requires_grad: bool = False):
    """B = 1, 4 query heads, T = 37, d = 16: the last ``queries`` positions as queries."""
    q, k, v = make_qkv(1, 4, 37, 16, dtype, "cpu", 11)
    q, k, v = q[:, :, 37 - queries :].contiguous(), k[:, :kv_heads].contiguous(), v[:, :kv_heads].contiguous()
    return [x.requires_grad_(requires_grad) for x in (q, k, v)]


@pytest.mark.parametrize("text", MASKS)
@pytest.mark.parametrize("shape", [(37, 4), (7, 2)], ids=["square", "7 queries, grouped heads"])
def test_every_pytorch_path_takes_every_mask(text, shape):
    q, k, v = problem(torch.float32, *shape)
    expected = reference_float64(q, k, v, causal=False, mask=masks.parse(text))
    for impl in PYTORCH_PATHS:
        got = kernels.attention(q, k, v, impl=impl, mask=text)
        assert max_abs(got, expected) < 1e-5, (impl, text)
    if shape == (37, 4):  # the reference takes no grouped heads: its own view is the definition
        got = kernels.attention(q, k, v, impl="reference", mask=masks.parse(text))
        assert max_abs(got, expected) < 1e-6


@pytest.mark.parametrize("text", ["window:5", "documents:5+20+12"])
def test_float16_within_flash_attentions_bound_of_torch_naive(text):
    """FlashAttention's bound: error ≤ 2·(torch_naive's error) + 1e-5, as every path's."""
    q, k, v = problem(torch.float16)
    expected = reference_float64(q, k, v, causal=False, mask=masks.parse(text))
    bound = 2 * max_abs(kernels.attention(q, k, v, impl="torch_naive", mask=text), expected) + 1e-5
    assert max_abs(kernels.attention(q, k, v, impl="sdpa", mask=text), expected) <= bound


@pytest.mark.parametrize("impl", ["torch_naive", "sdpa"])
def test_gradients_under_a_mask_are_the_definitions(impl):
    q, k, v = problem(torch.float32, 7, 2, requires_grad=True)
    do = torch.randn(q.shape, generator=torch.Generator().manual_seed(3))
    kernels.attention(q, k, v, impl=impl, mask="window:5").backward(do)
    got = [x.grad for x in (q, k, v)]
    q64, k64, v64 = (x.detach().double().requires_grad_() for x in (q, k, v))
    reference_float64(q64, k64, v64, causal=False, mask=masks.parse("window:5")).backward(do.double())
    for mine, theirs in zip(got, (q64.grad, k64.grad, v64.grad), strict=True):
        assert max_abs(mine, theirs) < 1e-5


def test_the_mask_and_causal_agree():
    q, k, v = problem(torch.float32)
    for impl in PYTORCH_PATHS:
        assert torch.equal(
            kernels.attention(q, k, v, impl=impl, mask="causal"),
            kernels.attention(q, k, v, impl=impl, causal=True),
        )
        assert torch.equal(
            kernels.attention(q, k, v, impl=impl, mask="full"),
            kernels.attention(q, k, v, impl=impl, causal=False),
        )


@pytest.mark.parametrize(
    "call, said",
    [
        (dict(impl="sdpa", mask="causal", causal=True), "give one (mask='causal' is causal=True)"),
        (dict(impl="sdpa", mask="prefix:40"), "the prefix of 40 tokens is longer than T = 37"),
        (dict(impl="sdpa", mask="window:0"), "mask 'window:0': the window (keys each query sees) must be"),
        (dict(impl="sdpa", mask=5), "mask=5: give a mask as a string (full, causal, window:256"),
        (dict(impl="sdpa"), "causal=None: must be True or False (or give mask=)"),
    ],
)
def test_a_mask_a_call_cannot_take_is_refused_saying_why(call, said):
    q, k, v = problem(torch.float32)
    with pytest.raises(ValueError) as refused:
        kernels.attention(q, k, v, **call)
    assert said in str(refused.value)


def test_a_registration_says_which_masks_it_takes(monkeypatch):
    """A plugin that says nothing takes full and causal only, and a call under another mask
    is refused naming its registration; one naming an unknown kind is refused at
    registration, listing the kinds."""
    catalog.load()
    monkeypatch.setattr(catalog, "_registered", dict(catalog._registered))  # the plugins go with the test

    def plain(q, k, v, *, causal):
        return q.clone()

    catalog.implementation("masked_plugin_plain", stores="none")(plain)
    assert catalog.get("masked_plugin_plain").masks == {"full", "causal"}
    assert catalog.get("torch_naive").masks == set(masks.KINDS)
    q, k, v = problem(torch.float32)
    assert torch.equal(kernels.attention(q, k, v, impl="masked_plugin_plain", mask="causal"), q)
    with pytest.raises(ValueError, match="impl='masked_plugin_plain' does not take the mask 'window:5' .its"):
        kernels.attention(q, k, v, impl="masked_plugin_plain", mask="window:5")
    with pytest.raises(PluginError, match="the mask kinds are full, causal, window, documents"):
        catalog.implementation("masked_plugin_bogus", stores="none", masks=["sliding"])(plain)
    assert "masked_plugin_bogus" not in catalog.names()


def test_a_backward_that_takes_fewer_masks_skips_those_points_naming_its_registration(monkeypatch):
    """Every built-in backward takes every mask; a plugin's may list fewer (backward_masks=):
    its forward point under another mask runs, its backward point is skipped saying why."""
    from kernels.measure.gates import mask_not_taken
    from kernels.planning.point import Point

    catalog.load()  # every registration in, before the copy the plugin goes away with
    monkeypatch.setattr(catalog, "_registered", dict(catalog._registered))

    def differentiable(q, k, v, *, causal, mask=None):
        return kernels.attention(q, k, v, impl="torch_naive", causal=causal, mask=mask)

    catalog.implementation(
        "masked_plugin_forward_only", stores="SP", backward="autograd", masks=masks.KINDS,
        backward_masks=["full", "causal"],
    )(differentiable)  # fmt: skip
    for impl in ("torch_naive", "triton_naive", "triton_s_only", "triton_flash"):
        assert catalog.get(impl).backward_masks == set(masks.KINDS), impl

    def gate(direction: str) -> str | None:
        return mask_not_taken(
            Point("masked_plugin_forward_only", 1, 2, 37, 16, "float32", "window:5", direction=direction)
        )

    assert gate("forward") is None
    assert gate("backward") == (
        "unsupported mask: impl='masked_plugin_forward_only''s backward does not take the mask 'window:5' "
        "(its registration's backward_masks= lists causal, full)"
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_sdpas_dense_mask_is_in_the_memory_its_point_is_gated_on(dtype):
    """SDPA under a mask beyond causal holds the dense boolean mask and its additive form in
    the query's dtype through the call: its CPU peak (PyTorch's profiler) rises by exactly
    the bytes the memory gate adds for it, 1 + e a score, shared by the batch and heads."""
    from kernels.measure.memory import peak_allocated_cpu
    from kernels.models.cost import predicted_bytes
    from kernels.planning.point import Point

    q, k, v = make_qkv(1, 2, 256, 16, dtype, "cpu", 4)
    peaks, predicted = {}, {}
    for text in ("causal", "window:64", "documents:100+156"):
        peaks[text], _ = peak_allocated_cpu(
            lambda text=text: kernels.attention(q, k, v, impl="sdpa", mask=text)
        )
        predicted[text] = predicted_bytes(Point("sdpa", 1, 2, 256, 16, str(dtype).split(".")[1], text))
    for text in ("window:64", "documents:100+156"):
        assert (
            peaks[text] - peaks["causal"]
            == predicted[text] - predicted["causal"]
            == 256 * 256 * (1 + q.element_size())
        )
