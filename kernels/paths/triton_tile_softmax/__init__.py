"""The fused loop with a softmax local to each tile: wrong wherever a row spans two tiles."""

from kernels.catalog import EVERY_MASK, implementation
from kernels.spec import TRITON_TWIN


@implementation(
    "triton_tile_softmax",
    stores="none",
    triton=True,
    twin=TRITON_TWIN,
    takes=("query_tokens", "kv_heads"),
    traffic_model="kernels.paths.triton_flash.model:as_issued_fused",  # the fused loop's traffic
    launches="kernels.paths.triton_tile_softmax.forward:planned_launches",
    takes_out=True,
    default=True,
    tile_local=True,
    no_backward=(
        "its forward is wrong on purpose (each key tile normalized by its own maximum and sum), so "
        "there is no gradient of attention to give"
    ),
    masks=EVERY_MASK,  # the fused loop's block-sparse walk, still wrong on purpose
)
def triton_tile_softmax(q, k, v, *, causal, block_m, block_n, out=None, mask=None):
    """Each tile normalized by its own max and sum: no statistics carried across tiles."""
    from kernels.paths.triton_tile_softmax.forward import triton_tile_softmax as run

    return run(q, k, v, causal, block_m, block_n, out=out, mask=mask)
