"""Materialized attention in three Triton launches, scores → softmax → P·V, through global S and P."""

from kernels.catalog import EVERY_MASK, implementation


@implementation(
    "triton_naive",
    stores="SP",
    triton=True,
    options=("sp_dtype", "return_intermediates", "max_row_block"),
    takes=("query_tokens", "kv_heads"),
    traffic_model="kernels.paths.triton_naive.model:as_issued_naive",
    stage_model="kernels.paths.triton_naive.model:stage_costs",
    launches="kernels.paths.triton_naive.forward:planned_launches",
    stages="kernels.paths.triton_naive.forward:triton_naive_stages",
    takes_out=True,
    default=True,
    backward="kernels.paths.triton_naive.backward",
    backward_traffic_model="kernels.paths.triton_naive.backward_model:as_issued_naive_backward",
    kept_model="kernels.paths.triton_naive.model:kept",
    backward_flops_model="kernels.paths.triton_naive.backward_model:flops_naive_backward",
    backward_stage_model="kernels.paths.triton_naive.backward_model:backward_stage_costs",
    backward_stages="kernels.paths.triton_naive.backward:backward_stages",
    masks=EVERY_MASK,  # S and P stored whole whatever the mask keeps; its backward visits the tiles kept
    backward_masks=EVERY_MASK,
)
def triton_naive(q, k, v, *, causal, block_m, block_n, out=None, **options):
    """S and P are real global tensors, written by one kernel and read back by the next."""
    from kernels.paths.triton_naive.forward import triton_naive as run

    return run(q, k, v, causal, block_m, block_n, out=out, **options)
