"""PyTorch's scaled_dot_product_attention: "sdpa" lets PyTorch choose the backend, "sdpa_<name>"
forces one (a device without it records the point as skipped, naming it)."""

from functools import partial

from kernels.catalog import implementation
from kernels.spec import SDPA_IMPLEMENTATIONS


def _sdpa(q, k, v, *, causal, backend=None, forced=None):
    """PyTorch's fused attention with a chosen or a forced backend."""
    from kernels.impl.sdpa import sdpa

    return sdpa(q, k, v, causal, backend=forced or backend)


for _name, _forced in SDPA_IMPLEMENTATIONS.items():
    # sdpa_math is PyTorch's composite of a product, a softmax and a product: it stores S and P
    _stores = "SP" if _forced == "math" else "none"
    implementation(
        _name,
        stores=_stores,
        options=("backend",) if _forced is None else (),
        default=_forced is None,
    )(partial(_sdpa, forced=_forced))
