"""A validation case's verdict, for either direction: the pass rule's absolute tolerance,
the verdict each case is expected to give (an overflowing stored S gives non-finite outputs;
the tile-local softmax fails past one key tile) and the result a case writes. Below both
kernels.measure.validate and kernels.measure.validate_backward, which import neither each other."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch

from kernels import catalog
from kernels.impl.checks import DTYPES
from kernels.spec import DEFAULT_TWIN, SDPA_IMPLEMENTATIONS

RTOL_ABS = 1e-5


@dataclass
class Result:
    impl: str
    dtype: str
    causal: bool
    batch: int
    heads: int
    tokens: int
    head_dim: int
    layout: str
    inputs: str
    block_m: int | None
    block_n: int | None
    seed: int
    error: float
    bound: float
    written: bool
    # pass | fail | error | nonfinite | unavailable (a forced SDPA backend, or the device:
    # cuda without a GPU) | unfit (its launch cannot run on this GPU: the preflight says why)
    # | timeout (the validate job's time limit passed before the case ran)
    # | refused (backward: the path has none, and said why)
    verdict: str
    expected: str  # pass | fail | nonfinite | refused
    seconds: float
    message: str = ""
    direction: str = "forward"  # forward | backward (kernels.measure.validate_backward)
    gradient: str = "normal"  # the backward's upstream gradient (kernels.spec.GRADIENTS)
    saved_bytes: int | None = None  # backward: bytes autograd kept from the forward, measured
    saved_model_bytes: int | None = None  # and as kernels.models.backward_cost counts them
    # the inference shape, as a Point holds it: None for the square problem (Tq = T, Hkv = H)
    query_tokens: int | None = None  # queries against the tokens keys (the last ones)
    kv_heads: int | None = None  # K/V heads, each shared by heads / kv_heads query heads

    def __post_init__(self) -> None:
        """Tq = T and Hkv = H are the square problem, held as None (as kernels.planning.point's
        Point holds them), so that a case has one spelling."""
        if self.query_tokens == self.tokens:
            self.query_tokens = None
        if self.kv_heads == self.heads:
            self.kv_heads = None

    @property
    def queries(self) -> int:
        """Query rows per sequence: query_tokens, or T."""
        return self.query_tokens or self.tokens

    @property
    def kv(self) -> int:
        """K/V heads: kv_heads, or H."""
        return self.kv_heads or self.heads

    @property
    def as_expected(self) -> bool:
        """A backend or a device this machine lacks, or a launch the GPU cannot hold, is not
        a wrong answer: the case is left out, naming why."""
        return self.verdict in (self.expected, "unavailable", "unfit")

    def to_dict(self) -> dict:
        """The row as written: every row says its query_tokens and kv_heads (T and H for the
        square problem; validation.schema.json's are integers)."""
        shape = {"query_tokens": self.queries, "kv_heads": self.kv}
        return asdict(self) | shape | {"as_expected": self.as_expected}


def stored_score(impl: str, product: float, head_dim: int) -> float | None:
    """The largest value an implementation writes into a stored S, from max |q·k|: a path
    that stores the raw product and scales it in place (its registration's ``raw_s``) the
    product, the others that store S in the input dtype at least the scaled score; None
    where no S is stored in the input dtype (fused, float32 or float64 S, PyTorch's SDPA,
    whose math backend may widen)."""
    entry = catalog.get(impl)
    if entry.stores == "none" or entry.sp_dtype is not None or impl in SDPA_IMPLEMENTATIONS:
        return None
    return product if entry.raw_s else product / math.sqrt(head_dim)


def wrong_on_purpose(impl: str, tokens: int, block_n: int | None) -> bool:
    """The tile-local softmax is wrong wherever a row spans more than one key tile."""
    return catalog.get(impl).tile_local and tokens > (block_n or 0)


def expected_verdict(impl: str, tokens: int, block_n: int, dtype: str, product: float, head_dim: int) -> str:
    stored = stored_score(impl, product, head_dim)
    if stored is not None and stored > torch.finfo(DTYPES[dtype]).max:
        return "nonfinite"
    if wrong_on_purpose(impl, tokens, block_n):
        return "fail"
    return "pass"


def held_to_the_rule(impl: str, tokens: int, block_n: int | None) -> bool:
    """Whether a measured point is held to the validation rule at its own inputs: every one
    but those of the rule's own baseline (torch_naive: within its bound by definition, and a
    second run of it costs as much as the point) and those wrong on purpose."""
    return impl != DEFAULT_TWIN and not wrong_on_purpose(impl, tokens, block_n)


def past_bound(what: str, error: float, bound: float, rule: str) -> str:
    """A measured output's reason for failing the validation rule at its own point."""
    return (
        f"{what}'s largest error against the float64 definition, {error:.3g}, exceeds the validation "
        f"rule's bound at this point, {bound:.3g} ({rule})"
    )
