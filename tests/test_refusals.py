"""The command line and the configuration refuse before they work: outputs that cannot be
written, limits that are not finite and positive, shapes beyond what a study plans, integral
floats and keys given twice in a config file, each named with what is allowed; help texts
say each default once; skip reasons keep their significant figures; and a point too large
for the machine is skipped in seconds even without measured ceilings."""

import json
import math
import os
from types import SimpleNamespace

import pytest
from workflow_run import ROOT, snakemake

from kernels.cli import build_parser
from kernels.planning.point import Point
from kernels.spec import MAX_TOKENS

POINT = ["--impl", "sdpa", "--tokens", "16", "--head-dim", "16", "--dtype", "float32"]


def refused(argv: list[str], capsys) -> str:
    """The parser's message for argv, which it must refuse (exit status 2)."""
    with pytest.raises(SystemExit) as stop:
        build_parser().parse_args(argv)
    assert stop.value.code == 2
    return capsys.readouterr().err


# --- outputs checked while the arguments are parsed -----------------------------------------


@pytest.mark.parametrize(
    ("path", "said"),
    [
        ("/proc/x", "/proc/x: cannot create files in /proc"),
        ("/dev/null", "exists and is not a regular file"),
        ("/tmp", "is a folder; name a file in it"),
        ("", "an empty path"),
        ("x" * 5000 + ".json", "bytes: at most 4,095 (PATH_MAX)"),
        ("x" * 250 + ".json", "the atomic write's temporary name"),
    ],
)
def test_an_output_that_cannot_be_written_is_refused_at_once(path, said, capsys):
    for argv in (
        ["measure", *POINT, "--out", path],
        ["validate", "--json", path],
        ["ceilings", "--out", path],
        ["tile-errors", "--out", path],
    ):
        message = refused(argv, capsys)
        assert said in message and ("--out" in message or "--json" in message), message


def test_an_output_in_a_folder_to_be_made_is_taken(tmp_path):
    out = tmp_path / "a" / "b" / "record.json"
    args = build_parser().parse_args(["measure", *POINT, "--out", str(out)])
    assert args.out == str(out) and not (tmp_path / "a").exists()  # nothing made yet
    assert not list(tmp_path.iterdir())  # the probe left nothing behind


def test_build_refuses_its_outputs_before_it_builds(tmp_path, capsys):
    point = "triton_flash/float16/B1-H1-T16-d16-causal-bm16-bn32-normal"
    message = refused(["build", "--point", point, "--out", "/proc/x", "--artifacts", str(tmp_path)], capsys)
    assert "argument --out: /proc/x" in message
    message = refused(
        ["build", "--point", point, "--out", str(tmp_path / "b.json"), "--artifacts", "/proc/a"], capsys
    )
    assert "argument --artifacts: /proc/a" in message
    (tmp_path / "file").write_text("")
    message = refused(
        ["preflight", "--out", str(tmp_path / "p.json"), "--artifacts", str(tmp_path / "file")], capsys
    )
    assert "is a file, not a folder" in message


# --- limits and shapes ------------------------------------------------------------------------


@pytest.mark.parametrize("flag", ["--budget-seconds", "--time-limit"])
@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0", "soon"])
def test_limits_are_finite_and_positive(flag, value, capsys, tmp_path):
    message = refused(["measure", *POINT, flag, value, "--out", str(tmp_path / "r.json")], capsys)
    assert f"argument {flag}: " in message
    assert "must be a finite number of seconds above 0" in message or "is not a number" in message


def test_limits_in_range_are_taken(tmp_path):
    args = build_parser().parse_args(
        [
            "measure",
            *POINT,
            "--budget-seconds",
            "1e-12",
            "--time-limit",
            "2",
            "--out",
            str(tmp_path / "r.json"),
        ]
    )
    assert args.budget_seconds == 1e-12 and args.time_limit == 2


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (
            ["validate", "--tokens", "99999999999"],
            "argument --tokens: 99,999,999,999 is more than 16,777,216",
        ),
        (["validate", "--tokens", "8", "--heads", "70000"], "argument --heads: 70,000 is more than 65,535"),
        (["predict", "--tokens", str(MAX_TOKENS + 1), "--head-dim", "64"], "argument --tokens: "),
        (["ncu-target", *POINT[:2], "--tokens", "99999999999", *POINT[4:]], "argument --tokens: "),
        (
            ["measure", *POINT[:2], "--tokens", "99999999999", *POINT[4:], "--out", "x.json"],
            "argument --tokens: ",
        ),
        (["measure", *POINT, "--heads", "0", "--out", "x.json"], "argument --heads: 0 must be at least 1"),
    ],
)
def test_every_command_bounds_the_shape(argv, said, capsys):
    assert said in refused(argv, capsys)


