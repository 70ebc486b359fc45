"""The build stage inside the workflow: a block shape too large for the targets is built,
recorded as failed with the compiler's reason, and its points are skipped — the run goes on."""

import json

import pandas as pd
import yaml
from workflow_run import ROOT, seed_ceilings, snakemake

DEFAULT = str(ROOT / "config" / "config.yaml")
# the materialized path's P·V kernel with 16 × 256 blocks at d = 256 asks for more shared
# memory than any target has (a 256 × 256 V tile per pipeline stage: about 272 KiB; the fused
# kernel's default launch is chosen to fit). A 256 × 256 block fails the same way, and takes
# its compiler three times as long
POINT = "results/points/triton_naive/float16/B1-H1-T16-d256-full-bm16-bn256-normal.json"
# ... and the same point with blocks that fit: measured, the run went on (32 × 32: its
# interpreted validation takes half the time of 16 × 16's)
FITS = "results/points/triton_naive/float16/B1-H1-T16-d256-full-bm32-bn32-normal.json"


def test_too_large_block_is_recorded_and_skipped(tmp_path):
    """Slow by nature: two real builds for two targets (about 14 s of compiling) and an
    interpreted validation of the blocks that fit."""
    config = {
        "device": "cpu",
        "build": {"candidates": False},  # the launches themselves are the question here
        "sweep": {
            "impls": ["triton_naive"],
            "tokens": [16],
            "head_dim": [256],
            "dtype": ["float16"],
            "causal": [False],
            "blocks": [[16, 256], [32, 32]],
        },
    }
    (tmp_path / "big.yaml").write_text(yaml.safe_dump(config))
    seed_ceilings(tmp_path)  # the ceilings job is no part of this question (a minute of it)
    # the two points' records and the build table (gathering and collecting them into the
    # tables is tested on the shared study)
    done = snakemake(
        tmp_path,
        POINT,
        FITS,
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
    assert (big["status"] == "failed").all()
    assert big["reason"].str.contains("out of resource: shared memory").all()
    fitting = builds[builds["block_m"] == 32]
    assert len(fitting) and (fitting["status"] == "ok").all()
    record = json.loads((tmp_path / POINT).read_text())
    assert record["status"] == "skipped"
    assert "does not build for sm_80" in record["reason"]
    fits = json.loads((tmp_path / FITS).read_text())
    assert fits["status"] == "ok" and fits["block_m"] == 32, fits.get("reason")
    kept = tmp_path / "results" / "build" / "triton_naive_float16_bm16-bn256" / "T16-d256" / "sm_90"
    assert any(kept.glob("*.cubin"))  # it compiled; only the launch check failed
