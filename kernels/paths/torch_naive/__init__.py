"""Standard attention in three PyTorch operations, S and P stored as whole (query_tokens × T)
tensors; grouped K/V heads by stacking each K/V head's query heads as one product's rows."""

from kernels.catalog import EVERY_MASK, implementation
from kernels.spec import INFERENCE_DIMS


@implementation(
    "torch_naive",
    stores="SP",
    raw_s=True,
    softmax_dtype="float32",
    working_model="kernels.paths.torch_naive.model:working_bytes",
    stages="kernels.paths.torch_naive.forward:torch_naive_stages",
    stage_model="kernels.paths.torch_naive.model:stage_costs",
    default=True,
    takes=INFERENCE_DIMS,
    kept_model="kernels.paths.torch_naive.model:kept",
    backward_flops_model="kernels.paths.torch_naive.model:backward_flops",
    backward_stage_model="kernels.paths.torch_naive.model:backward_stage_costs",
    backward_stages="kernels.paths.torch_naive.backward_stages:torch_naive_backward_stages",
    masks=EVERY_MASK,
)
def torch_naive(q, k, v, *, causal, mask=None):
    """S = Q·Kᵀ/√d, P = softmax(S) (float32 inside), O = P·V; S and P in the input dtype; a
    mask beyond causal as a dense boolean tensor, as PyTorch code builds one."""
    from kernels.paths.torch_naive.forward import torch_naive as run

    return run(q, k, v, causal, mask)