def test_validation_too_large_for_memory_is_refused_before_it_allocates():
    from kernels.measure.gates import validation_too_large
    from kernels.planning.cases import Shape

    def refusal(impl: str, tokens: int) -> str:
        args = build_parser().parse_args(["validate", "--impl", impl, "--tokens", str(tokens)])
        return validation_too_large(args.impl, args.dtype, (Shape(1, 2, tokens, 64),), "cpu")

    assert "GiB (the float64 reference keeps S and P whole)" in refusal("torch_naive", MAX_TOKENS)
    assert "more than the Triton interpreter is given" in refusal("triton_flash", 6000)  # 2·6,000² > 2²⁶


# --- help and reasons read as they should -----------------------------------------------------


def test_help_says_each_default_once():
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices
    for name, command in commands.items():
        text = command.format_help()
        assert "(default: None)" not in text and "(default 64)" not in text, name
        for line in " ".join(text.split()).split("--"):
            assert line.count("default") <= 1, (name, line)
    measure = " ".join(commands["measure"].format_help().split())
    assert "Triton only (default: 64)" in measure and "(default: 900)" in measure


def test_skip_reasons_keep_their_significant_figures():
    from kernels.measure.gates import figure, too_slow

    assert [figure(x) for x in (2.4e-05, 0.375, 64.2, 16384.4, 0.0)] == [
        "2.4e-05",
        "0.375",
        "64.2",
        "16,384",
        "0",
    ]
    rates = {"copy_gbps": 10.0, "matmul_tflops": 0.1}
    reason = too_slow(Point("sdpa", 1, 1, 16, 16, "float32", False), rates, 1e-12)
    assert "at least 0 s" not in reason and "at least 4.1e-07 s per call" in reason
    assert "over the budget of 1e-12 s per call" in reason


def test_without_ceilings_a_huge_point_is_skipped_quickly_and_a_small_one_measures_nothing(monkeypatch):
    import time

    from kernels.measure import ceilings, gates

    small = Point("sdpa", 1, 1, 1024, 64, "float32", False)
    monkeypatch.setattr(ceilings, "quick", lambda device: pytest.fail("a small point needs no measurement"))
    assert gates.too_slow(small, None, 30, "cpu") is None
    monkeypatch.undo()
    started = time.perf_counter()
    reason = gates.too_slow(Point("sdpa", 1, 1, 10_000_000, 16, "float32", False), None, 30, "cpu")
    assert time.perf_counter() - started < 10
    assert "quick measurement of this machine, as no ceilings were given" in reason
    assert "over the budget of 30 s per call" in reason
    null = {"copy_gbps": None, "matmul_tflops": None}  # a device this machine lacks
    assert not ceilings.usable(null) and not ceilings.usable({"copy_gbps": math.nan, "matmul_tflops": 1})


# --- the configuration: duplicate keys, integral floats, non-finite numbers -----------------


def config_checks(configfiles=(), cli_config=None) -> dict:
    """workflow/rules/config_file.smk (plain Python) run against a stand-in for Snakemake's
    workflow object: its functions, after it has checked the command line's config."""
    workflow = SimpleNamespace(
        basedir=str(ROOT),
        overwrite_configfiles=[str(p) for p in configfiles],
        config_settings=SimpleNamespace(config=cli_config or {}),
    )
    namespace = {"workflow": workflow}
    exec(compile((ROOT / "workflow/rules/config_file.smk").read_text(), "config_file.smk", "exec"), namespace)
    return namespace


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("seed: 3.0\n", "seed = 3.0 must be an integer: write 3"),
        ("sweep:\n  tokens: [16.0]\n", "sweep.tokens[0] = 16.0 must be an integer: write 16"),
        ("sweep:\n  - head_dim: [16.0]\n", "sweep[0].head_dim[0] = 16.0 must be one of 16, 32"),
        ("sweep:\n  blocks: [[16, 32.0]]\n", "sweep.blocks[0][1] = 32.0 must be one of 16, 32"),
        ("limits: {job_seconds: 900.0}\n", "limits.job_seconds = 900.0 must be an integer: write 900"),
        ("limits: {call_seconds: .nan}\n", "limits.call_seconds = nan: must be a finite number"),
        ("limits: {call_seconds: .inf}\n", "limits.call_seconds = inf: must be a finite number"),
        ("seed: 1\ndevice: cpu\nseed: 2\n", "the key seed is given twice (lines 1 and 3)"),
        (
            "sweep:\n  - tokens: [16]\n    tokens: [32]\n",
            "the key sweep[0].tokens is given twice (lines 2 and 3)",
        ),
    ],
)
def test_a_config_file_is_refused_naming_the_key_and_the_file(tmp_path, content, said):
    from snakemake.exceptions import WorkflowError

    path = tmp_path / "bad.yaml"
    path.write_text(content)
    with pytest.raises(WorkflowError) as found:
        config_checks([path])
    assert f"config file {path}: " in str(found.value) and said in str(found.value)
    checks = config_checks()  # the workflow's own config file, checked by checked_config_file
    with pytest.raises(WorkflowError) as found:
        checks["checked_config_file"](str(path))
    assert said in str(found.value)


