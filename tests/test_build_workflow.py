"""The build stage inside the workflow: a block shape too large for both targets is built,
recorded as failed with the compiler's reason and the limit it passed, and its points are
skipped naming the target — the run goes on."""

import json

import pandas as pd
import pytest
import yaml
from workflow_run import ROOT, seed_ceilings, snakemake

from kernels.build.targets import TARGETS

DEFAULT = str(ROOT / "config" / "config.yaml")
# the materialized path's P·V kernel with 16 × 256 blocks at d = 256 asks for more shared
# memory than any target has (a 256 × 256 V tile per pipeline stage: about 272 KiB; the fused
# kernel's default launch is chosen to fit). A 256 × 256 block fails the same way, and takes
# its compiler three times as long
POINT = "results/points/triton_naive/float16/B1-H1-T16-d256-full-bm16-bn256-normal.json"
# ... and a point beside it that needs no build: measured, the run went on (blocks that fit
# are built and measured in the shared study)
BESIDE = "results/points/torch_naive/float16/B1-H1-T16-d256-full-na-normal.json"


@pytest.mark.integration  # make integration (CI): a workflow compiling for both targets, 20-24 s
def test_too_large_block_is_recorded_and_skipped(tmp_path):
    """Slow by nature: a real build for both targets (about 6 s of compiling) and an
    interpreted validation of the blocks that do not fit (the validation does not ask the
    build)."""
    config = {
        "device": "cpu",
        "build": {"candidates": False, "targets": ["sm_80", "sm_90"]},  # the launch itself is the question
        "sweep": {
            "impls": ["triton_naive", "torch_naive"],
            "tokens": [16],
            "head_dim": [256],
            "dtype": ["float16"],
            "causal": [False],
            "blocks": [[16, 256]],
        },
    }
    (tmp_path / "big.yaml").write_text(yaml.safe_dump(config))
    seed_ceilings(tmp_path)  # the ceilings job is no part of this question (a minute of it)
    # the two points' records and the build table (gathering and collecting them into the
    # tables is tested on the shared study)
    done = snakemake(
        tmp_path,
        POINT,
        BESIDE,
        "results/build.csv",
        "--cores",
        "2",
        "--configfile",
        DEFAULT,
        str(tmp_path / "big.yaml"),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    builds = pd.read_csv(tmp_path / "results" / "build.csv")
    big = builds[(builds["block_n"] == 256) & (builds["kernel"] == "pv_kernel")]
    assert sorted(big["target"]) == ["sm_80", "sm_90"]
    for _, row in big.iterrows():
        limit = TARGETS[row["target"]].max_shared_per_block
        assert row["status"] == "failed" and "out of resource: shared memory" in row["reason"]
        assert row["shared_bytes"] > limit and f"{limit:,}" in row["reason"], row["reason"]
    record = json.loads((tmp_path / POINT).read_text())
    assert record["status"] == "skipped"
    assert "does not build for sm_80" in record["reason"] and "shared memory" in record["reason"]
    beside = json.loads((tmp_path / BESIDE).read_text())
    assert beside["status"] == "ok", beside.get("reason")
    kept = tmp_path / "results" / "build" / "triton_naive_float16_bm16-bn256" / "d256" / "sm_90"
    assert any(kept.glob("*.cubin"))  # it compiled; only the launch check failed
