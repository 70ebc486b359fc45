"""The machine's memory levels: cache sizes read from OS trees of the test's own (several
layouts, sizes in K and M, a missing level or file, no sysfs at all), the copy footprints the
ceilings choose from them, the provenance and ceilings schemas with and without the new keys,
and one real ``python -m kernels ceilings --device cpu`` whose levels are present, positive
and ordered by footprint (a sanity check, not a speed claim)."""

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest
from workflow_run import env

from kernels.io.records import DamagedRecordError, read_leaf
from kernels.measure import caches, ceilings, provenance
from kernels.planning import cpu_caches as cpu_topology

K, M = 1 << 10, 1 << 20


@pytest.fixture(autouse=True)
def every_cpu(monkeypatch):
    """The trees here describe CPUs 0…7; the study's CPUs default to this process's affinity,
    which a container's cpuset may place elsewhere: here it is CPUs 0-63 wherever the suite
    runs (tests/test_cache_topology.py varies it)."""
    monkeypatch.setattr(cpu_topology, "affinity", lambda: list(range(64)))


def make_tree(root, cpus, *, skip=()):
    """A sysfs cpu folder: ``cpus`` maps a CPU to its caches (level, type, size, shared CPUs);
    ``skip`` names files ("index2/size") left out on every CPU."""
    for cpu, indices in cpus.items():
        for i, (level, kind, size, shared) in enumerate(indices):
            folder = root / f"cpu{cpu}" / "cache" / f"index{i}"
            folder.mkdir(parents=True)
            files = {"level": level, "type": kind, "size": size, "shared_cpu_list": shared}
            files |= {"coherency_line_size": 64}
            for name, value in files.items():
                if f"index{i}/{name}" not in skip:
                    (folder / name).write_text(f"{value}\n")
    (root / "cpufreq").mkdir(exist_ok=True)  # folders that are not CPUs are passed over
    return root


