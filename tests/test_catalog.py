"""Plugins through the catalog (kernels.catalog), as a user's would come: modules written
here, named by ATTNIO_PLUGINS, loaded in fresh processes (a name registers once per process,
so every registration is exercised in a child that prints what it saw as JSON)."""

import argparse
import json
import os
import subprocess
import sys
import textwrap

import pytest
from workflow_run import ROOT, env

from kernels import catalog, spec

SEED = 20240611
# what a grid of the sweep holds beside its impls and tokens (the schema's defaults, one each)
GRID = {
    "batch": [1],
    "heads": [1],
    "head_dim": [16],
    "dtype": ["float32"],
    "causal": [False],
    "blocks": [[16, 16]],
}

# Our own attention for the plugins: softmax(q·kᵀ/√d)·v in float32, cast back.
ATTENTION = """
import math

import torch

from kernels.catalog import implementation


def softmax_attention(q, k, v, causal):
    s = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:
        T = q.shape[-2]
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return (torch.softmax(s, dim=-1) @ v.float()).to(q.dtype)
"""

PLUGINS = {
    # good ones
    "catalog_goodplug": """
@implementation("catalog_good", stores="SP")
def catalog_good(q, k, v, *, causal):
    return softmax_attention(q, k, v, causal)
""",
    "catalog_rowsplug": """
@implementation("catalog_rows", stores="SP", stored_rows=16)
def catalog_rows(q, k, v, *, causal):
    return softmax_attention(q, k, v, causal)
""",
    "catalog_modelplug": """
def model(point):
    qkvo = point.groups * point.tokens * point.head_dim * point.e
    return {
        ("attention_fwd", "Q", "load"): qkvo + 7,
        ("attention_fwd", "O", "store"): qkvo,
        ("catalog_stats", "L", "store"): point.groups * point.tokens * 4,
    }


@implementation("catalog_modelled", stores="none", traffic_model=model)
def catalog_modelled(q, k, v, *, causal):
    return softmax_attention(q, k, v, causal)
""",
    "catalog_crashplug": """
@implementation("catalog_crash", stores="SP")
def catalog_crash(q, k, v, *, causal):
    raise RuntimeError("catalog_crash exploded on purpose")
""",
    "catalog_shapeplug": """
@implementation("catalog_shape", stores="SP")
def catalog_shape(q, k, v, *, causal):
    return softmax_attention(q, k, v, causal)[..., :-1, :].contiguous()
""",
    "catalog_survivor": """
@implementation("catalog_survivor", stores="SP")
def catalog_survivor(q, k, v, *, causal):
    return softmax_attention(q, k, v, causal)
""",
    # refused ones
    "catalog_broken_import": """
raise ImportError("catalog_broken_import needs a package nobody has")
""",
    "catalog_clash_ours": """
@implementation("torch_naive", stores="SP")
def mine(q, k, v, *, causal):
    return softmax_attention(q, k, v, causal)
""",
    "catalog_dup_first": """
@implementation("catalog_dup", stores="SP")
def first(q, k, v, *, causal):
    return softmax_attention(q, k, v, causal)
""",
    "catalog_dup_second": """
@implementation("catalog_dup", stores="SP")
def second(q, k, v, *, causal):
    return softmax_attention(q, k, v, causal)
""",
    "catalog_wrong_signature": """
@implementation("catalog_wrongsig", stores="SP")
def f(q, k):
    return q
""",
    "catalog_bad_stores": """
@implementation("catalog_ps", stores="PS")
def f(q, k, v, *, causal):
    return softmax_attention(q, k, v, causal)
""",
    "catalog_bad_twin": """
@implementation("catalog_badtwin", stores="none", twin="nonexistent")
def f(q, k, v, *, causal):
    return softmax_attention(q, k, v, causal)
""",
    "catalog_no_model_module": """
@implementation("catalog_nomodel", stores="none", traffic_model="catalog_nosuchmodule:model")
def f(q, k, v, *, causal):
    return softmax_attention(q, k, v, causal)
""",
    "catalog_orphan_model": """
@implementation("catalog_orphan", stores="none", triton=True, twin="triton_naive",
                kept_model="kernels.paths.triton_flash.model:kept")
def f(q, k, v, *, causal, block_m, block_n):
    return softmax_attention(q, k, v, causal)
""",
    "catalog_half_bad": """
@implementation("catalog_half_ok", stores="SP")
def fine(q, k, v, *, causal):
    return softmax_attention(q, k, v, causal)


@implementation("catalog_half_refused", stores="SP", stored_rows=0)
def refused(q, k, v, *, causal):
    return softmax_attention(q, k, v, causal)
""",
}

