"""Attention that stores S but never P, in three Triton launches: scores → stats → S·V."""

from kernels.catalog import implementation


@implementation(
    "triton_s_only",
    stores="S",
    triton=True,
    twin="triton_naive",
    traffic_model="kernels.study.s_only_cost:as_issued_s_only",
    launches="kernels.impl.triton.s_only:planned_launches",
    stages="kernels.impl.triton.s_only:triton_s_only_stages",
    takes_out=True,
    default=True,
    backward="kernels.impl.triton.s_only_backward",
    backward_traffic_model="kernels.study.s_only_backward_cost:as_issued_s_only_backward",
)
def triton_s_only(q, k, v, *, causal, block_m, block_n, out=None):
    """S is a real global tensor, read twice (the rows' softmax statistics, then S·V); P is
    made in registers and never stored."""
    from kernels.impl.triton.s_only import triton_s_only as run

    return run(q, k, v, causal, block_m, block_n, out=out)
