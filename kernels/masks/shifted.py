"""A mask seen from a block of query rows: what a check computed a chunk of rows at a time
needs, since a call places its queries at the sequence's last positions and a chunk's rows
are not the last ones."""

from __future__ import annotations

from dataclasses import dataclass

from kernels.masks.kind import Mask


@dataclass(frozen=True)
class Shifted:
    """``mask`` with every query position moved on by ``by``: called with the rows
    [start, stop) of ``queries`` as its queries, their positions come out ``stop − queries``
    short, and ``by`` puts them back (``for_rows``)."""

    mask: Mask
    by: int

    def bounds(self, position, tokens: int) -> tuple:
        return self.mask.bounds(position + self.by, tokens)


def for_rows(mask: Mask, rows: range | slice, queries: int) -> Shifted:
    """The mask as the query rows ``rows`` of ``queries`` see it, called on those rows alone
    against all T keys."""
    return Shifted(mask, rows.stop - queries)
