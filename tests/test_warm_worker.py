"""The warm worker (kernels.warm): one process per lane measures point after point, and a point
never changes another's record. Faults are injected by implementations of this test's own
(plugins): a segfault, a kill as the out-of-memory killer does it, a hang with and without
the interpreter lock, a leak, a process state poisoned or patched; each neighbour's record is
compared with the one a process of its own gives. The Snakemake-level tests end runs every
way a run ends and look for any worker left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml
from workflow_run import ROOT, seed_ceilings, snakemake, start, worker_processes
from workflow_run import env as workflow_env

from kernels.io.benchmarks import usage_in
from kernels.io.compare import differences as record_differences
from kernels.warm import session

PLUGIN = """
import ctypes
import math
import os
import signal
import threading
import time

import torch

from kernels.catalog import implementation

LEAKED = []


def attention(q, k, v, causal):
    s = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:
        T = q.shape[-2]
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    return (torch.softmax(s, dim=-1) @ v.float()).to(q.dtype)


@implementation("warm_segfault", stores="SP")
def warm_segfault(q, k, v, *, causal):
    ctypes.string_at(0)


@implementation("warm_killed", stores="SP")
def warm_killed(q, k, v, *, causal):
    os.kill(os.getpid(), signal.SIGKILL)  # what the out-of-memory killer sends


@implementation("warm_sleeps", stores="SP")
def warm_sleeps(q, k, v, *, causal):
    if os.environ.get("WARM_FAULTS_ENTERED"):  # a test waits for this rather than guessing
        open(os.environ["WARM_FAULTS_ENTERED"], "w").close()
    time.sleep(600)


@implementation("warm_holds_the_lock", stores="SP")
def warm_holds_the_lock(q, k, v, *, causal):
    ctypes.PyDLL(None).sleep(600)  # a C call that keeps the interpreter lock


