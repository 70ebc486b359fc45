"""The backward's validation: every path's gradients judged by the forward's rule on the
backward cases, the float16 dP overflow found and expected from the data, the bytes each
path keeps measured beside its model, GPU cases the preflight finds unlaunchable left out
by name, and the build stage compiling each point's backward for sm_90."""

import json
import subprocess
import sys
import textwrap

import pytest
import torch
from workflow_run import env

import kernels
from kernels.build.table import build_table
from kernels.impl.inputs import make_qkv
from kernels.io.records import read_leaf
from kernels.measure import validate_backward as vb
from kernels.measure.gates import validation_failure
from kernels.planning.cases import BACKWARD_CUDA_SHAPES, Shape
from kernels.planning.point import Point
from kernels.spec import LARGE_GRADIENT

TIMEOUT = 600  # a hang guard: the slowest call here compiles a few d = 256 kernels
PATHS = ("torch_naive", "triton_naive", "triton_s_only", "triton_flash", "triton_tile_softmax")
LARGE = Shape(1, 2, 40, 64, gradient="large")


def kernels_cli(*args: str, compiled: bool = False) -> subprocess.CompletedProcess:
    environment = env()
    if compiled:
        environment.pop("ATTNIO_INTERPRET", None)
    return subprocess.run(
        [sys.executable, "-m", "kernels", *args],
        capture_output=True, text=True, timeout=TIMEOUT, env=environment,
    )  # fmt: skip


@pytest.fixture(scope="module")
def large_gradient():
    """Every path on the case whose dO·Vᵀ passes float16's largest value, in float16 and
    bfloat16, causal and not."""
    return vb.validate_backward(PATHS, ("float16", "bfloat16"), shapes=(LARGE,), block_m=32, block_n=16)


@pytest.mark.filterwarnings("ignore:overflow encountered", "ignore:invalid value encountered")
def test_a_float16_dp_overflows_in_the_materialized_paths_only(large_gradient):
    by = {(r.impl, r.dtype, r.causal): r for r in large_gradient}
    assert all(r.as_expected for r in large_gradient), [
        (r.impl, r.verdict, r.expected) for r in large_gradient
    ]
    for causal in (False, True):
        for impl in ("torch_naive", "triton_naive"):
            found = by[impl, "float16", causal]
            assert found.expected == found.verdict == "nonfinite", found
            assert "dQ" in found.message and "dV" not in found.message  # dV = Pᵀ·dO never sees dP
            assert by[impl, "bfloat16", causal].verdict == "pass"  # bfloat16 holds the same dP
        for impl in ("triton_s_only", "triton_flash"):  # dP only in float32 registers
            assert by[impl, "float16", causal].verdict == "pass"
            assert by[impl, "float16", causal].error > 1  # the gradients are large, not the rule loose
        tile = by["triton_tile_softmax", "float16", causal]
        assert tile.verdict == tile.expected == "refused" and "forward is wrong on purpose" in tile.message


def test_the_large_case_is_what_the_expectation_says():
    """The expectation is computed from the case's own products, not from its name."""
    q, k, v = make_qkv(1, 2, 40, 64, torch.float16, "cpu", 0)
    do = vb.upstream_gradient(q, 1, "large")
    largest = (do.double() @ v.double().transpose(-1, -2)).abs().max().item()
    assert largest > torch.finfo(torch.float16).max and do.abs().max() < torch.finfo(torch.float16).max
    assert do.double().std().item() == pytest.approx(LARGE_GRADIENT, rel=0.05)
    under = (1.0, 60000.0)
    assert vb.expected_backward("triton_naive", LARGE, "float16", 16, under) == "pass"
    assert vb.expected_backward("triton_naive", LARGE, "float16", 16, (1.0, largest)) == "nonfinite"
    assert vb.expected_backward("triton_flash", LARGE, "float16", 16, (1.0, largest)) == "pass"
    assert vb.expected_backward("triton_naive", LARGE, "float32", 16, (1.0, largest)) == "pass"


def test_the_saved_bytes_are_measured_beside_the_model(large_gradient):
    for r in large_gradient:
        if r.impl == "triton_tile_softmax":
            assert r.saved_bytes is None and r.saved_model_bytes is None
        else:
            assert r.saved_bytes == r.saved_model_bytes > 0, r
    kept = {r.impl: r.saved_bytes for r in large_gradient if r.dtype == "bfloat16" and not r.causal}
    assert kept["triton_flash"] < kept["triton_s_only"] and kept["triton_naive"] < kept["torch_naive"]


