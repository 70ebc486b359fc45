"""What of each cache level a study's threads meet, on machines whose caches come in several
instances: OS trees of the test's own for an 8-CCD EPYC, a two-socket Xeon, an ARM CPU
without L3, a hybrid CPU with two kinds of cores, and a container allowed 2 of 64 CPUs. The
sizes are exact (computed from the tree written); the copy footprints of the ceilings and the
planner's cache size follow the same instances."""

import pytest

from kernels.measure import caches, ceilings
from kernels.planning import cpu_caches as topology
from kernels.planning.device import largest_cache_bytes

K, M = 1 << 10, 1 << 20


def write_tree(root, instances):
    """A sysfs cpu folder from ``instances``: (level, type, size, CPUs sharing it), one entry per
    instance; each CPU lists the instances it is in, in the order given."""
    indices: dict[int, int] = {}
    for level, kind, size, shared in instances:
        shared = sorted(shared)
        text = topology.format_cpu_list(shared)
        for cpu in shared:
            index = indices.get(cpu, 0)
            indices[cpu] = index + 1
            folder = root / f"cpu{cpu}" / "cache" / f"index{index}"
            folder.mkdir(parents=True)
            files = {"level": level, "type": kind, "size": size, "shared_cpu_list": text}
            for name, value in (files | {"coherency_line_size": 64}).items():
                (folder / name).write_text(f"{value}\n")
    return root


def private(level, kind, size, cpus):
    return [(level, kind, size, [cpu]) for cpu in cpus]


def epyc(root):
    """64 CPUs, 8 CCDs of 8: L1d 32 KiB and L2 1 MiB per CPU, L3 32 MiB per CCD."""
    cpus = range(64)
    return write_tree(
        root,
        private(1, "Data", "32K", cpus)
        + private(1, "Instruction", "32K", cpus)
        + private(2, "Unified", "1024K", cpus)
        + [(3, "Unified", "32768K", range(8 * ccd, 8 * ccd + 8)) for ccd in range(8)],
    )


def xeon(root):
    """Two sockets of 28 CPUs: L1d 48 KiB and L2 2 MiB per CPU, L3 48 MiB per socket."""
    cpus = range(56)
    return write_tree(
        root,
        private(1, "Data", "48K", cpus)
        + private(2, "Unified", "2M", cpus)
        + [(3, "Unified", "48M", range(28 * s, 28 * s + 28)) for s in range(2)],
    )


def arm(root):
    """Eight CPUs in two clusters of four: L1d 64 KiB per CPU, L2 2 MiB per cluster, no L3."""
    cpus = range(8)
    return write_tree(
        root,
        private(1, "Data", "64K", cpus) + [(2, "Unified", "2M", range(4 * c, 4 * c + 4)) for c in range(2)],
    )


def hybrid(root):
    """Eight P-cores of two CPUs (0-15; L1d 48 KiB, L2 2 MiB per core), sixteen E-cores in four
    modules of four (16-31; L1d 32 KiB per core, L2 4 MiB per module), one 36 MiB L3."""
    p_cores = [(2 * c, 2 * c + 1) for c in range(8)]
    modules = [range(16 + 4 * m, 20 + 4 * m) for m in range(4)]
    return write_tree(
        root,
        [(1, "Data", "48K", core) for core in p_cores]
        + private(1, "Data", "32K", range(16, 32))
        + [(2, "Unified", "2M", core) for core in p_cores]
        + [(2, "Unified", "4M", module) for module in modules]
        + [(3, "Unified", "36M", range(32))],
    )


def study(found):
    """(level, study bytes, study instances, the instances' CPUs) for each data level."""
    return [
        (c["level"], c["study_bytes"], c["study_instances"], [u["cpus"] for u in c["study_used"]])
        for c in found["levels"]
    ]


def last(found):
    level = found["levels"][-1]
    return level["study_bytes"], level["study_instances"]


@pytest.mark.parametrize(
    ("cpus", "threads", "expected"),
    [
        (range(64), None, (256 * M, 8)),  # every CPU: every CCD
        (range(64), 2, (32 * M, 1)),  # two threads on CPUs 0 and 1: one CCD
        (range(64), 1, (32 * M, 1)),
        (range(64), 9, (64 * M, 2)),  # the ninth thread is on the second CCD
        (range(64), 500, (256 * M, 8)),  # capped at the affinity's 64
        ({2, 5}, None, (32 * M, 1)),  # a container on one CCD
        ({7, 8}, None, (64 * M, 2)),  # a container straddling two
        ({7, 8}, 1, (32 * M, 1)),
    ],
)
def test_epyc_the_l3_a_study_meets_is_the_ccds_its_threads_are_on(tmp_path, cpus, threads, expected):
    found = topology.cpu_caches(epyc(tmp_path), cpus=cpus, threads=threads)
    assert found["reason"] is None and last(found) == expected
    l3 = found["levels"][-1]
    assert (l3["bytes"], l3["instances"], l3["total_bytes"]) == (32 * M, 8, 256 * M)  # as before


