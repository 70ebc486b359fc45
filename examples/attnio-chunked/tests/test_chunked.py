"""attnio_chunked: its answer against the float64 definition, its refusals, its registration
in kernels.catalog, and its discovery through the entry point once installed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import attnio_chunked
import pytest
import torch
from attnio_chunked import chunked_attention

import kernels.catalog as catalog
from kernels.impl.reference import reference_float64
from kernels.paths.torch_naive.forward import torch_naive

PACKAGE_ROOT = Path(__file__).resolve().parents[1]
SHIPPED = {"torch_chunked_128": 128, "torch_chunked_1024": 1024}


def inputs(T: int, dtype: torch.dtype, seed: int, B: int = 2, H: int = 2, d: int = 32):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(B, H, T, d, generator=g).to(dtype) for _ in range(3))


def max_error(out: torch.Tensor, want: torch.Tensor) -> float:
    return (out.double() - want).abs().max().item()


# T against the chunk: one row; under every chunk but one row's; one full chunk and one row
# past it (and three chunks of 7, the last short). T = 300 cost a second a case in float16.
CASES = [(T, rows, causal) for T in (1, 17, 129) for rows in (1, 7, 128, 1024) for causal in (True, False)]


@pytest.mark.parametrize(("T", "rows", "causal"), CASES)
def test_float32_agrees_with_the_definition(T, rows, causal):
    q, k, v = inputs(T, torch.float32, seed=T * 31 + rows + causal)
    out = chunked_attention(q, k, v, causal=causal, chunk_rows=rows)
    assert out.shape == q.shape and out.dtype == torch.float32
    assert torch.isfinite(out).all()
    assert max_error(out, reference_float64(q, k, v, causal)) <= 1e-5
    # the same operations as torch_naive, chunked: the two agree closer still
    torch.testing.assert_close(out, torch_naive(q, k, v, causal), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(("T", "rows", "causal"), CASES)
def test_float16_is_no_worse_than_torch_naive(T, rows, causal):
    """float16: S and P rounded to 2 bytes, so the bar is torch_naive's own error on the same
    inputs (at most twice it, plus 1e-4: on the CPU the two agree bit for bit), not a fixed tolerance."""
    q, k, v = inputs(T, torch.float16, seed=T * 37 + rows + causal)
    want = reference_float64(q, k, v, causal)
    out = chunked_attention(q, k, v, causal=causal, chunk_rows=rows)
    assert out.dtype == torch.float16 and torch.isfinite(out).all()
    naive = max_error(torch_naive(q, k, v, causal), want)
    assert max_error(out, want) <= 2 * naive + 1e-4


def test_causal_first_row_sees_only_itself():
    """Row 0 of a causal result is v's row 0 exactly, whatever the chunk (a mask built from the
    chunk's own, not absolute, offsets would fail at every chunk but the first)."""
    q, k, v = inputs(50, torch.float32, seed=5)
    out = chunked_attention(q, k, v, causal=True, chunk_rows=7)
    torch.testing.assert_close(out[..., 0, :], v[..., 0, :], rtol=0, atol=0)
    # and a row in a later chunk ignores every later key: changing them changes nothing
    k2, v2 = k.clone(), v.clone()
    k2[..., 22:, :] = torch.randn_like(k2[..., 22:, :])
    v2[..., 22:, :] = torch.randn_like(v2[..., 22:, :])
    again = chunked_attention(q, k2, v2, causal=True, chunk_rows=7)
    torch.testing.assert_close(again[..., :22, :], out[..., :22, :], rtol=0, atol=0)


@pytest.mark.parametrize("bad", [0, -3, 2.0, "128", None, True])
def test_bad_chunk_rows_refused(bad):
    q, k, v = inputs(8, torch.float32, seed=1)
    with pytest.raises(ValueError, match=r"chunk_rows=.*must be a positive integer"):
        chunked_attention(q, k, v, causal=False, chunk_rows=bad)
    with pytest.raises(ValueError, match=r"chunk_rows=.*must be a positive integer"):
        attnio_chunked.register(bad, name="torch_chunked_never")
    assert "torch_chunked_never" not in catalog.names()


