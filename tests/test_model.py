"""The model against numbers computed by hand."""

import pytest

from kernels.models.cost import flops, matrix_bytes, summarize, transfers
from kernels.planning.point import Point

MIB = 1_048_576


def test_seed_matrix_sizes():
    """T = 4,096 at 2 bytes → 32 MiB per matrix; T = 8,192 → 128 MiB; doubling T quadruples."""
    assert matrix_bytes(Point("triton_naive", 1, 1, 4096, 128, "float16", True)) == 32 * MIB
    assert matrix_bytes(Point("torch_naive", 1, 1, 8192, 64, "bfloat16", False)) == 128 * MIB
    assert (
        matrix_bytes(Point("triton_naive", 2, 3, 1000, 64, "float16", False, sp_dtype="float32"))
        == 6 * 1000 * 1000 * 4
    )
    assert matrix_bytes(Point("triton_flash", 1, 1, 8192, 64, "float16", False)) == 0
    assert matrix_bytes(Point("sdpa", 1, 1, 8192, 64, "float16", False)) == 0


def test_flops_convention():
    assert flops(Point("sdpa", 2, 4, 1024, 128, "float16", False)) == 4 * 8 * 1024**2 * 128
    assert flops(Point("sdpa", 2, 4, 1024, 128, "float16", True)) == 2 * 8 * 1024**2 * 128


def test_fused_as_issued_by_hand():
    """T = 100, BLOCK_M = 64, BLOCK_N = 32, causal, d = 16, 2 bytes: query block 0 streams
    keys 0..63 (2 tiles), block 1 keys 0..99 (4 tiles, the last 4 keys wide)."""
    moved = {
        (t.tensor, t.op): t.as_issued
        for t in transfers(Point("triton_flash", 1, 1, 100, 16, "float16", True, 64, 32))
    }
    assert moved == {
        ("Q", "load"): 100 * 32,
        ("K", "load"): (64 + 100) * 32,
        ("V", "load"): (64 + 100) * 32,
        ("O", "store"): 100 * 32,
    }
    full = {
        (t.tensor, t.op): t.as_issued
        for t in transfers(Point("triton_flash", 1, 1, 100, 16, "float16", False, 64, 32))
    }
    assert full[("K", "load")] == 2 * 100 * 32  # every key, once per query block


def test_naive_as_issued_by_hand():
    """T = 100, 64×64 tiles, causal, d = 16, 4 bytes. Score tile (0, 1) lies wholly in the
    future (keys 64.. vs queries 0..63): it stores −∞ without loading Q or K."""
    p = Point("triton_naive", 1, 1, 100, 16, "float32", True, 64, 64)
    moved = {(t.kernel, t.tensor, t.op): t.as_issued for t in transfers(p)}
    row = 16 * 4
    assert moved[("scores", "Q", "load")] == (64 * 1 + 36 * 2) * row
    assert moved[("scores", "K", "load")] == (64 + 100) * row
    assert moved[("scores", "S", "store")] == 100 * 100 * 4
    assert moved[("softmax", "S", "load")] == 100 * 100 * 4
    assert moved[("pv", "P", "load")] == (64 * 64 + 36 * 100) * 4
    assert moved[("pv", "V", "load")] == (64 + 100) * row
    long_rows = Point("triton_naive", 1, 1, 100, 16, "float32", True, 64, 64, max_row_block=32)
    assert summarize(long_rows)["traffic_model_bytes"] == summarize(p)["traffic_model_bytes"] + 40000


def test_compulsory_and_summary():
    p = Point("triton_naive", 2, 2, 256, 64, "float16", False)
    s = summarize(p)
    qkvo = 4 * 256 * 64 * 2
    assert s["traffic_compulsory_bytes"] == 4 * qkvo + 4 * (4 * 256 * 256 * 2)
    assert s["bytes_S"] == s["bytes_P"] == 4 * 256 * 256 * 2
    assert s["intensity_flop_per_byte"] == s["flops"] / s["traffic_model_bytes"]
    torch_point = summarize(Point("torch_naive", 2, 2, 256, 64, "float16", False))
    assert torch_point["traffic_model_bytes"] is None  # library kernels: not modelled
    assert torch_point["traffic_compulsory_bytes"] == s["traffic_compulsory_bytes"]


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("tokens", 0, "tokens=0: must be an integer of at least 1"),
        ("dtype", "int8", "dtype='int8': allowed values are"),
        ("impl", "flash9", "impl='flash9': allowed values"),
    ],
)
def test_bad_points(field, value, message):
    args = dict(impl="sdpa", batch=1, heads=1, tokens=8, head_dim=16, dtype="float16", mask=False)
    args[field] = value
    with pytest.raises(ValueError, match=message):
        Point(**args)