GOOD = ["catalog_goodplug", "catalog_rowsplug", "catalog_modelplug", "catalog_crashplug", "catalog_shapeplug"]
BAD = [
    "catalog_goodplug",
    "catalog_broken_import",
    "catalog_clash_ours",
    "catalog_dup_first",
    "catalog_dup_second",
    "catalog_wrong_signature",
    "catalog_bad_stores",
    "catalog_bad_twin",
    "catalog_no_model_module",
    "catalog_orphan_model",
    "catalog_half_bad",
    "catalog_survivor",
]

# The child's common part: run a call, keep its error as [type, message] (None: no error).
PRELUDE = """
import json, math

import torch

import kernels
from kernels import catalog


def caught(fn):
    try:
        fn()
    except Exception as err:
        return [type(err).__name__, str(err)]
    return None


result = {
    "names": list(catalog.names()),
    "entries": {n: {"origin": i.origin, "ours": i.ours} for n, i in catalog.registered().items()},
    "problems": [[p.plugin, p.reason] for p in catalog.problems()],
}
"""

GOOD_CHILD = f"""
from kernels.impl.reference import reference_float64
from kernels.models.cost import summarize
from kernels.planning.point import Point
from kernels.planning.sweep import planned

torch.manual_seed({SEED})
q, k, v = (torch.randn(2, 3, 37, 16) for _ in range(3))
for causal in (True, False):
    o = kernels.attention(q, k, v, impl="catalog_good", causal=causal)
    ref = reference_float64(q, k, v, causal)
    result[f"error_causal_{{causal}}"] = (o.double() - ref).abs().max().item()
result["dtype"] = str(o.dtype)
out = torch.full_like(q, float("nan"))
back = kernels.attention(q, k, v, impl="catalog_good", causal=True, out=out)
result["out_returned"] = back is out
result["out_error"] = (out.double() - reference_float64(q, k, v, True)).abs().max().item()

summaries = {{}}
for name in ("catalog_good", "catalog_rows", "catalog_modelled"):
    point = Point(name, 1, 1, 100, 16, "float32", False)
    summaries[name] = summarize(point)
result["summaries"] = summaries
point = Point("catalog_modelled", 2, 3, 100, 16, "float32", True)
result["modelled_summary"] = summarize(point)
result["modelled_own"] = [[*key, n] for key, n in catalog.get("catalog_modelled").model()(point).items()]

crash = []
try:
    kernels.attention(q, k, v, impl="catalog_crash", causal=True)
except Exception as err:
    crash = [type(err).__name__, str(err)]
result["crash"] = crash
result["shape"] = caught(lambda: kernels.attention(q, k, v, impl="catalog_shape", causal=False))
result["unknown_point"] = caught(lambda: Point("catalog_nosuch", 1, 1, 64, 16, "float32", False))
result["unknown_attention"] = caught(lambda: kernels.attention(q, k, v, impl="catalog_nosuch", causal=False))
result["unknown_grid"] = caught(lambda: planned([{{"impls": ["catalog_good", "catalog_nosuch"]}}], None))
grid = {{"impls": ["catalog_good", "torch_naive"], "tokens": [64], **{GRID}}}
result["known_grid"] = planned([grid], None)[:2]
result["known_points"] = [point.name for point in planned([grid], None)[2]]
result["not_a_module"] = caught(lambda: catalog.use_plugins(["not a module"]))
print("RESULT " + json.dumps(result))
"""