def test_the_presets_and_a_number_where_numbers_go_pass(tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text("limits: {call_seconds: 30.0}\nsweep: {tokens: [16], total_tokens: null}\n")
    presets = sorted((ROOT / "config" / "presets").glob("*.yaml"))
    checks = config_checks([ROOT / "config" / "config.yaml", *presets, good], {"seed": 3})
    assert checks["checked_config_file"](str(good)) == str(good)


def test_command_line_config_is_checked_too():
    from snakemake.exceptions import WorkflowError

    with pytest.raises(WorkflowError, match=r"--config: seed = 3.0 must be an integer: write 3"):
        config_checks(cli_config={"seed": 3.0})


def test_snakemake_refuses_a_duplicate_key_before_any_job(tmp_path):
    """The real workflow, with a key twice in a --configfile (Snakemake's names for the
    command line's files and values are read first, so a rename of either fails here)."""
    twice = tmp_path / "twice.yaml"
    twice.write_text("device: cpu\nlimits:\n  job_seconds: 60\n  job_seconds: 120\n")
    config = ["--configfile", str(ROOT / "config/config.yaml"), str(twice), "--config", "seed=3"]
    done = snakemake(tmp_path, "-n", "--cores", "1", *config)
    assert done.returncode != 0
    said = done.stdout + done.stderr
    assert f"config file {twice}: the key limits.job_seconds is given twice (lines 3 and 4)" in said
    assert "Traceback" not in said and not (tmp_path / "results").exists()


# --- cuda without a GPU: every command writes its outputs, saying why ---------------------


def test_cuda_without_a_gpu_writes_every_output_saying_why(tmp_path):
    """ceilings, tile-errors, validate and measure asked for cuda on a machine without a GPU
    (one process: the Triton mode is set once): ceilings with null rates and the reason, the
    tile-error table's header, every validation case unavailable, and a skipped record."""
    import subprocess
    import sys

    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    c, t, v, m = (tmp_path / n for n in ("ceilings.json", "tiles.csv", "validate.json", "point.json"))
    cuda = ["--device", "cuda"]
    runs = [
        ["ceilings", *cuda, "--out", str(c)],
        ["tile-errors", *cuda, "--out", str(t)],
        [
            "validate",
            *cuda,
            "--impl",
            "sdpa",
            "triton_flash",
            "--dtype",
            "float16",
            "--quiet",
            "--json",
            str(v),
        ],
        ["measure", "--impl", "triton_flash", "--tokens", "16", "--head-dim", "16", "--dtype", "float16"]
        + [*cuda, "--ceilings", str(c), "--require-validation", str(v), "--out", str(m)],
    ]
    script = f"from kernels.cli import main\nfor argv in {runs!r}:\n    assert main(argv) == 0, argv\n"
    env = {k: val for k, val in os.environ.items() if k != "ATTNIO_INTERPRET"}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    why = "cuda requested but torch.cuda.is_available() is False"
    found = json.loads(c.read_text())
    assert found["copy_gbps"] is None and found["matmul_tflops"] is None and why in found["reason"]
    assert t.read_text() == "impl,tokens,block_m,block_n,head_dim,dtype,causal,error\n"
    results = json.loads(v.read_text())
    assert results and {r["verdict"] for r in results} == {"unavailable"}
    assert all(r["as_expected"] and why in r["message"] for r in results)
    assert {r["expected"] for r in results if r["inputs"] == "large"} == {"pass"}  # sdpa, flash
    from kernels.io.records import validate_record

    record = json.loads(m.read_text())
    validate_record(record)
    assert record["status"] == "skipped" and why in record["reason"]
    assert "# validate on cuda: nothing run" in done.stderr and "ceilings not measured" in done.stdout
