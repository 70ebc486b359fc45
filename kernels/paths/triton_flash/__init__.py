"""Fused attention with the online softmax: no S or P in global memory. It takes fewer
queries than keys (causal aligned to the end) and grouped K/V heads, read by index, and every
mask (kernels.masks), visiting only the key tiles the mask keeps, forward and backward."""

from kernels.catalog import EVERY_MASK, implementation
from kernels.spec import TRITON_TWIN


@implementation(
    "triton_flash",
    stores="none",
    triton=True,
    twin=TRITON_TWIN,
    options=("num_warps", "num_stages"),
    takes=("query_tokens", "kv_heads"),
    traffic_model="kernels.paths.triton_flash.model:as_issued_fused",
    launches="kernels.paths.triton_flash.forward:planned_launches",
    launch_candidates="kernels.paths.triton_flash.model:launch_candidates",
    programs_model="kernels.paths.triton_flash.model:programs",
    takes_out=True,
    default=True,
    backward="kernels.paths.triton_flash.backward",
    backward_traffic_model="kernels.paths.triton_flash.backward_model:as_issued_flash_backward",
    kept_model="kernels.paths.triton_flash.model:kept",
    backward_flops_model="kernels.paths.triton_flash.backward_model:flops_flash_backward",
    backward_stage_model="kernels.paths.triton_flash.backward_model:backward_stage_costs",
    masks=EVERY_MASK,  # block sparse: the tiles a mask excludes are never loaded
    backward_masks=EVERY_MASK,
)
def triton_flash(q, k, v, *, causal, block_m, block_n, out=None, **options):
    """Row max and sum carried across key tiles; exact."""
    from kernels.paths.triton_flash.forward import triton_flash as run

    return run(q, k, v, causal, block_m, block_n, out=out, **options)
