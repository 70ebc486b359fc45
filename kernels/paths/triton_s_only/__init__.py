"""Attention that stores S but never P, in three Triton launches: scores → stats → S·V."""

from kernels.catalog import EVERY_MASK, implementation
from kernels.spec import TRITON_TWIN


@implementation(
    "triton_s_only",
    stores="S",
    triton=True,
    twin=TRITON_TWIN,
    takes=("query_tokens", "kv_heads"),
    traffic_model="kernels.paths.triton_s_only.model:as_issued_s_only",
    launches="kernels.paths.triton_s_only.forward:planned_launches",
    stages="kernels.paths.triton_s_only.forward:triton_s_only_stages",
    stage_model="kernels.paths.triton_s_only.model:stage_costs",
    takes_out=True,
    default=True,
    backward="kernels.paths.triton_s_only.backward",
    backward_traffic_model="kernels.paths.triton_s_only.backward_model:as_issued_s_only_backward",
    kept_model="kernels.paths.triton_s_only.model:kept",
    backward_flops_model="kernels.paths.triton_s_only.backward_model:flops_s_only_backward",
    backward_stage_model="kernels.paths.triton_s_only.backward_model:backward_stage_costs",
    masks=EVERY_MASK,  # S stored whole whatever the mask keeps; its backward visits the tiles kept
    backward_masks=EVERY_MASK,
)
def triton_s_only(q, k, v, *, causal, block_m, block_n, out=None, mask=None):
    """S is a real global tensor, read twice (the rows' softmax statistics, then S·V); P is
    made in registers and never stored."""
    from kernels.paths.triton_s_only.forward import triton_s_only as run

    return run(q, k, v, causal, block_m, block_n, out=out, mask=mask)
