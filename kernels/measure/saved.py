"""What a path keeps alive from its forward to its backward, measured: every tensor autograd
saves while the forward runs (``torch.autograd.graph.saved_tensors_hooks``), counted once per
storage (a view of a saved tensor, or of an input, adds nothing), in bytes.

This is the memory training pays per attention layer between the forward and the backward:
for torch_naive the probabilities P (and, for a 2-byte dtype, their float32 form the softmax
saves), for triton_flash only O and the log-sum-exp (kernels.models.backward_cost models it).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from kernels.impl.checks import dtype_name


def saved_during(run: Callable[[], torch.Tensor]) -> tuple[torch.Tensor, list[dict]]:
    """``run()``'s output and each distinct storage autograd saved for its backward: shape and
    dtype of the first tensor seen on it, and the storage's bytes."""
    found: dict[int, dict] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        found.setdefault(
            storage.data_ptr(),
            {"shape": list(t.shape), "dtype": dtype_name(t.dtype), "bytes": storage.nbytes()},
        )
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = run()
    return out, list(found.values())


def saved_bytes(saved: list[dict]) -> int:
    return sum(entry["bytes"] for entry in saved)
