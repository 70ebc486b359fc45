"""Materialized attention in three Triton launches, scores → softmax → P·V, through global S and P."""

from kernels.catalog import implementation


@implementation(
    "triton_naive",
    stores="SP",
    triton=True,
    options=("sp_dtype", "return_intermediates", "max_row_block"),
    traffic_model="kernels.study.cost:as_issued_naive",
    launches="kernels.impl.triton.naive:planned_launches",
    stages="kernels.impl.triton.naive:triton_naive_stages",
    takes_out=True,
    default=True,
    backward="kernels.impl.triton.naive_backward",
    backward_traffic_model="kernels.study.naive_backward_cost:as_issued_naive_backward",
)
def triton_naive(q, k, v, *, causal, block_m, block_n, out=None, **options):
    """S and P are real global tensors, written by one kernel and read back by the next."""
    from kernels.impl.triton.naive import triton_naive as run

    return run(q, k, v, causal, block_m, block_n, out=out, **options)
