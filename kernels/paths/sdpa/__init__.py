"""PyTorch's scaled_dot_product_attention: "sdpa" lets PyTorch choose the backend, "sdpa_<name>"
forces one (a device without it records the point as skipped, naming it)."""

from kernels.catalog import EVERY_MASK, implementation
from kernels.spec import INFERENCE_DIMS, SDPA_IMPLEMENTATIONS


def _chosen(q, k, v, *, causal, mask=None, backend=None):
    """PyTorch's fused attention, the backend PyTorch's choice (or ``backend``)."""
    from kernels.paths.sdpa.forward import sdpa

    return sdpa(q, k, v, causal, backend=backend, mask=mask)


def _forcing(backend: str):
    def forced(q, k, v, *, causal, mask=None):
        """PyTorch's fused attention with one backend forced; none other stands in."""
        from kernels.paths.sdpa.forward import sdpa

        return sdpa(q, k, v, causal, backend=backend, mask=mask)

    return forced


def _unavailable(backend: str):
    def unavailable(point, device: str) -> str | None:
        """Why this device lacks the forced backend for the point's dtype, head dim, shape and mask."""
        from kernels.paths.sdpa.forward import point_unavailable

        return point_unavailable(backend, point, device)

    return unavailable


# every one takes fewer queries than keys and grouped K/V heads (PyTorch's enable_gqa and its
# lower-right causal bias), and every mask (beyond causal: a dense boolean attn_mask); a forced
# backend that refuses such a shape or mask says so (unavailable)
WORKING = "kernels.paths.sdpa.model:working_bytes"  # the dense mask, beyond causal
implementation(
    "sdpa",
    stores="none",
    options=("backend",),
    default=True,
    takes=INFERENCE_DIMS,
    masks=EVERY_MASK,
    working_model=WORKING,
)(_chosen)
for _name, _backend in SDPA_IMPLEMENTATIONS.items():
    if _backend is not None:
        # sdpa_math is PyTorch's composite of a product, a softmax and a product: it stores S and P
        # a CPU has neither the efficient (memory-efficient) nor the cuDNN backend
        cpu = _backend not in ("efficient", "cudnn")
        stores = "SP" if _backend == "math" else "none"
        implementation(
            _name,
            stores=stores,
            cpu=cpu,
            takes=INFERENCE_DIMS,
            masks=EVERY_MASK,
            working_model=WORKING,
            unavailable=_unavailable(_backend),
        )(_forcing(_backend))
