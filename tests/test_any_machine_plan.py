"""The default study planned as on machines we have never seen: caches of 4 to 256 MiB given
as ``cache_bytes``, and CPU layouts read from OS trees of our own through ATTNIO_SYSFS_CPU (an
8-CCD EPYC, a two-socket Xeon, an ARM CPU without L3, a hybrid CPU), on two cores and on one.
The hand-off sweep must follow the cache the study's threads meet (one CCD's L3, not the
socket's sum), and every plan must hold the same jobs but the T values. Three plans are
Snakemake's dry runs (32 MiB, the 4 MiB whose hand-off shares T with the timing grid, and
the EPYC's tree on one core: the configuration and the OS tree reach the workflow's plan);
the others are planned in-process as workflow/rules/common.smk plans (3–4 s a dry run)."""

from __future__ import annotations

import functools
import re

import pytest
from modelled_study import planned_sweep
from test_cache_topology import arm, epyc, hybrid, xeon
from workflow_run import ROOT, env, snakemake

from kernels.planning import cpu_caches as topology
from kernels.planning import device as planning_device
from kernels.planning import sweep as planning_sweep
from kernels.planning.sweep import masks_of, tokens_across_cache

M = 1 << 20
DEFAULT = str(ROOT / "config" / "config.yaml")
HANDOFF = re.compile(r"results/points/torch_naive/float32/B1-H1-T(\d+)-d64-full-na-normal\.json")


def _thread_cpus(cores: int) -> list[int]:
    """The CPUs a study on ``cores`` threads runs on here: the first of this process's."""
    return (topology.affinity() or [0, 1])[:cores]


