"""Standard attention in three PyTorch operations, S and P stored as whole T×T tensors."""

from kernels.catalog import implementation


@implementation("torch_naive", stores="SP", stages="kernels.impl.reference:torch_naive_stages", default=True)
def torch_naive(q, k, v, *, causal):
    """S = Q·Kᵀ/√d, P = softmax(S) (float32 inside), O = P·V; S and P in the input dtype."""
    from kernels.impl.reference import torch_naive as run

    return run(q, k, v, causal)
