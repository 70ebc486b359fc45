"""The inference shapes' kernels compile for both targets: the split-KV decode path's partial
and merge kernels, and the grouped-head forward of the fused path, as a GPU would build them."""

import pytest
from test_build import build

from kernels.build import targets
from kernels.planning.point import Point

SPLIT = Point("triton_split_kv", 1, 4, 100, 16, "float16", False, 16, 32, query_tokens=1, kv_heads=2)
GROUPED = Point("triton_flash", 1, 4, 100, 16, "float16", True, 16, 32, query_tokens=7, kv_heads=2)


@pytest.mark.preflight  # make preflight (CI): compiles for GPU targets
def test_inference_kernels_build_for_both_targets(tmp_path):
    result = build(tmp_path, SPLIT.name, GROUPED.name, candidates=False)
    for target in ("sm_80", "sm_90"):
        kernels = {r["kernel"] for r in result["variants"] if r["target"] == target}
        assert kernels == {"split_kv_partial_kernel", "split_kv_merge_kernel", "attention_fwd_kernel"}
    for record in result["variants"]:
        assert record["status"] == "ok", record["reason"]
        assert 1 <= record["blocks_per_sm"] <= targets.TARGETS[record["target"]].max_blocks_per_sm
    assert len(result["points"][SPLIT.name]) == 2 and len(result["points"][GROUPED.name]) == 1