def x86(cpus=4, l2="1024K", l3="32768K", siblings=1):
    """L1d, L1i and L2 per core (``siblings`` CPUs to a core), L3 shared by every CPU."""
    layout = {}
    for cpu in range(cpus):
        core = ",".join(str(c) for c in range(cpu % (cpus // siblings), cpus, cpus // siblings))
        layout[cpu] = [
            (1, "Data", "32K", core),
            (1, "Instruction", "32K", core),
            (2, "Unified", l2, core),
            (3, "Unified", l3, f"0-{cpus - 1}"),
        ]
    return layout


def summary(found):
    return [(c["level"], c["bytes"], c["instances"], c["total_bytes"]) for c in found["levels"]]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("32K", 32 * K),
        ("1024K", M),
        ("32768K", 32 * M),
        ("1M", M),
        ("512", 512),
        ("2G", 2 << 30),
        ("48 KiB", 48 * K),
        ("", None),
        ("lots", None),
    ],
)
def test_a_cache_size_in_the_os_notation_is_read_in_bytes(text, expected):
    assert caches.parse_size(text) == expected


def test_cpu_lists_and_maps():
    assert caches.parse_cpu_list("0-3,8,10-11\n") == {0, 1, 2, 3, 8, 10, 11}
    assert caches.parse_cpu_map("00000000,0000000f") == {0, 1, 2, 3}
    assert caches.parse_cpu_list("x") is None and caches.parse_cpu_map("") is None


def test_typical_x86_each_level_once_per_instance_instruction_apart(tmp_path):
    found = caches.cpu_caches(make_tree(tmp_path, x86()))
    assert found["reason"] is None and found["source"] == str(tmp_path)
    assert summary(found) == [
        ("L1d", 32 * K, 4, 128 * K),
        ("L2", M, 4, 4 * M),
        ("L3", 32 * M, 1, 32 * M),  # shared by all four CPUs: once
    ]
    assert [c["level"] for c in found["instruction"]] == ["L1i"]
    assert [c["cpus_per_instance"] for c in found["levels"]] == [1, 1, 4]
    assert {c["line_bytes"] for c in found["levels"]} == {64}


def test_two_cpus_to_a_core_share_its_private_levels(tmp_path):
    found = caches.cpu_caches(make_tree(tmp_path, x86(cpus=8, siblings=2)))
    assert summary(found) == [("L1d", 32 * K, 4, 128 * K), ("L2", M, 4, 4 * M), ("L3", 32 * M, 1, 32 * M)]
    assert [c["cpus_per_instance"] for c in found["levels"]] == [2, 2, 8]


def test_a_machine_without_l3_sizes_in_m(tmp_path):
    layout = {
        cpu: [(1, "Data", "64K", cpu), (1, "Instruction", "64K", cpu), (2, "Unified", "1M", "0-3")]
        for cpu in range(4)
    }
    found = caches.cpu_caches(make_tree(tmp_path, layout))
    assert found["reason"] is None
    assert summary(found) == [("L1d", 64 * K, 4, 256 * K), ("L2", M, 1, M)]


def test_instances_of_different_sizes_count_each_their_own(tmp_path):
    """Two kinds of cores: a 2 MiB L2 on each of two, one 4 MiB L2 for a cluster of four."""
    layout = {cpu: [(2, "Unified", "2048K", cpu)] for cpu in (0, 1)}
    layout |= {cpu: [(2, "Unified", "4M", "2-5")] for cpu in range(2, 6)}
    found = caches.cpu_caches(make_tree(tmp_path, layout))
    assert summary(found) == [("L2", 2 * M, 3, 8 * M)]
    assert found["levels"][0]["cpus_per_instance"] == 4


def test_a_missing_level_is_simply_absent(tmp_path):
    layout = {cpu: [entry for entry in x86(cpus=2)[cpu] if entry[0] != 2] for cpu in (0, 1)}
    found = caches.cpu_caches(make_tree(tmp_path, layout))
    assert [c["level"] for c in found["levels"]] == ["L1d", "L3"] and found["reason"] is None


def test_a_missing_file_drops_that_cache_and_says_so(tmp_path):
    found = caches.cpu_caches(make_tree(tmp_path, x86(cpus=2), skip=("index2/size",)))
    assert [c["level"] for c in found["levels"]] == ["L1d", "L3"]
    assert found["reason"] == "index2 without size on 2 CPUs (cpu0…cpu1)"


def test_without_shared_cpu_list_the_map_stands_in_else_private(tmp_path):
    tree = make_tree(tmp_path, x86(cpus=2), skip=("index3/shared_cpu_list",))
    for cpu in (0, 1):
        (tree / f"cpu{cpu}" / "cache" / "index3" / "shared_cpu_map").write_text("00000003\n")
    found = caches.cpu_caches(tree)
    assert found["reason"] is None and summary(found)[-1] == ("L3", 32 * M, 1, 32 * M)
    for cpu in (0, 1):
        (tree / f"cpu{cpu}" / "cache" / "index3" / "shared_cpu_map").unlink()
    found = caches.cpu_caches(tree)
    assert summary(found)[-1] == ("L3", 32 * M, 2, 64 * M)  # taken as private, and said
    assert "index3 without shared_cpu_list (taken as private)" in found["reason"]


def test_an_offline_cpu_is_passed_over_a_cpu_without_caches_is_named(tmp_path):
    tree = make_tree(tmp_path, x86(cpus=2))
    (tree / "cpu2").mkdir()
    (tree / "cpu2" / "online").write_text("0\n")
    assert caches.cpu_caches(tree)["reason"] is None
    (tree / "cpu3").mkdir()
    found = caches.cpu_caches(tree)
    assert found["reason"] == "no cache/index* folder on cpu3" and len(found["levels"]) == 3


def test_no_sysfs_no_levels_and_the_reason(tmp_path):
    found = caches.cpu_caches(tmp_path / "absent")
    assert found["levels"] == [] and "cannot be read" in found["reason"]
    found = caches.cpu_caches(tmp_path)
    assert found["levels"] == [] and "no cpuN folder" in found["reason"]
    (tmp_path / "cpu0" / "cache").mkdir(parents=True)
    found = caches.cpu_caches(tmp_path)
    assert found["levels"] == [] and found["reason"] == "no cache/index* folder on cpu0"


def test_the_copy_footprints_follow_the_levels_and_the_threads(tmp_path):
    """Half of what a copy meets at each level: one instance of a private level below torch's
    grain (one thread), one per thread above it; DRAM four times what the threads meet of the
    last level (here its one instance)."""
    found = caches.cpu_caches(make_tree(tmp_path, x86(cpus=4)))
    planned = ceilings.level_footprints("cpu", found, threads=2)
    assert [(name, footprint) for name, _, footprint in planned] == [
        ("L1d", 16 * K),
        ("L2", M),
        ("L3", 16 * M),
        ("DRAM", 128 * M),
    ]
    one = ceilings.level_footprints("cpu", found, threads=1)
    assert [footprint for *_, footprint in one] == [16 * K, 512 * K, 16 * M, 128 * M]
    dram_only = ceilings.level_footprints("cpu", {"levels": []}, threads=2)
    assert [(name, footprint) for name, _, footprint in dram_only] == [("DRAM", 512 * M)]


def test_a_gpu_has_the_l2_torch_reports_and_its_footprints_follow(monkeypatch):
    import torch

    props = SimpleNamespace(L2_cache_size=50 * M, total_memory=140 << 30)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index=0: props)
    found = caches.caches("cuda")
    assert summary(found) == [("L2", 50 * M, 1, 50 * M)] and found["reason"] is None
    planned = ceilings.level_footprints("cuda", found, threads=1)
    assert planned == [("L2", 50 * M, 25 * M), ("DRAM", 140 << 30, 200 * M)]
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index=0: SimpleNamespace())
    assert "reports no L2 size" in caches.gpu_caches()["reason"]  # an older torch