def test_epyc_two_threads_every_level_and_what_was_used(tmp_path):
    found = topology.cpu_caches(epyc(tmp_path), cpus=range(64), threads=2)
    assert study(found) == [
        ("L1d", 64 * K, 2, ["0", "1"]),
        ("L2", 2 * M, 2, ["0", "1"]),
        ("L3", 32 * M, 1, ["0-7"]),
    ]
    assert (found["cpus"], found["threads"], found["threads_asked"], found["thread_cpus"]) == (
        "0-63",
        2,
        2,
        "0-1",
    )
    assert [c["study_bytes"] for c in found["instruction"]] == [64 * K]


def test_a_container_on_two_ccds_names_both_instances(tmp_path):
    found = topology.cpu_caches(epyc(tmp_path), cpus=[8, 7])
    assert (found["cpus"], found["threads"], found["threads_asked"]) == ("7-8", 2, None)
    assert study(found)[-1] == ("L3", 64 * M, 2, ["0-7", "8-15"])
    assert [u["first_thread"] for u in found["levels"][-1]["study_used"]] == [0, 1]


def test_two_socket_xeon(tmp_path):
    tree = xeon(tmp_path)
    assert last(topology.cpu_caches(tree, cpus=range(56))) == (96 * M, 2)
    assert last(topology.cpu_caches(tree, cpus=range(56), threads=28)) == (48 * M, 1)
    assert last(topology.cpu_caches(tree, cpus=range(56), threads=29)) == (96 * M, 2)
    found = topology.cpu_caches(tree, cpus=range(28, 56), threads=4)  # bound to the second socket
    assert study(found) == [
        ("L1d", 192 * K, 4, ["28", "29", "30", "31"]),
        ("L2", 8 * M, 4, ["28", "29", "30", "31"]),
    ] + [("L3", 48 * M, 1, ["28-55"])]


def test_arm_without_l3_the_l2_of_the_clusters_the_threads_are_on(tmp_path):
    tree = arm(tmp_path)
    found = topology.cpu_caches(tree, cpus=range(8), threads=4)
    assert [c["level"] for c in found["levels"]] == ["L1d", "L2"]
    assert study(found)[-1] == ("L2", 2 * M, 1, ["0-3"])
    assert last(topology.cpu_caches(tree, cpus=range(8))) == (4 * M, 2)
    assert study(topology.cpu_caches(tree, cpus=[3, 4]))[-1] == ("L2", 4 * M, 2, ["0-3", "4-7"])


def test_hybrid_each_instance_counts_its_own_size(tmp_path):
    tree = hybrid(tmp_path)
    everything = topology.cpu_caches(tree, cpus=range(32))
    l2 = everything["levels"][1]
    assert (l2["bytes"], l2["instances"], l2["total_bytes"], l2["study_bytes"]) == (2 * M, 12, 32 * M, 32 * M)
    assert study(topology.cpu_caches(tree, cpus=range(32), threads=2))[1:] == [
        ("L2", 2 * M, 1, ["0-1"]),  # CPUs 0 and 1: one P-core
        ("L3", 36 * M, 1, ["0-31"]),
    ]
    e_cores = topology.cpu_caches(tree, cpus=range(16, 32), threads=2)
    assert study(e_cores) == [
        ("L1d", 64 * K, 2, ["16", "17"]),
        ("L2", 4 * M, 1, ["16-19"]),
        ("L3", 36 * M, 1, ["0-31"]),
    ]
    mixed = topology.cpu_caches(tree, cpus=[0, 16])
    assert study(mixed) == [
        ("L1d", 80 * K, 2, ["0-1", "16"]),  # 48 KiB + 32 KiB
        ("L2", 6 * M, 2, ["0-1", "16-19"]),  # 2 MiB + 4 MiB
        ("L3", 36 * M, 1, ["0-31"]),
    ]


def test_cpus_the_tree_does_not_describe_count_the_smallest_instance_and_say_so(tmp_path):
    found = topology.cpu_caches(hybrid(tmp_path), cpus=[100, 101])
    assert study(found) == [
        ("L1d", 32 * K, 1, ["16"]),
        ("L2", 2 * M, 1, ["0-1"]),
        ("L3", 36 * M, 1, ["0-31"]),
    ]
    assert found["reason"] == (
        "no L1d, L2, L3 instance holds the study's thread CPUs 100-101 "
        "(the smallest instance counted as the study's)"
    )