def test_import_registers_the_shipped_sizes():
    known = catalog.registered()
    for name, rows in SHIPPED.items():
        entry = known[name]
        assert (entry.stores, entry.stored_rows, entry.twin) == ("SP", rows, "torch_naive")
        assert entry.materialized and not entry.triton and not entry.ours
        assert entry.origin == "attnio_chunked"
        assert f"{rows} query rows" in entry.run.__doc__
    assert not [p for p in catalog.problems() if "attnio_chunked" in p.plugin]


def test_registered_callable_runs_through_attnio():
    import kernels

    q, k, v = inputs(300, torch.float32, seed=3)
    want = reference_float64(q, k, v, True)
    for name in SHIPPED:
        out = catalog.get(name).run(q, k, v, causal=True)
        assert max_error(out, want) <= 1e-5
        out = kernels.attention(q, k, v, impl=name, causal=True)
        assert max_error(out, want) <= 1e-5


def test_register_another_size_and_a_taken_name():
    run = attnio_chunked.register(48, name="torch_chunked_test_48")
    entry = catalog.get("torch_chunked_test_48")
    assert entry.run is run and entry.stored_rows == 48 and entry.stores == "SP"
    q, k, v = inputs(100, torch.float32, seed=4)
    assert max_error(run(q, k, v, causal=False), reference_float64(q, k, v, False)) <= 1e-5
    with pytest.raises(catalog.PluginError, match="already registered"):
        attnio_chunked.register(128)


# --- discovery, each in a fresh process (a process registers a name once) -------------------

PROBE = textwrap.dedent(
    """
    import json, torch
    from kernels import catalog
    names = catalog.names()
    chunked = [n for n in names if n.startswith("torch_chunked")]
    found = {n: [catalog.get(n).stored_rows, catalog.get(n).origin] for n in chunked}
    q = k = v = torch.randn(1, 2, 33, 16)
    out = catalog.get("torch_chunked_128").run(q, k, v, causal=True)
    print(json.dumps({"names": names, "problems": [str(p) for p in catalog.problems()],
                      "found": found, "shape": list(out.shape), "torch_naive": "torch_naive" in names}))
    """
)


def probe(pythonpath: str, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("ATTNIO_PLUGINS", "PYTHONPATH")}
    env |= {"ATTNIO_INTERPRET": "1", "PYTHONPATH": pythonpath, **extra}
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120, cwd="/"
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_found_through_the_entry_point_once_installed(tmp_path):
    # built from a copy: building in place leaves build/ and an .egg-info beside the module,
    # and an .egg-info on sys.path is itself a distribution whose entry point attnio finds
    source, target = tmp_path / "src", tmp_path / "site"
    shutil.copytree(
        PACKAGE_ROOT, source, ignore=shutil.ignore_patterns("tests", "build", "*.egg-info", "__pycache__")
    )
    build = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
         "--disable-pip-version-check", "--target", str(target), str(source)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert build.returncode == 0, build.stdout[-2000:] + build.stderr[-3000:]
    points = list(target.glob("attnio_chunked-0.1.0.dist-info/entry_points.txt"))
    assert points and "attnio.implementations" in points[0].read_text()
    got = probe(str(target))
    assert got["problems"] == [], got["problems"]
    assert got["torch_naive"]
    for name, rows in SHIPPED.items():
        assert name in got["names"]
        stored_rows, origin = got["found"][name]
        assert stored_rows == rows and origin == "attnio_chunked"
    assert got["shape"] == [1, 2, 33, 16]


def test_found_through_attnio_plugins_without_installing(tmp_path):
    # the module alone on PYTHONPATH (no distribution metadata, so no entry point)
    shutil.copytree(PACKAGE_ROOT / "attnio_chunked", tmp_path / "attnio_chunked")
    got = probe(str(tmp_path), ATTNIO_PLUGINS="attnio_chunked")
    assert got["problems"] == [], got["problems"]
    assert {n: r for n, (r, _) in got["found"].items()} == SHIPPED
    assert all(origin == "attnio_chunked" for _, origin in got["found"].values())