@implementation("warm_leaks", stores="SP")
def warm_leaks(q, k, v, *, causal):
    if not LEAKED:
        LEAKED.append(torch.ones(200 * 2**20 // 4))
    return attention(q, k, v, causal)


@implementation("warm_cuda_error", stores="SP")
def warm_cuda_error(q, k, v, *, causal):
    index = torch.tensor([q.numel() * 4], device=q.device)
    return q.flatten()[index].sum() + attention(q, k, v, causal)  # a device-side assert


@implementation("warm_poisons", stores="SP")
def warm_poisons(q, k, v, *, causal):
    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float64)
    torch.manual_seed(7)
    torch.backends.mkldnn.enabled = False
    torch.set_float32_matmul_precision("medium")
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    os.environ["ATTNIO_POISONED"] = "1"
    os.chdir("/")
    return attention(q, k, v, causal)


@implementation("warm_patches", stores="SP")
def warm_patches(q, k, v, *, causal):
    torch.softmax = lambda x, dim: torch.nn.functional.softmax(x, dim=dim) * 1.0
    return attention(q, k, v, causal)


@implementation("warm_patches_method", stores="SP")
def warm_patches_method(q, k, v, *, causal):
    # inherited from torch._C.TensorBase, so absent from vars(torch.Tensor); the next causal
    # point's float64 reference would be unmasked
    torch.Tensor.masked_fill = lambda self, mask, value: self.clone()
    return attention(q, k, v, False)


@implementation("warm_threads", stores="SP")
def warm_threads(q, k, v, *, causal):
    if not LEAKED:
        LEAKED.append(threading.Thread(target=time.sleep, args=(600,), daemon=True))
        LEAKED[0].start()
    return attention(q, k, v, causal)
"""
NEIGHBOUR = ["torch_naive", "16"]
LEAK_MB = 64
# the records are compared here, not the times: the shortest timing windows (a worker's
# record must equal a process of its own's whatever the windows; both get these)
WINDOWS = ["--cpu-seconds", "0.02", "--stage-seconds", "0.01"]


@pytest.fixture(scope="module")
def plugin_env(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("plugin")
    (folder / "warm_faults.py").write_text(PLUGIN)
    return workflow_env() | {
        "PYTHONPATH": os.pathsep.join([str(folder), str(ROOT)]),
        "ATTNIO_PLUGINS": "warm_faults",
        "ATTNIO_INTERPRET": "1",
    }


@pytest.fixture(scope="module")
def warm(tmp_path_factory, plugin_env):
    """A session whose run is this test process, shared by the module's tests (a worker
    started once serves the next test: the tests assert relative to the worker they find);
    its workers end with the module."""
    run = session.begin(tmp_path_factory.mktemp("warm") / "results", leak_mb=LEAK_MB)
    os.environ.pop(session.RUN_VARIABLE, None)  # named in the tests' env only
    yield plugin_env | {session.RUN_VARIABLE: str(run.folder)}
    session.end(run)
    assert not worker_processes(run.folder), "a worker outlived its session"


def measure(
    env: dict,
    workdir: Path,
    impl: str,
    tokens: str = "16",
    limit: float = 120,
    device: str = "cpu",
    causal: bool = False,
) -> dict:
    out = workdir / f"{impl}-{tokens}-{time.monotonic_ns()}.json"
    args = ["--impl", impl, "--batch", "1", "--heads", "1", "--tokens", tokens, "--head-dim", "16"]
    args += ["--causal"] if causal else []
    args += ["--dtype", "float32", "--device", device, "--threads", "1", "--no-ncu", *WINDOWS]
    done = subprocess.run(
        [sys.executable, "-m", "kernels", "measure", *args, "--time-limit", str(limit), "--out", str(out)],
        env=env,
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return json.loads(out.read_text()) | {"_log": done.stdout + done.stderr}


def differences(a: dict, b: dict) -> list[str]:
    """Between two records, beyond what varies between runs (the job's log left out)."""
    return record_differences(
        {k: v for k, v in a.items() if k != "_log"}, {k: v for k, v in b.items() if k != "_log"}
    )


@pytest.fixture(scope="module")
def own_process(tmp_path_factory) -> dict:
    """The neighbour point measured by a process of its own (no session)."""
    workdir = tmp_path_factory.mktemp("own")
    env = workflow_env() | {"ATTNIO_INTERPRET": "1", "ATTNIO_WORKER": "0"}
    env.pop(session.RUN_VARIABLE, None)
    return measure(env, workdir, *NEIGHBOUR)


def test_the_client_imports_no_torch():
    code = (
        "import sys, kernels.warm.client, kernels.warm.keeper; "
        "print(sorted(m for m in ('torch', 'triton', 'numpy', 'kernels.cli') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"


def test_points_share_one_worker_and_their_records_say_so(warm, tmp_path, own_process):
    found = [measure(warm, tmp_path, impl, tokens) for impl, tokens in (NEIGHBOUR, ("sdpa", "16"), NEIGHBOUR)]
    processes = [r["process"] for r in found]
    assert {p["pid"] for p in processes} == {processes[0]["pid"]} != {os.getpid()}
    first = processes[0]["points_before"]  # 0 when this test runs first in its session
    assert [p["points_before"] for p in processes] == [first, first + 1, first + 2]
    assert all(p["warm"] for p in processes)
    assert own_process["process"]["warm"] is False and own_process["process"]["points_before"] == 0
    for record in (found[0], found[2]):
        assert differences(record, own_process) == [], "a warm worker's record differs from its own process's"
    # the command's own CPU time and peak memory in the worker end the job's log (Snakemake's
    # benchmark sees the thin client); a command run in its own process writes none
    for record in found:
        usage = usage_in(record["_log"])
        assert usage and usage["pid"] == processes[0]["pid"] and usage["cpu_s"] > 0, record["_log"][-2000:]
    assert usage_in(own_process["_log"]) is None


# (implementation, --time-limit, what its record's reason or its job's log says); each ends
# its worker
BREAKERS = [
    ("warm_segfault", 120, "SIGSEGV (a segmentation fault)"),
    ("warm_killed", 120, "SIGKILL (killed: the out-of-memory killer, or kill -9)"),
    ("warm_sleeps", 1, "stopped after the time limit of 1 s per measure job"),
    ("warm_holds_the_lock", 1, "had not stopped the command itself 3 s later, so it was killed"),
    ("warm_leaks", 120, "memory leaked: the process held"),
    ("warm_patches", 120, "replaced what later points reach (torch.softmax by warm_faults)"),
    ("warm_threads", 120, "thread(s) running"),
    ("warm_patches_method", 120, "reach (torch.Tensor.masked_fill by warm_faults)"),
]
# (a point that leaves a thread running is failed by the point's own guard too:
# kernels.measure.process_guard)
FAILS = ("warm_segfault", "warm_killed", "warm_sleeps", "warm_holds_the_lock", "warm_leaks", "warm_threads")
# a neighbour without stages: the chain below measures it nine times; causal, so that its
# float64 reference calls the tensor method warm_patches_method replaces
QUICK = ["sdpa", "16"]
QUICKLY = {"causal": True}


@pytest.fixture(scope="module")
def own_quick(tmp_path_factory) -> dict:
    """The quick neighbour measured by a process of its own: opted out (ATTNIO_WORKER=0)
    inside a live session, which then has started no worker."""
    workdir = tmp_path_factory.mktemp("own-quick")
    run = session.begin(workdir / "results", leak_mb=LEAK_MB)
    os.environ.pop(session.RUN_VARIABLE, None)  # named in the command's env only
    env = workflow_env() | {"ATTNIO_INTERPRET": "1", "ATTNIO_WORKER": "0"}
    try:
        record = measure(env | {session.RUN_VARIABLE: str(run.folder)}, workdir, *QUICK, **QUICKLY)
        used = sorted(p.name for p in run.folder.iterdir())  # a lane claimed leaves its lock
    finally:
        session.end(run)
    assert used == ["exits", session.RUN_FILE], f"an opted-out command used the session: {used}"
    return record


@pytest.mark.integration  # make integration (CI): eight fresh workers, about a minute
def test_a_point_that_breaks_its_worker_changes_no_other_point(warm, tmp_path, own_quick):
    """One after another, points that crash their worker (a segfault, a kill as the
    out-of-memory killer does it), hang past their limit (sleeping, or in C holding the
    interpreter lock), leak, replace a torch function or a method a tensor inherits (the
    neighbour's causal reference calls it) or leave a thread running, each between
    two ordinary points: the breaking point is measured by the worker of the point before it;
    one that crashed, hung or leaked is recorded as failed with the reason; the next point
    runs in a fresh worker, with the record a process of its own gives. Two such chains run
    side by side, each in a session of its own (its own workers), so that the fresh workers'
    start-up (torch's import) overlaps. Slow by nature: eight fresh workers, each importing
    torch and rehearsing before its first point (about 4 s of CPU each)."""
    other = session.begin(tmp_path / "results-b", leak_mb=LEAK_MB)
    os.environ.pop(session.RUN_VARIABLE, None)  # named in the chain's env only
    chains = [(warm, BREAKERS[0::2]), (warm | {session.RUN_VARIABLE: str(other.folder)}, BREAKERS[1::2])]
    try:
        with ThreadPoolExecutor(len(chains)) as pool:
            done = [
                pool.submit(break_one_after_another, env, Path(tmp_path, str(i)), own_quick, breakers)
                for i, (env, breakers) in enumerate(chains)
            ]
            for chain in done:
                chain.result()  # its failure, raised here
    finally:
        session.end(other)
    assert not worker_processes(other.folder), "a worker outlived its session"


def break_one_after_another(env: dict, workdir: Path, own: dict, breakers: list) -> None:
    workdir.mkdir()
    before = measure(env, workdir, *QUICK, **QUICKLY)
    assert differences(before, own) == []
    for impl, limit, said in breakers:
        broken = measure(env, workdir, impl, limit=limit)
        after = measure(env, workdir, *QUICK, **QUICKLY)
        if impl in FAILS:
            assert broken["status"] == "failed" and said in broken["reason"], f"{impl}: {broken['reason']}"
        else:
            assert broken["status"] == "ok" and said in broken["_log"], f"{impl}: {broken['_log'][-2000:]}"
        assert broken["process"]["pid"] == before["process"]["pid"], impl
        assert broken["process"]["points_before"] == before["process"]["points_before"] + 1, impl
        assert after["status"] == "ok" and differences(after, own) == [], impl
        assert after["process"]["pid"] != before["process"]["pid"], f"{impl}: the worker was not replaced"
        assert after["process"]["points_before"] == 0, impl
        before = after


def test_what_a_job_replaced_is_named_and_torchs_own_wrapping_is_not():
    """The check after each job, in this process: a tensor method inherited from
    torch._C.TensorBase, a torch function replaced under torch's own name (functools.wraps)
    or wrapped by torch's own wrapper around another function, and a function of our own
    reference are each named; torch wrapping its own function (as torch._dynamo's import
    wraps torch.manual_seed) is no change; everything is set back after."""
    import functools

    import torch

    import kernels.impl.reference as reference
    from kernels.warm import isolation

    before = isolation.reached_now()
    saved = {"softmax": torch.softmax, "log_softmax": torch.log_softmax, "seed": torch.manual_seed}
    definition = reference.reference_float64
    try:
        torch.Tensor.masked_fill = lambda self, mask, value: self.clone()
        torch.softmax = functools.wraps(saved["softmax"])(lambda x, dim: x)
        torch.log_softmax = torch._disable_dynamo(lambda x, dim: x)
        reference.reference_float64 = lambda *args, **kwargs: None
        torch.manual_seed = torch._disable_dynamo(saved["seed"])  # torch's own wrapping
        assert isolation.replaced_in(before) == [
            f"kernels.impl.reference.reference_float64 by {__name__}",
            f"torch.Tensor.masked_fill by {__name__}",
            f"torch.log_softmax by {__name__}",
            f"torch.softmax by code in {__file__}",  # functools.wraps gave it torch's module name
        ]
        assert before["torch"]["manual_seed"] is torch.manual_seed  # taken in as it stands
    finally:
        del torch.Tensor.masked_fill
        torch.softmax, torch.log_softmax = saved["softmax"], saved["log_softmax"]
        torch.manual_seed = saved["seed"]
        reference.reference_float64 = definition
    before["torch"]["manual_seed"] = saved["seed"]
    assert isolation.replaced_in(before) == []


def test_a_poisoned_process_is_set_back_for_the_next_point(warm, tmp_path, own_process):
    """Thread count, default dtype, seed, backend flags, signal handlers, environment and
    working folder changed by a point are set back: the next point runs in the same worker
    with the record of a process of its own."""
    poisoned = measure(warm, tmp_path, "warm_poisons")
    after = measure(warm, tmp_path, *NEIGHBOUR)
    assert after["process"]["pid"] == poisoned["process"]["pid"]
    assert after["process"]["points_before"] == poisoned["process"]["points_before"] + 1
    assert differences(after, own_process) == []
    assert after["threads"] == own_process["threads"] == 1


@pytest.mark.gpu
@pytest.mark.skipif(not os.path.exists("/dev/nvidiactl"), reason="needs a CUDA GPU")
def test_a_cuda_error_ends_the_worker_and_the_next_point_runs_in_a_fresh_one(warm, tmp_path):
    """A device-side assert leaves the CUDA context unusable: the point fails, naming the
    error, and the worker ends; the next point gets a fresh context."""
    env = warm | {"ATTNIO_INTERPRET": "0"}
    before = measure(env, tmp_path, *NEIGHBOUR, device="cuda")
    broken = measure(env, tmp_path, "warm_cuda_error", device="cuda")
    after = measure(env, tmp_path, *NEIGHBOUR, device="cuda")
    assert broken["status"] == "failed" and "CUDA" in (broken["reason"] or ""), broken["reason"]
    assert "the GPU context unusable" in broken["_log"]
    assert before["status"] == after["status"] == "ok"
    assert after["process"]["pid"] != before["process"]["pid"] and after["process"]["points_before"] == 0
    assert differences(before, after) == []


def test_without_a_session_or_opted_out_the_command_runs_in_its_own_process(own_process, own_quick):
    """The module's records of processes of their own: one without a session, one opted out
    (ATTNIO_WORKER=0) inside a live session."""
    assert own_process["process"]["warm"] is False and own_process["process"]["points_before"] == 0
    assert own_quick["process"]["warm"] is False and own_quick["process"]["points_before"] == 0


# --- whole runs: no worker outlives its run, however it ends ---------------------------------


@pytest.mark.integration  # make integration (CI): a workflow that waits out a 10 s limit
def test_a_validation_past_its_limit_is_recorded_and_the_study_goes_on(tmp_path, plugin_env):
    """A plugin whose call hangs (600 s) in validation: the validate job stops at
    limits.rule_seconds.validate, writing every case not run as timeout, and the plugin's
    points are recorded as skipped naming the limit; the neighbour's point is measured. Slow
    by nature: the validation runs to the schema's least limit (10 s)."""
    limits = {"limits": {"rule_seconds": {"validate": 10}}}
    # the two points' records (gathering them is tested on the shared study)
    targets = [
        f"results/points/{impl}/float16/B1-H1-T16-d16-full-na-normal.json"
        for impl in ("warm_sleeps", "torch_naive")
    ]
    seed_ceilings(tmp_path)  # the ceilings job is no part of this question (a minute of it)
    done = snakemake(
        tmp_path, *targets, *small_study(tmp_path, "warm_sleeps", **limits), environment=plugin_env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    said = (
        "stopped after the time limit of 10 s per validate job (--time-limit, limits.rule_seconds.validate)"
    )
    verdicts = json.loads((tmp_path / "results/validate/warm_sleeps_float16_na.json").read_text())
    assert {v["verdict"] for v in verdicts} == {"timeout"} and verdicts[0]["message"] == said
    records = [json.loads((tmp_path / target).read_text()) for target in targets]
    statuses = {(r["impl"], r["status"]) for r in records}
    assert statuses == {("warm_sleeps", "skipped"), ("torch_naive", "ok")}, statuses
    assert said in records[0]["reason"]


def small_study(tmp_path: Path, impl: str, **more) -> list[str]:
    """Snakemake's arguments for a study of the neighbour and one of this test's points
    (``more``: other settings)."""
    config = tmp_path / "small.yaml"
    sweep = {"impls": ["torch_naive", impl], "tokens": [16], "head_dim": [16], "causal": [False]}
    settings = {"build": {"targets": []}, "sweep": sweep, "plugins": ["warm_faults"]} | more
    config.write_text(yaml.safe_dump(settings))
    presets = [str(ROOT / "config" / "config.yaml"), str(ROOT / "config" / "presets" / "ci.yaml")]
    return ["--cores", "1", "--configfile", *presets, str(config)]


def run_folders(workdir: Path) -> list[Path]:
    return list((workdir / "results" / session.FOLDER).glob("run-*"))


ENDINGS = {"ctrl-c": signal.SIGINT, "sigterm": signal.SIGTERM, "kill -9": signal.SIGKILL}


@pytest.mark.integration  # make integration (CI): a workflow of its own per ending
@pytest.mark.parametrize("ending", ["segfault", *ENDINGS])  # a run that ends well: test_workflow
def test_no_worker_outlives_its_run(tmp_path, plugin_env, ending):
    """A run whose validation segfaults its worker (its verdicts then say so, every case an
    error, and the run goes on), one stopped with Ctrl-C or SIGTERM and one killed with -9
    while a worker is inside a validation that hangs: no keeper and no worker of it is left a
    few seconds later (of a run that ended well: test_workflow, on the shared study). Ctrl-C
    and SIGTERM end the run within seconds, and the hanging job leaves no file under its
    final name."""
    if ending == "segfault":
        target = "results/validate/warm_segfault_float16_na.json"
        done = snakemake(tmp_path, target, *small_study(tmp_path, "warm_segfault"), environment=plugin_env)
        assert done.returncode == 0, done.stderr[-3000:]
        verdicts = json.loads((tmp_path / target).read_text())
        assert all(v["verdict"] == "error" and "SIGSEGV" in v["message"] for v in verdicts), verdicts[:2]
    else:
        target = "results/validate/warm_sleeps_float16_na.json"  # its validation sleeps
        entered = tmp_path / "entered"  # written by the plugin as its call starts to sleep
        environment = plugin_env | {"WARM_FAULTS_ENTERED": str(entered)}
        run = start(tmp_path, target, *small_study(tmp_path, "warm_sleeps"), environment=environment)
        deadline = time.time() + 180  # a hang guard: about 5 s when idle
        while time.time() < deadline and not entered.exists():
            time.sleep(0.1)
        assert entered.exists(), "the validation never reached the sleeping call"
        signalled = time.monotonic()
        os.killpg(run.pid, ENDINGS[ending])
        run.wait(60)
        assert time.monotonic() - signalled < 20  # a hang guard: about 2 s when idle
        assert not (tmp_path / target).exists()
    folders = run_folders(tmp_path)
    assert folders, "the run started no worker"
    deadline = time.time() + 10  # a keeper notices its run's end within a fraction of a second
    while time.time() < deadline and any(worker_processes(f) for f in folders):
        time.sleep(0.2)
    assert not [pid for f in folders for pid in worker_processes(f)]