def test_the_affinity_is_the_default_and_threads_must_be_positive(tmp_path, monkeypatch):
    tree = epyc(tmp_path)
    monkeypatch.setattr(topology, "affinity", lambda: [8, 9, 10])
    found = topology.cpu_caches(tree, threads=2)
    assert (found["cpus"], found["thread_cpus"]) == ("8-10", "8-9") and last(found) == (32 * M, 1)
    assert study(found)[-1][3] == ["8-15"]
    monkeypatch.setattr(topology, "affinity", lambda: None)  # the OS does not say: every CPU described
    assert topology.cpu_caches(tree)["cpus"] == "0-63"
    with pytest.raises(ValueError, match="threads=0"):
        topology.cpu_caches(tree, threads=0)
    with pytest.raises(ValueError, match="no CPU"):
        topology.cpu_caches(tree, cpus=[])


@pytest.mark.parametrize(
    ("cpus", "text"), [([0, 1, 2, 3, 8], "0-3,8"), ([5], "5"), ([3, 1], "1,3"), ([], "")]
)
def test_a_cpu_list_in_the_os_notation(cpus, text):
    assert topology.format_cpu_list(cpus) == text
    if cpus:
        assert topology.parse_cpu_list(text) == set(cpus)


def test_the_planner_and_the_stage_flush_follow_the_tree_named_in_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(topology.ROOT_VARIABLE, str(epyc(tmp_path)))
    monkeypatch.setattr(topology, "affinity", lambda: list(range(64)))
    assert largest_cache_bytes("cpu", threads=2) == 32 * M
    assert largest_cache_bytes("cpu", threads=9) == 64 * M
    assert largest_cache_bytes("cpu") == 256 * M  # every CPU of the affinity
    assert caches.last_level_bytes("cpu", threads=2) == 32 * M
    assert caches.caches("cpu", threads=1)["source"] == str(tmp_path)


def test_an_unreadable_root_in_the_environment_is_said(tmp_path, monkeypatch):
    monkeypatch.setenv(topology.ROOT_VARIABLE, str(tmp_path / "absent"))
    found = topology.cpu_caches()
    assert found["levels"] == [] and "cannot be read" in found["reason"]
    assert largest_cache_bytes("cpu", threads=2) is None


def footprints(found, threads):
    return [
        (name, capacity, footprint)
        for name, capacity, footprint in ceilings.level_footprints("cpu", found, threads)
    ]


def test_the_ceilings_copy_the_instances_the_jobs_threads_meet(tmp_path):
    """Half of what the copy's threads meet at each level, DRAM four times what the job's
    threads meet of the last (a copy below torch's grain runs on one thread: one L1d)."""
    tree = epyc(tmp_path)
    two = footprints(topology.cpu_caches(tree, cpus=range(64), threads=2), threads=2)
    assert two[:-1] == [("L1d", 32 * K, 16 * K), ("L2", 2 * M, M), ("L3", 32 * M, 16 * M)]
    assert two[-1][2] == 128 * M  # not four times the 256 MiB of all eight CCDs
    # read for every CPU of the affinity (env.json), copied on two threads: the same
    assert footprints(topology.cpu_caches(tree, cpus=range(64)), threads=2) == two
    nine = footprints(topology.cpu_caches(tree, cpus=range(64), threads=9), threads=9)
    assert nine[:-1] == [("L1d", 32 * K, 16 * K), ("L2", 9 * M, 9 * M // 2), ("L3", 64 * M, 32 * M)]
    assert nine[-1][2] == 256 * M
    mixed = footprints(topology.cpu_caches(hybrid(tmp_path / "hybrid"), cpus=[0, 16]), threads=2)
    assert mixed[:-1] == [("L1d", 48 * K, 24 * K), ("L2", 6 * M, 3 * M), ("L3", 36 * M, 18 * M)]
    assert mixed[-1][2] == 144 * M


def test_a_level_read_before_the_study_fields_counts_one_instance_per_thread():
    old = {"levels": [{"level": "L3", "bytes": 8 * M, "instances": 8, "total_bytes": 64 * M}]}
    planned = ceilings.level_footprints("cpu", old, threads=2)
    assert planned[0] == ("L3", 16 * M, 8 * M) and planned[1][2] == 256 * M  # DRAM: four totals
    assert caches.met_bytes(old["levels"][0]) == 64 * M