BAD_CHILD = (
    f"GRID = {GRID!r}\n"
    + """
from kernels.planning.point import Point
from kernels.planning.sweep import planned

result["unknown_point"] = caught(lambda: Point("catalog_nosuch", 1, 1, 64, 16, "float32", False))
result["grids"] = planned(
    [
        {"impls": ["torch_naive", "catalog_missing"], "tokens": [64], **GRID},
        {"impls": ["catalog_missing"], "tokens": [128], **GRID},
        {"impls": ["catalog_survivor"], "tokens": [256], **GRID},
    ],
    None,
)[:2]
print("RESULT " + json.dumps(result))
"""
)


@pytest.fixture(scope="module")
def plugin_dir(tmp_path_factory):
    where = tmp_path_factory.mktemp("plugins")
    for module, body in PLUGINS.items():
        source = ATTENTION if "implementation(" in body else ""
        (where / f"{module}.py").write_text(source + textwrap.dedent(body))
    return where


def child_env(plugin_dir, plugins: list[str]) -> dict:
    return env() | {
        "PYTHONPATH": os.pathsep.join([str(plugin_dir), str(ROOT)]),
        "ATTNIO_PLUGINS": ",".join(plugins),
        "ATTNIO_INTERPRET": "1",
    }


def run_child(plugin_dir, plugins: list[str], code: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PRELUDE + code],
        env=child_env(plugin_dir, plugins),
        cwd=plugin_dir,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert len(lines) == 1, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(lines[0].removeprefix("RESULT "))


