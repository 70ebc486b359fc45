"""Why is a softmax over part of a row not the row's softmax?

The seed's Figure 4, computed: why a softmax over part of a row is not the row's softmax.

A row has four visible scores; the first two are 0. Their final probability depends on the
two scores not yet seen, and a softmax over the first two alone gives a third answer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def softmax(scores: Sequence[float]) -> list[float]:
    """Row softmax in float64, shifted by the row maximum (exact for any finite scores)."""
    top = max(scores)
    exps = [math.exp(s - top) for s in scores]
    total = math.fsum(exps)
    return [e / total for e in exps]


def tile_local_softmax(scores: Sequence[float], tile: int) -> list[float]:
    """Each run of ``tile`` scores normalized on its own: the mistake, concatenated."""
    out: list[float] = []
    for start in range(0, len(scores), tile):
        out.extend(softmax(scores[start : start + tile]))
    return out


def figure4(x: float = 2.0) -> dict[str, float]:
    """First-position probabilities for rows [0, 0, 0, 0] and [0, 0, x, x], and for a
    softmax over the first two scores only."""
    return {
        "row_0000_first": softmax([0.0, 0.0, 0.0, 0.0])[0],
        "row_00xx_first": softmax([0.0, 0.0, x, x])[0],
        "first_two_only_first": softmax([0.0, 0.0])[0],
    }
