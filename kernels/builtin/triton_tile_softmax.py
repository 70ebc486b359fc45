"""The fused loop with a softmax local to each tile: wrong wherever a row spans two tiles."""

from kernels.catalog import implementation


@implementation(
    "triton_tile_softmax",
    stores="none",
    triton=True,
    twin="triton_naive",
    traffic_model="kernels.study.cost:as_issued_fused",
    launches="kernels.impl.triton.tile_softmax:planned_launches",
    takes_out=True,
    default=True,
    no_backward=(
        "its forward is wrong on purpose (each key tile normalized by its own maximum and sum), so "
        "there is no gradient of attention to give"
    ),
)
def triton_tile_softmax(q, k, v, *, causal, block_m, block_n, out=None):
    """Each tile normalized by its own max and sum: no statistics carried across tiles."""
    from kernels.impl.triton.tile_softmax import triton_tile_softmax as run

    return run(q, k, v, causal, block_m, block_n, out=out)