def kernels_cli(plugin_dir, plugins: list[str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kernels", *args],
        env=child_env(plugin_dir, plugins),
        cwd=plugin_dir,
        capture_output=True,
        text=True,
        timeout=240,
    )


@pytest.fixture(scope="module")
def good(plugin_dir):
    return run_child(plugin_dir, GOOD, GOOD_CHILD)


@pytest.fixture(scope="module")
def bad(plugin_dir):
    return run_child(plugin_dir, BAD, BAD_CHILD)


def ours() -> list[str]:
    """Our implementations, in their order, as this process (no plugins) sees them."""
    return [name for name, entry in catalog.registered().items() if entry.ours]


def problem(result: dict, plugin: str) -> str:
    reasons = [reason for name, reason in result["problems"] if name == plugin]
    assert len(reasons) == 1, result["problems"]
    return reasons[0]


# --- 1. a good torch plugin --------------------------------------------------------------


def test_good_plugin_registers_after_ours(good):
    mine = ours()
    assert {"torch_naive", "triton_naive", "triton_flash", "reference"} <= set(mine)
    plugins = ["catalog_good", "catalog_rows", "catalog_modelled", "catalog_crash", "catalog_shape"]
    assert good["names"] == mine + plugins  # ours first, then the plugins in ATTNIO_PLUGINS's order
    assert good["problems"] == []
    entry = good["entries"]["catalog_good"]
    assert entry == {"origin": "catalog_goodplug", "ours": False}
    assert all(good["entries"][name]["ours"] for name in mine)


def test_good_plugin_agrees_with_reference(good):
    # odd T = 37, float32, causal and not; the result comes back in q's dtype
    assert 0 < good["error_causal_True"] <= 1e-5
    assert 0 < good["error_causal_False"] <= 1e-5
    assert good["dtype"] == "torch.float32"
    # out= (the registry copies into the NaN-poisoned buffer and returns it)
    assert good["out_returned"] is True
    assert good["out_error"] <= 1e-5


def test_good_plugin_point_and_model(good):
    summary = good["summaries"]["catalog_good"]
    assert summary["stores"] == "SP"
    assert summary["twin"] == "catalog_good"  # a plugin storing S and P is its own twin
    assert summary["origin"] == "catalog_goodplug"
    assert summary["triton"] is False
    assert summary["traffic_model_bytes"] is None
    assert summary["bytes_S"] == summary["bytes_P"] == 100 * 100 * 4
    rows = good["summaries"]["catalog_rows"]
    assert rows["bytes_S"] == rows["bytes_P"] == 16 * 100 * 4
    assert rows["origin"] == "catalog_rowsplug"
    # the compulsory traffic still counts every score once, whatever rows are held
    assert rows["traffic_compulsory_bytes"] == summary["traffic_compulsory_bytes"]


# --- 2. a plugin's traffic model ---------------------------------------------------------


def test_plugin_traffic_model_is_summarized(good):
    summary = good["modelled_summary"]
    own = {(kernel, tensor, op): n for kernel, tensor, op, n in good["modelled_own"]}
    qkvo = 2 * 3 * 100 * 16 * 4
    assert own == {
        ("attention_fwd", "Q", "load"): qkvo + 7,
        ("attention_fwd", "O", "store"): qkvo,
        ("catalog_stats", "L", "store"): 2 * 3 * 100 * 4,
    }
    assert summary["traffic_model_bytes"] == sum(own.values())
    assert summary["stores"] == "none" and summary["twin"] == "torch_naive"
    assert summary["bytes_S"] == summary["bytes_P"] == 0
    stages = {(s["kernel"], s["tensor"], s["op"]): s for s in summary["stages"]}
    for key, nbytes in own.items():
        assert stages[key]["model_bytes"] == nbytes
    assert stages[("catalog_stats", "L", "store")]["compulsory_bytes"] == 0  # the model's own row
    assert stages[("attention_fwd", "K", "load")]["model_bytes"] == 0  # compulsory, not modelled
    assert sum(s["model_bytes"] for s in summary["stages"]) == summary["traffic_model_bytes"]


# --- 3. refusals --------------------------------------------------------------------------


def test_refused_plugins_are_problems_and_the_rest_loads(bad):
    names = bad["names"]
    assert names[: len(ours())] == ours()  # every one of ours, first
    assert "catalog_good" in names and "catalog_survivor" in names  # before and after the failures
    assert bad["entries"]["catalog_survivor"]["origin"] == "catalog_survivor"
    assert bad["entries"]["torch_naive"]["origin"] == "kernels.paths.torch_naive"  # not the clash
    assert {p for p, _ in bad["problems"]} == {
        "catalog_broken_import",
        "catalog_clash_ours",
        "catalog_dup_second",
        "catalog_wrong_signature",
        "catalog_bad_stores",
        "catalog_bad_twin",
        "catalog_no_model_module",
        "catalog_orphan_model",
        "catalog_half_bad",
    }
    for refused in ("catalog_wrongsig", "catalog_ps", "catalog_badtwin", "catalog_nomodel"):
        assert refused not in names


def test_refusal_reasons(bad):
    reason = problem(bad, "catalog_broken_import")
    assert "ImportError" in reason and "needs a package nobody has" in reason

    reason = problem(bad, "catalog_clash_ours")
    assert "'torch_naive'" in reason and "already registered" in reason
    assert "kernels.paths.torch_naive" in reason

    reason = problem(bad, "catalog_dup_second")
    assert "'catalog_dup'" in reason and "already registered by catalog_dup_first" in reason
    assert bad["entries"]["catalog_dup"]["origin"] == "catalog_dup_first"  # the first one kept

    reason = problem(bad, "catalog_wrong_signature")
    assert "catalog_wrongsig" in reason and "(q, k, v, *, causal" in reason

    reason = problem(bad, "catalog_bad_stores")
    assert "stores='PS'" in reason and "SP, S, none" in reason

    reason = problem(bad, "catalog_bad_twin")
    assert "twin='nonexistent'" in reason

    # a traffic model in a module that does not exist: refused when planned, not when counted
    reason = problem(bad, "catalog_no_model_module")
    assert "traffic_model='catalog_nosuchmodule:model'" in reason and "no module named" in reason

    # a backward's model with no backward to model
    reason = problem(bad, "catalog_orphan_model")
    assert "kept_model describes a backward" in reason and "backward=" in reason


def test_a_plugin_is_left_out_whole(bad):
    reason = problem(bad, "catalog_half_bad")
    assert "catalog_half_refused" in reason and "stored_rows=0" in reason
    assert "catalog_half_ok" not in bad["names"]  # registered fine, then left out with the rest
    assert "catalog_half_refused" not in bad["names"]


def test_use_plugins_refuses_a_non_module(good):
    kind, message = good["not_a_module"]
    assert kind == "ValueError" and "'not a module'" in message


# --- 4. a plugin failing at run time -------------------------------------------------------


def test_plugin_error_at_run_time(good):
    assert good["crash"] == ["RuntimeError", "catalog_crash exploded on purpose"]


def test_plugin_wrong_shape_is_refused(good):
    kind, message = good["shape"]
    assert kind == "ValueError"
    assert "impl='catalog_shape'" in message and "(from catalog_shapeplug)" in message
    assert "(2, 3, 36, 16)" in message and "(2, 3, 37, 16)" in message


def test_validate_reports_a_crashing_plugin(plugin_dir, tmp_path):
    out = tmp_path / "validate.json"
    done = kernels_cli(
        plugin_dir,
        ["catalog_crashplug"],
        "validate",
        "--impl",
        "catalog_crash",
        "torch_naive",
        "--device",
        "cpu",
        "--dtype",
        "float32",
        "--tokens",
        "33",
        "--head-dim",
        "16",
        "--quiet",
        "--json",
        str(out),
    )
    assert done.returncode == 1, done.stderr[-3000:]  # an error is an unexpected verdict
    results = json.loads(out.read_text())
    crashed = [r for r in results if r["impl"] == "catalog_crash"]
    others = [r for r in results if r["impl"] == "torch_naive"]
    assert {r["causal"] for r in crashed} == {r["causal"] for r in others} == {True, False}
    for r in crashed:
        assert r["verdict"] == "error" and not r["as_expected"]
        assert r["message"] == "RuntimeError: catalog_crash exploded on purpose"
    for r in others:
        assert r["verdict"] == "pass" and r["as_expected"] and r["tokens"] == 33
    assert "catalog_crash exploded on purpose" in done.stdout


# --- 5. unknown names ----------------------------------------------------------------------


def test_unknown_name_lists_registered_ones(good):
    for key in ("unknown_point", "unknown_attention"):
        kind, message = good[key]
        assert kind == "ValueError"
        assert "impl='catalog_nosuch'" in message
        assert "allowed values are " + ", ".join(good["names"]) in message
        assert "plugin " not in message  # no plugin failed


def test_unknown_name_names_failed_plugins(bad):
    kind, message = bad["unknown_point"]
    assert kind == "ValueError"
    assert "allowed values are " + ", ".join(bad["names"]) in message
    reason = problem(bad, "catalog_broken_import")
    assert f"plugin catalog_broken_import: {reason}" in message
    assert f"plugin catalog_bad_stores: {problem(bad, 'catalog_bad_stores')}" in message


# --- 6. the sweep planned against the registry ---------------------------------------------


def test_a_sweep_without_failed_plugins_is_planned_against_the_registry(good):
    kind, message = good["unknown_grid"]
    assert kind == "ValueError"
    assert "sweep grid 0" in message and "catalog_nosuch not registered" in message
    assert "catalog_good" in message  # among the registered ones listed
    kept, warnings = good["known_grid"]
    assert kept == [{"impls": ["catalog_good", "torch_naive"], "tokens": [64], **GRID}] and warnings == []
    assert [name.split("/")[0] for name in good["known_points"]] == ["catalog_good", "torch_naive"]


def test_a_sweep_with_a_failed_plugin_leaves_its_names_out(bad):
    kept, warnings = bad["grids"]
    assert kept == [
        {"impls": ["torch_naive"], "tokens": [64], **GRID},
        {"impls": ["catalog_survivor"], "tokens": [256], **GRID},
    ]  # the grid left with no implementation is dropped
    assert len(warnings) == 2
    for index, warning in enumerate(warnings):
        assert warning.startswith(f"sweep grid {index}: impls catalog_missing left out")
        assert "plugin catalog_broken_import: import failed: ImportError" in warning


# --- 7. measuring a plugin's point -----------------------------------------------------------


def test_measure_a_plugin_point(plugin_dir, tmp_path):
    record = tmp_path / "record.json"
    done = kernels_cli(
        plugin_dir,
        ["catalog_goodplug"],
        "measure",
        "--impl",
        "catalog_good",
        "--tokens",
        "48",
        "--head-dim",
        "16",
        "--dtype",
        "float32",
        "--causal",
        "--device",
        "cpu",
        "--cpu-seconds",  # the ci preset's windows: a time is asked for, not a stable one
        "0.3",
        "--stage-seconds",
        "0.1",
        "--out",
        str(record),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    data = json.loads(record.read_text())
    assert data["status"] == "ok", data.get("reason")
    assert data["impl"] == "catalog_good"
    assert data["stores"] == "SP" and data["origin"] == "catalog_goodplug" and data["twin"] == "catalog_good"
    assert data["tokens"] == 48 and data["causal"] is True
    assert data["time_ms"] > 0
    assert data["peak_alloc_bytes"] > 0
    assert data["max_abs_error"] <= 1e-5
    assert data["bytes_S"] == 48 * 48 * 4


# --- a name's length: it is part of file names --------------------------------------------


def test_a_name_longer_than_the_limit_is_refused_at_registration_naming_the_limit():
    """300 characters passed the rule, the schema and the planner, then the run died with
    ENAMETOOLONG in Snakemake's logging: refused when registered, naming the limit."""
    from kernels.planning.point import impl_name

    def attention(q, k, v, *, causal):
        return q

    with pytest.raises(catalog.PluginError, match=f"at most {spec.NAME_LIMIT} characters") as refused:
        catalog.implementation("x" * 300, stores="SP")(attention)
    assert "(this one has 300)" in str(refused.value) and "x" * 41 not in str(refused.value)
    assert "x" * 300 not in catalog.registered()
    assert catalog.name_problem("a" * spec.NAME_LIMIT) is None and catalog.NAME.fullmatch(
        "a" * spec.NAME_LIMIT
    )
    assert catalog.name_problem("a" * (spec.NAME_LIMIT + 1)) and not catalog.NAME.fullmatch("a" * 65)
    assert "lower-case" in catalog.name_problem("Flash-9")
    with pytest.raises(argparse.ArgumentTypeError, match=f"at most {spec.NAME_LIMIT} characters"):
        impl_name("x" * 300)


def test_a_name_at_the_limit_leaves_every_file_name_it_is_part_of_within_255_bytes():
    """The limit's headroom: the longest name in every file name the workflow builds from it
    (records, logs and benchmark records of points, validations, builds, gathers and
    profiles), with every other field at its longest and an atomic write's temporary name or
    a damaged file's suffix added, within a file system's 255 bytes per name."""
    from kernels.cli.arguments import TEMPORARY_NAME_EXTRA
    from kernels.planning import point as points

    longest = points.Point(
        "triton_flash", spec.MAX_BATCH, spec.MAX_GRID_YZ, spec.MAX_TOKENS, max(spec.HEAD_DIMS),
        max(spec.DTYPES, key=len), True, max(spec.BLOCK_SIZES), max(spec.BLOCK_SIZES),
        inputs=max(spec.INPUTS, key=len), direction="backward", query_tokens=spec.MAX_TOKENS - 1,
        kv_heads=spec.MAX_GRID_YZ // 3,
    )  # fmt: skip
    fields = longest.wildcards() | {"impl": "a" * spec.NAME_LIMIT}
    patterns = [points.POINT_PATTERN, points.VALIDATION_PATTERN, points.BUILD_PATTERN, "{impl}_{dtype}"]
    patterns += ["ncu_{impl}", "summary_{impl}"]
    extra = max(TEMPORARY_NAME_EXTRA, len(".damaged"))
    names = [part for p in patterns for part in p.format(**fields).split("/")]
    longest_name = max(len(f"{name}.ncu-rep".encode()) for name in names)
    assert longest_name + extra <= 255, longest_name
