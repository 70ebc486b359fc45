"""FlexAttention (``torch.nn.attention.flex_attention``), PyTorch's compiled block-sparse
attention, as a peer: the point's mask as a BlockMask, one kernel compiled per shape and mask
(C++ through Inductor on a CPU, Triton on a GPU), grouped heads by ``enable_gqa``. Not our
kernel: its bytes are modelled as its algorithm moves them, never counted in the interpreter."""

from kernels.catalog import EVERY_MASK, implementation
from kernels.spec import INFERENCE_DIMS

MODEL = "kernels.paths.flex.model"


@implementation(
    "flex",
    stores="none",
    takes=INFERENCE_DIMS,
    masks=EVERY_MASK,
    compiles=True,
    traffic_model=f"{MODEL}:as_issued",
    working_model=f"{MODEL}:working_bytes",
    flops_model=f"{MODEL}:flops",
    unavailable="kernels.paths.flex.forward:unavailable",
)
def flex(q, k, v, *, causal, mask=None):
    """flex_attention compiled, under the mask's BlockMask; its backward is PyTorch's autograd
    through the compiled call (a GPU's: on a CPU torch refuses it, and so does this path)."""
    from kernels.paths.flex.forward import flex as run

    return run(q, k, v, causal, mask)