def _met(layout: str, cores: int) -> int:
    """The last level the study's threads meet on each tree, from its layout (not the code)."""
    cpus = _thread_cpus(cores)
    if layout == "epyc":  # 32 MiB per CCD of 8 CPUs
        return 32 * M * len({cpu // 8 for cpu in cpus})
    if layout == "xeon":  # 48 MiB per socket of 28 CPUs
        return 48 * M * len({cpu // 28 for cpu in cpus})
    if layout == "arm":  # no L3: 2 MiB of L2 per cluster of 4
        return 2 * M * len({cpu // 4 for cpu in cpus})
    return 36 * M  # hybrid: one L3 for all


def _handoff_lengths(cache_bytes: int) -> set[int]:
    return set(tokens_across_cache({"from": 0.0625, "to": 16, "step": 2**0.5}, cache_bytes, "float32"))


def _fixed_lengths() -> set[int]:
    """The T of the default study's other float32 torch_naive grids without the mask (the
    timing grid), which the point names of the hand-off share."""
    return {
        t
        for grid in planned_sweep()
        if not grid.get("tokens_across_cache")
        and "torch_naive" in grid["impls"]
        and "float32" in grid["dtype"]
        and any(mask in (False, "full") for mask in masks_of(grid))
        for t in grid["tokens"]
    }


def _swept_as_planned(lengths: set[int], cache_bytes: int) -> None:
    """The plan's hand-off points are those of ``cache_bytes``, beside the fixed grid's."""
    assert lengths - _fixed_lengths() == _handoff_lengths(cache_bytes) - _fixed_lengths()


def _plan(tmp_path, *args: str, environment: dict | None = None) -> tuple[dict[str, int], set[int]]:
    done = snakemake(tmp_path, "-n", *args, "--configfile", DEFAULT, environment=environment)
    assert done.returncode == 0, done.stderr[-3000:]
    jobs = {rule: int(n) for rule, n in re.findall(r"^(\w+)\s+(\d+)$", done.stdout, re.M)}
    return jobs, {int(t) for t in HANDOFF.findall(done.stdout)}


@functools.cache
def _planned_in_process(cache_bytes: int) -> tuple[int, set[int]]:
    """The default sweep's measure points and hand-off T as common.smk plans them for
    ``cache_bytes`` (the planner, without Snakemake's dry run)."""
    _, _, points = planning_sweep.planned(planned_sweep(), cache_bytes)
    names = [f"results/points/{p.name}.json" for p in points]
    return len(points), {int(t) for name in names for t in HANDOFF.findall(name)}


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, int]:
    """The jobs of the plan at this project's 32 MiB, to hold every other plan against; the
    in-process planner must plan what the workflow plans there, point for point."""
    jobs, lengths = _plan(
        tmp_path_factory.mktemp("plan32"), "--cores", "2", "--config", f"cache_bytes={32 * M}"
    )
    _swept_as_planned(lengths, 32 * M)
    assert _planned_in_process(32 * M) == (jobs["measure"], lengths)
    return jobs


def _own(cache_bytes: int) -> int:
    """The hand-off T of ``cache_bytes`` that no other grid sweeps (each one point more)."""
    return len(_handoff_lengths(cache_bytes) - _fixed_lengths())


def _same_jobs(jobs: dict[str, int], reference: dict[str, int], cache_bytes: int) -> None:
    """Every rule planned as often as at 32 MiB, but measure: one job fewer or more for each
    hand-off T of its own (a T that another grid sweeps too is one point)."""
    fixed = {rule: n for rule, n in reference.items() if rule not in ("measure", "total")}
    assert {rule: jobs.get(rule) for rule in fixed} == fixed
    assert jobs["measure"] == reference["measure"] - _own(32 * M) + _own(cache_bytes)


def _same_points(measured: int, cache_bytes: int) -> None:
    """The in-process plan's points: the 32 MiB plan's, but one fewer or more for each
    hand-off T of its own."""
    assert measured == _planned_in_process(32 * M)[0] - _own(32 * M) + _own(cache_bytes)


# 4 MiB: two hand-off T that the timing grid sweeps too; 48: none; 256: one, and the longest T
# (8 and 96 MiB added only another count of shared T; the trees below reach 2, 32, 36 and 48)
@pytest.mark.parametrize("mib", [4, 48, 256])
def test_the_handoff_sweep_follows_the_configured_cache(tmp_path, reference, mib):
    if mib == 4:  # through Snakemake: config cache_bytes reaches the workflow's plan
        jobs, lengths = _plan(tmp_path, "--cores", "2", "--config", f"cache_bytes={mib * M}")
        _same_jobs(jobs, reference, mib * M)
    else:
        measured, lengths = _planned_in_process(mib * M)
        _same_points(measured, mib * M)
    _swept_as_planned(lengths, mib * M)


# Two threads on every tree (the first two CPUs share each tree's last level: counted once);
# one thread on the EPYC's (through Snakemake: its --cores and the OS tree reach the plan).
# One thread on the others met the same cache instance as two.
@pytest.mark.parametrize(
    ("layout", "cores"), [("epyc", 1), ("epyc", 2), ("xeon", 2), ("arm", 2), ("hybrid", 2)]
)
def test_the_handoff_sweep_follows_the_cache_the_threads_meet(
    tmp_path, reference, layout, cores, monkeypatch
):
    tree = {"epyc": epyc, "xeon": xeon, "arm": arm, "hybrid": hybrid}[layout](tmp_path / "cpu")
    met = _met(layout, cores)
    if (layout, cores) == ("epyc", 1):
        environment = env() | {topology.ROOT_VARIABLE: str(tree)}
        (tmp_path / "study").mkdir()
        jobs, lengths = _plan(tmp_path / "study", "--cores", str(cores), environment=environment)
        _same_jobs(jobs, reference, met)
    else:
        monkeypatch.setenv(topology.ROOT_VARIABLE, str(tree))
        found = planning_device.largest_cache_bytes("cpu", threads=cores)
        assert found == met, f"{layout} on {cores} threads: {found} bytes, not {met}"
        measured, lengths = _planned_in_process(found)
        _same_points(measured, met)
    _swept_as_planned(lengths, met)
    if layout == "epyc":  # the sum over the eight CCDs would sweep √8 times further
        assert max(lengths) < max(_handoff_lengths(8 * 32 * M))
