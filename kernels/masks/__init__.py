"""Masks: which keys each query may see. One module per kind answers everything asked of it;
nothing outside this package names a mask kind.

Every mask here lets query position p see one run of keys, ``lo(p) ≤ j < hi(p)``, with lo and
hi never decreasing as p grows and p itself always inside the run (``bounds``). From that one
answer the rest is derived (``kernels.masks.tiles``): the element predicate the float64
reference and the PyTorch paths apply, the scores a mask keeps, and which key tiles a block
of queries must visit: none of its keys seen (``empty``), some (``partial``: the element mask
is needed), or all of them (``full``: the tile runs unmasked).

Positions are absolute: with ``query_tokens`` queries against T keys, query row r stands at
position r + T − query_tokens (the queries are the sequence's last positions, as decode
against a KV cache has them), so a sliding window at decode sees the last w keys.

A mask is written as a short string, ``kind`` or ``kind:argument``: ``full``, ``causal``,
``window:256``, ``documents:300+700+24``, ``documents:512``, ``documents-full:300+700+24``,
``prefix:100`` (see each kind's module). Pure Python: the planner parses masks without torch.
"""

from __future__ import annotations

from kernels.masks import causal, documents, full, prefix, window
from kernels.masks.kind import Mask

__all__ = ["KINDS", "Mask", "beyond_causal", "from_causal", "parse", "spellings"]

# kind name → its class; each class parses its own argument
KINDS: dict[str, type] = {
    kind.KIND: kind
    for kind in (
        full.Full,
        causal.Causal,
        window.Window,
        documents.Documents,
        documents.FullDocuments,
        prefix.Prefix,
    )
}


def spellings() -> str:
    """How each kind is written, for error messages and --help."""
    return ", ".join(kind.EXAMPLE for kind in KINDS.values())


def parse(text: str) -> Mask:
    """The mask a string names; ValueError saying what is allowed when it names none."""
    if not isinstance(text, str):
        raise ValueError(f"mask {text!r}: a mask is a string, one of {spellings()}")
    name, colon, argument = text.partition(":")
    kind = KINDS.get(name)
    if kind is None:
        raise ValueError(f"mask {text!r}: unknown kind {name!r}; the masks are {spellings()}")
    if bool(colon) != kind.TAKES_ARGUMENT:
        wanted = "takes an argument" if kind.TAKES_ARGUMENT else "takes no argument"
        raise ValueError(f"mask {text!r}: {name} {wanted}, as in {kind.EXAMPLE}")
    return kind.parse(argument) if kind.TAKES_ARGUMENT else kind()


def from_causal(is_causal: bool) -> Mask:
    """``causal: true/false``, the sweep's older spelling: the causal mask, or none."""
    return causal.Causal() if is_causal else full.Full()


def beyond_causal(mask: Mask) -> bool:
    """Whether the mask is neither causal nor full (the two every path takes)."""
    return mask not in (from_causal(True), from_causal(False))
