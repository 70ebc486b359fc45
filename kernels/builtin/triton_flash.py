"""Fused attention with the online softmax: no S or P in global memory."""

from kernels.catalog import implementation


@implementation(
    "triton_flash",
    stores="none",
    triton=True,
    twin="triton_naive",
    options=("num_warps", "num_stages"),
    traffic_model="kernels.study.cost:as_issued_fused",
    launches="kernels.impl.triton.flash:planned_launches",
    takes_out=True,
    default=True,
    backward="kernels.impl.triton.flash_backward",
    backward_traffic_model="kernels.study.flash_backward_cost:as_issued_flash_backward",
)
def triton_flash(q, k, v, *, causal, block_m, block_n, out=None, **options):
    """Row max and sum carried across key tiles; exact."""
    from kernels.impl.triton.flash import triton_flash as run

    return run(q, k, v, causal, block_m, block_n, out=out, **options)
