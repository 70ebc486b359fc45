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

import re

from kernels.masks import causal, documents, full, prefix, window
from kernels.masks.kind import Mask

__all__ = [
    "DENSE_BYTES",
    "FILE_PATTERN",
    "KINDS",
    "Mask",
    "as_mask",
    "beyond_causal",
    "file_form",
    "from_causal",
    "from_file_form",
    "parse",
    "spellings",
]

DENSE_BYTES = 1  # a dense mask, as PyTorch code builds one: torch.bool, a byte a score

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


# A mask in a file name: the colon after the kind becomes a hyphen (window-256,
# documents-300+700+24), since a colon is no part of a portable file name. The regex the
# point names' {mask} wildcard takes, longest kind first (documents-full before documents).
_BY_LENGTH = sorted(KINDS.values(), key=lambda kind: -len(kind.KIND))
FILE_PATTERN = "|".join(
    re.escape(kind.KIND) + (r"-[1-9][0-9]*(?:\+[1-9][0-9]*)*" if kind.TAKES_ARGUMENT else "")
    for kind in _BY_LENGTH
)


def file_form(mask: Mask) -> str:
    """The mask as a point's file name writes it (``window-256``)."""
    return mask.spelled().replace(":", "-", 1)


def from_file_form(text: str) -> Mask:
    """Inverse of ``file_form``; ValueError where the text is no mask's file form."""
    for kind in _BY_LENGTH:
        if text == kind.KIND:
            return parse(text)
        if kind.TAKES_ARGUMENT and text.startswith(kind.KIND + "-"):
            return parse(f"{kind.KIND}:{text[len(kind.KIND) + 1 :]}")
    raise ValueError(f"{text!r} is no mask's file form ({FILE_PATTERN})")


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


def as_mask(value: bool | str | Mask) -> Mask:
    """A mask from what callers hold: ``causal`` True/False (causal, full), a spelling, or a
    mask already."""
    if isinstance(value, bool):
        return from_causal(value)
    return parse(value) if isinstance(value, str) else value


def beyond_causal(mask: Mask) -> bool:
    """Whether the mask is neither causal nor full (the two every path takes)."""
    return mask not in (from_causal(True), from_causal(False))
