"""Split-KV attention ("flash-decoding"): the keys cut into chunks attended in parallel, the
chunks' partial results merged exactly by their log-sum-exps; fills a GPU at decode."""

from kernels.catalog import EVERY_MASK, implementation
from kernels.spec import TRITON_TWIN


@implementation(
    "triton_split_kv",
    stores="none",
    triton=True,
    twin=TRITON_TWIN,
    options=("num_splits",),
    takes=("query_tokens", "kv_heads"),
    traffic_model="kernels.paths.triton_split_kv.model:as_issued",
    working_model="kernels.paths.triton_split_kv.model:working",
    launches="kernels.paths.triton_split_kv.forward:planned_launches",
    takes_out=True,
    default=False,
    no_backward="a decode kernel: inference only (it keeps nothing a backward would need)",
    split_keys=True,
    programs_model="kernels.paths.triton_split_kv.model:programs",
    masks=EVERY_MASK,  # each program reads its chunk's part of the queries' runs of keys
)
def triton_split_kv(q, k, v, *, causal, block_m, block_n, out=None, num_splits=None, mask=None):
    """Partials over chunks of the keys, then their merge; exact."""
    from kernels.paths.triton_split_kv.forward import triton_split_kv as run

    return run(q, k, v, causal, block_m, block_n, out=out, num_splits=num_splits, mask=mask)