def test_env_json_records_the_levels_and_old_files_stay_valid(tmp_path):
    found = provenance.collect({"sweep": {}}, "cpu", root=tmp_path)
    assert set(found["caches"]) == {"cpu", "cuda"}
    assert found["caches"]["cpu"] == caches.cpu_caches()
    assert found["caches"]["cpu"]["threads_asked"] is None  # the env job: every CPU of the affinity
    mine = provenance.collect({"sweep": {}}, "cpu", root=tmp_path, threads=1)["caches"]["cpu"]
    assert (mine["threads_asked"], mine["threads"], mine["thread_cpus"]) == (1, 1, "0") or not mine["levels"]
    path = tmp_path / "env.json"
    path.write_text(json.dumps(found))
    read_leaf(path, "env")
    path.write_text(json.dumps({k: v for k, v in found.items() if k != "caches"}))
    read_leaf(path, "env")
    broken = found | {"caches": {"cpu": {"levels": [{"level": "L2", "bytes": 0}], "reason": None}}}
    path.write_text(json.dumps(broken))
    with pytest.raises(DamagedRecordError):
        read_leaf(path, "env")


def test_ceilings_without_their_levels_are_damaged_and_absent_ones_valid(tmp_path):
    """A file without levels would make every stage DRAM-bound on the hand-off page: it is
    damaged (set aside and remade by the workflow, refused by --ceilings); a device's ceilings
    that were not measured (all null, with the reason) stay valid."""
    path = tmp_path / "ceilings.json"
    path.write_text(json.dumps({"device": "cpu", "copy_gbps": 10.0, "matmul_tflops": 0.05}))
    with pytest.raises(DamagedRecordError, match="levels"):
        read_leaf(path, "ceilings")
    path.write_text(json.dumps(ceilings.unavailable("cuda", "no CUDA device")))
    read_leaf(path, "ceilings")
    rates = {"device": "cpu", "copy_gbps": 1.0, "matmul_tflops": 1.0, "exp_per_s": 1e9, "call_us": 1.0}
    path.write_text(json.dumps(rates | {"levels": None}))
    with pytest.raises(DamagedRecordError, match="levels"):
        read_leaf(path, "ceilings")  # measured rates come with the levels they were measured at
    level = {"level": "L1d", "footprint_bytes": 16384, "copy_gbps": None}
    path.write_text(json.dumps(rates | {"levels": [level]}))
    with pytest.raises(DamagedRecordError, match="reason"):
        read_leaf(path, "ceilings")  # a level without a rate says why


QUICK = ["--cpu-seconds", "0.3", "--stage-seconds", "0.1"]


def test_a_real_ceilings_run_measures_every_level_in_order(tmp_path):
    out = tmp_path / "ceilings.json"
    done = subprocess.run(
        # the ci preset's timing: each rate sampled a tenth as long (kernels.spec.rate_seconds)
        [sys.executable, "-m", "kernels", "ceilings", "--device", "cpu", *QUICK, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env(),
    )
    assert done.returncode == 0, done.stderr
    found = read_leaf(out, "ceilings")
    described = caches.cpu_caches()["levels"]
    levels = found["levels"]
    assert [level["level"] for level in levels] == [c["level"] for c in described] + ["DRAM"]
    footprints = [level["footprint_bytes"] for level in levels]
    assert footprints == sorted(set(footprints))  # strictly growing
    for level, cache in zip(levels, described, strict=False):
        assert level["footprint_bytes"] <= level["bytes"] <= cache["total_bytes"]
    assert levels[-1]["footprint_bytes"] > described[-1]["total_bytes"] if described else True
    for level in levels:
        assert level["time_us"] > 0
        # a rate, or null with the reason: too little to time inside L1d, or (on a busy
        # machine, as the suite's) below DRAM's after three tries
        assert (level["copy_gbps"] or 0) > 0 or level["reason"], level
    assert found["copy_gbps"] == levels[-1]["copy_gbps"] > 0
    assert found["exp_per_s"] > 0 and found["matmul_tflops"] > 0 and found["call_us"] > 0


def test_a_cache_level_slower_than_dram_is_measured_again_then_refused():
    """A busy machine's rates: L2 found below DRAM is measured again (here it recovers on the
    second try), L3 stays below and is null with the reason; an in-place rate likewise."""
    planned = [("L2", 1 << 20, 1 << 19), ("L3", 32 << 20, 16 << 20), ("DRAM", None, 128 << 20)]
    first = [
        {"level": "L2", "copy_gbps": 5.0, "update_gbps": 90.0},
        {"level": "L3", "copy_gbps": 2.0, "update_gbps": 3.0},
        {"level": "DRAM", "copy_gbps": 15.0, "update_gbps": 20.0},
    ]
    tries = {"L2": iter([60.0]), "L3": iter([4.0, 6.0, 7.0, 8.0])}

    def again(device, name, capacity, footprint):
        rate = next(tries[name])
        return {"copy_gbps": rate, "update_gbps": rate}

    checked = ceilings.below_dram_checked("cpu", planned, first, measure_again=again)
    assert checked[0]["copy_gbps"] == 60.0 and checked[0]["update_gbps"] == 90.0
    assert checked[1]["copy_gbps"] is None and "below DRAM's 15 GB/s" in checked[1]["reason"]
    assert checked[1]["update_gbps"] is None
    assert checked[2] == first[2]