def test_the_widened_baseline_is_torch_naives_backward_where_that_is_finite():
    q, k, v = make_qkv(1, 2, 33, 32, torch.float32, "cpu", 3)
    do = vb.upstream_gradient(q, 4)
    for causal in (False, True):
        plain = vb.baseline_gradients(q, k, v, do, causal)
        widened = vb.widened_gradients(q, k, v, do, causal)
        for a, b in zip(plain, widened, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_a_bfloat16_p_doubles_the_materialized_backwards_error():
    """Why the gradients' factor is 3: the standard backward reading a bfloat16 P (as
    triton_naive's does) against the same operations on the float32 P torch_naive's autograd
    keeps, on the large-dO case in bfloat16."""
    q, k, v = make_qkv(1, 2, 40, 64, torch.bfloat16, "cpu", 2)
    do = vb.upstream_gradient(q, 3, "large")
    ref = vb.reference_gradients(q, k, v, do, False)[0]
    s = (q.float() @ k.float().transpose(-1, -2) / 8).to(torch.bfloat16).float()
    dp = (do.float() @ v.float().transpose(-1, -2)).to(torch.bfloat16).float()
    errors = []
    for p in (torch.softmax(s, -1), torch.softmax(s, -1).to(torch.bfloat16).float()):
        ds = (p * (dp - (p * dp).sum(-1, keepdim=True)) / 8).to(torch.bfloat16).float()
        errors.append(((ds @ k.float()).to(torch.bfloat16).double() - ref).abs().max().item())
    assert 1.6 < errors[1] / errors[0] < 2.5, errors
    naive = vb.gradients(
        lambda a, b, c: kernels.attention(a, b, c, impl="triton_naive", causal=False), q, k, v, do
    )
    baseline = vb.baseline_gradients(q, k, v, do, False)[0]
    assert (naive[1][0].double() - ref).abs().max().item() > 1.6 * (
        baseline.double() - ref
    ).abs().max().item()


def test_a_forward_point_is_gated_by_the_forward_rows_only():
    forward = {"direction": "forward", "as_expected": True}
    backward = {"direction": "backward", "as_expected": False, "tokens": 5, "head_dim": 16}
    backward |= {"causal": False, "verdict": "fail", "message": "worst: dQ"}
    assert validation_failure([forward, backward]) is None
    assert "1 of 1 checks unexpected" in validation_failure([forward, backward], "backward")
    assert validation_failure([{"as_expected": True}]) is None  # rows from before the backward
    assert "0 of 0" in validation_failure([forward], "backward")  # none: not validated


@pytest.mark.filterwarnings("ignore:overflow encountered", "ignore:invalid value encountered")
def test_validate_backward_writes_both_directions_by_schema(tmp_path):
    out = tmp_path / "v.json"
    done = kernels_cli(
        "validate", "--device", "cpu", "--impl", "triton_flash", "torch_naive", "--dtype", "float16",
        "--tokens", "33", "--head-dim", "16", "--causal", "true", "--block-m", "16", "--block-n", "16",
        "--backward", "--gradient", "large", "--json", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    rows = read_leaf(out, "validation")
    assert [(r["direction"], r["impl"]) for r in rows] == [
        ("forward", "triton_flash"), ("forward", "torch_naive"),
        ("backward", "triton_flash"), ("backward", "torch_naive"),
    ]  # fmt: skip
    backward = {r["impl"]: r for r in rows if r["direction"] == "backward"}
    assert backward["torch_naive"]["verdict"] == "nonfinite" and backward["triton_flash"]["verdict"] == "pass"
    assert "backward (dO large)" in done.stdout and "2 with a large dO" not in done.stdout
    assert "backward: 2 checks: 2 as expected, 0 unexpected; 1 with a large dO" in done.stdout


def test_an_upstream_gradient_without_its_backward_is_refused():
    for extra in ([], ["--backward"]):
        done = kernels_cli(
            "validate", "--device", "cpu", "--impl", "torch_naive", "--gradient", "large", *extra
        )
        assert done.returncode != 0 and "--gradient large needs --backward and --tokens" in done.stderr


def test_without_a_gpu_every_backward_case_says_why(tmp_path):
    out = tmp_path / "v.json"
    done = kernels_cli(
        "validate", "--device", "cuda", "--impl", "triton_naive", "--dtype", "float16", "--backward",
        "--quiet", "--json", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [r for r in json.loads(out.read_text()) if r["direction"] == "backward"]
    assert len(rows) == 2 * len(BACKWARD_CUDA_SHAPES)
    assert {r["verdict"] for r in rows} == {"unavailable"} and all(r["as_expected"] for r in rows)
    large = [r for r in rows if r["gradient"] == "large"]
    assert large and {r["expected"] for r in large} == {"nonfinite"}


PREFLIGHT = textwrap.dedent(
    """
    import json, sys
    from kernels.impl.mode import set_interpret
    set_interpret(False)
    from kernels.build import preflight
    from kernels.planning.point import Point
    point = Point.from_name(sys.argv[1])
    wanted = lambda p: p.use == "backward" or "-T300-d256-full-" in p.what
    plan = [p for p in preflight.backward_plan([point]) if wanted(p)]
    found = preflight.preflight(plan, ["sm_90"], jobs=2)
    open(sys.argv[2], "w").write(json.dumps(found))
    """
)


@pytest.mark.preflight  # make preflight (CI): compiles for GPU targets
def test_a_backward_the_gpu_cannot_launch_is_left_out_naming_why(tmp_path):
    """triton_s_only's backward at d = 256 with 64 × 64 blocks needs more shared memory than
    an H100 gives a block: the preflight for sm_90 says so, and validation leaves the case
    out with that reason while it checks d = 16."""
    point = Point("triton_s_only", 1, 2, 300, 256, "float16", False, 64, 64)
    findings = tmp_path / "preflight.json"
    environment = env()
    environment.pop("ATTNIO_INTERPRET", None)
    done = subprocess.run(
        [sys.executable, "-c", PREFLIGHT, point.name, str(findings)],
        capture_output=True, text=True, timeout=TIMEOUT, env=environment,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(findings.read_text())
    unfit = [r for r in found["launches"] if r["status"] == "unfit"]
    assert {r["use"] for r in unfit} == {"backward", "validate_backward"}
    assert all("shared memory" in r["reason"] and "232,448 B" in r["reason"] for r in unfit)
    verdicts = tmp_path / "verdicts.json"
    kernels_cli(
        "validate", "--device", "cpu", "--impl", "triton_s_only", "--dtype", "float16", "--backward",
        "--tokens", "300", "--head-dim", "256", "16", "--batch", "1", "--heads", "2", "--causal", "false",
        "--preflight", str(findings), "--json", str(verdicts), "--quiet",
    )  # fmt: skip
    rows = json.loads(verdicts.read_text())
    backward = {r["head_dim"]: r for r in rows if r["direction"] == "backward"}
    assert backward[256]["verdict"] == "unfit" and backward[256]["as_expected"]
    assert "kernel on sm_90: out of resource: shared memory" in backward[256]["message"]
    assert backward[16]["verdict"] == "pass"
    forward = {r["head_dim"]: r for r in rows if r["direction"] == "forward"}
    assert forward[256]["verdict"] == "pass"  # the forward launches fit


@pytest.mark.preflight  # make preflight (CI): compiles for GPU targets
def test_build_compiles_each_points_backward_for_sm_90(tmp_path):
    name = "triton_flash/bfloat16/B1-H2-T128-d64-causal-bm64-bn32-normal"
    out = tmp_path / "build.json"
    done = kernels_cli(
        "build", "--target", "sm_90", "--point", name, "--no-candidates", "--backward",
        "--out", str(out), "--artifacts", str(tmp_path / "artifacts"), compiled=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    read_leaf(out, "build")
    table = build_table([out])
    backward = table[table["backward_for"] > 0]
    assert set(backward["kernel"]) == {"delta_kernel", "dkdv_kernel", "dq_kernel"}
    assert (backward["status"] == "ok").all() and (backward["registers"] > 0).all()
    cores = dict(zip(backward["kernel"], backward["tensor_core"], strict=True))
    assert cores["delta_kernel"] == "none"  # rowsum(dO∘O): no product
    assert "MMA" in cores["dkdv_kernel"] and "MMA" in cores["dq_kernel"]
    assert set(table[table["points"] > 0]["kernel"]) == {"attention_fwd_kernel"}
