"""The command line, run as a user runs it, in a fresh process."""

import json
import os
import subprocess
import sys

import pytest


def run(*args, env=None):
    full_env = dict(os.environ, **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "kernels", *args], capture_output=True, text=True, env=full_env, timeout=300
    )


def test_validate_prints_table_and_passes(tmp_path):
    out = tmp_path / "v.json"
    res = run(
        "validate",
        "--device",
        "cpu",
        "--quiet",
        "--impl",
        "torch_naive",
        "triton_flash",
        "triton_tile_softmax",
        "--dtype",
        "float16",
        "--tokens",
        "20",
        "40",
        "--head-dim",
        "16",
        "--block-n",
        "32",
        "--json",
        str(out),
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "impl" in res.stdout and "verdict" in res.stdout
    assert "12 checks: 12 as expected, 0 unexpected" in res.stdout
    records = json.loads(out.read_text())
    tile = {(r["tokens"], r["causal"]): r["verdict"] for r in records if r["impl"] == "triton_tile_softmax"}
    assert tile == {(20, False): "pass", (20, True): "pass", (40, False): "fail", (40, True): "fail"}
    assert all(r["written"] for r in records if r["verdict"] != "error")


def test_unexpected_verdict_is_flagged():
    from kernels.measure.validate import Result, format_table, summary

    common = dict(
        dtype="float16",
        causal=True,
        batch=1,
        heads=1,
        tokens=90,
        head_dim=16,
        layout="contiguous",
        inputs="normal",
        block_m=16,
        block_n=32,
        seed=0,
        bound=1e-3,
        written=True,
        seconds=0.0,
    )
    good = Result(impl="triton_tile_softmax", error=2.0, verdict="fail", expected="fail", **common)
    bad = Result(impl="triton_flash", error=2.0, verdict="fail", expected="pass", **common)
    assert good.as_expected and not bad.as_expected
    assert "UNEXPECTED" in format_table([good, bad]).splitlines()[2]
    assert "2 checks: 1 as expected, 1 unexpected" in summary([good, bad])


@pytest.mark.parametrize(
    "args, message",
    [
        (["--head-dim", "48", "--tokens", "8"], "argument --head-dim: invalid choice: 48"),
        (["--tokens", "0"], "argument --tokens: 0 must be at least 1"),
        (["--block-m", "24"], "argument --block-m: invalid choice: 24"),
        (["--dtype", "int8"], "argument --dtype: invalid choice: 'int8'"),
        (["--impl", "Flash-3"], "argument --impl: 'Flash-3' is not an implementation name"),
    ],
)
def test_bad_arguments_are_named(args, message):
    res = run("validate", "--device", "cpu", *args)
    assert res.returncode == 2
    assert message in res.stderr


def test_an_unregistered_implementation_is_named_with_the_registered_ones():
    """A well-formed name is checked against the registry once the mode is fixed."""
    res = run("validate", "--device", "cpu", "--impl", "flash3")
    assert res.returncode != 0
    assert "--impl: impl='flash3': allowed values are flex, reference," in res.stderr
    assert "triton_s_only" in res.stderr
    # and, no plugin being named, how a plugin's names are found
    assert (
        "once ATTNIO_PLUGINS (comma-separated) or the configuration's plugins name its module" in res.stderr
    )


def test_compiled_mode_refuses_cpu_tensors():
    code = (
        "import torch, kernels; q = torch.randn(1, 1, 4, 16);"
        "kernels.attention(q, q, q, impl='triton_flash', causal=False)"
    )
    res = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=dict(os.environ, ATTNIO_INTERPRET="0"),
        timeout=120,
    )
    assert res.returncode != 0
    assert "set ATTNIO_INTERPRET=1" in res.stderr


def test_bad_switch_value():
    res = subprocess.run(
        [sys.executable, "-c", "import kernels.impl.mode"],
        capture_output=True,
        text=True,
        env=dict(os.environ, ATTNIO_INTERPRET="maybe"),
        timeout=60,
    )
    assert res.returncode != 0
    assert "ATTNIO_INTERPRET='maybe'" in res.stderr


def test_launch_pair_names_what_is_wrong():
    import argparse

    from kernels.planning.point import launch_pair

    assert launch_pair("8,2") == (8, 2)
    for bad, message in (("8", "give num_warps,num_stages"), ("8,0", "0 must be at least 1"), ("a,2", "'a'")):
        with pytest.raises(argparse.ArgumentTypeError, match=message):
            launch_pair(bad)
