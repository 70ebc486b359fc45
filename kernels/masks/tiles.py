"""What follows from a mask's one answer, ``bounds``: the scores it keeps, and the tiles a
block of queries visits. A tile of query rows [r0, r1) and keys [k0, k1) is

- ``empty`` when no row sees any of its keys: a block-sparse kernel never loads it;
- ``full`` when every row sees every key: it runs without the element mask;
- ``partial`` otherwise: it needs the element mask.

Since each row sees one run of keys, its own position included, and both ends of the run
never move back as the rows go down, a block of rows sees one run of keys too (from the
first row's lo to the last row's hi), every key in it seen by some row: the tiles a block
visits are one run of key tiles, none of them empty. Pure Python, so the models walk the same
map the kernels iterate."""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from kernels.masks.kind import Mask


def position(row: int, tokens: int, query_tokens: int) -> int:
    """The absolute position of query row ``row``: the queries are the last positions."""
    return row + tokens - query_tokens


def row_bounds(
    mask: Mask, tokens: int, query_tokens: int | None = None, rows: range | None = None
) -> list[tuple[int, int]]:
    """(lo, hi) of every query row (or of ``rows``), in order."""
    queries = tokens if query_tokens is None else query_tokens
    return [
        tuple(map(int, mask.bounds(position(r, tokens, queries), tokens))) for r in rows or range(queries)
    ]


def kept_scores(mask: Mask, tokens: int, query_tokens: int | None = None) -> int:
    """How many of the query_tokens × T scores the mask keeps (per batch and head)."""
    return sum(hi - lo for lo, hi in row_bounds(mask, tokens, query_tokens))


@dataclass(frozen=True)
class BlockVisit:
    """One block of query rows: the key tiles it visits, [first, stop), and which of them
    need the element mask."""

    rows: tuple[int, int]
    first: int
    stop: int
    partial: tuple[int, ...]

    @property
    def visited(self) -> int:
        return self.stop - self.first


def block_map(
    mask: Mask, tokens: int, block_m: int, block_n: int, query_tokens: int | None = None
) -> list[BlockVisit]:
    """Every query block's visit: the map a block-sparse kernel iterates and the traffic
    models walk. The full tiles of a block are one run too (keys from the last row's lo to
    the first row's hi); the partial ones lie on either side of it."""
    queries = tokens if query_tokens is None else query_tokens
    visits = []
    for r0 in range(0, queries, block_m):
        rows = (r0, min(queries, r0 + block_m))
        first_lo, first_hi = mask.bounds(position(rows[0], tokens, queries), tokens)
        last_lo, last_hi = mask.bounds(position(rows[1] - 1, tokens, queries), tokens)
        first, stop = first_lo // block_n, -(-last_hi // block_n)
        full_first = -(-last_lo // block_n)
        full_stop = -(-tokens // block_n) if first_hi >= tokens else first_hi // block_n
        full = range(max(first, full_first), min(stop, full_stop))
        before, after = (full.start, full.stop) if full else (stop, stop)  # the partial ones: either side
        partial = (*range(first, before), *range(after, stop))
        visits.append(BlockVisit(rows, first, stop, partial))
    return visits


def query_blocks_by_key_tile(visits: list[BlockVisit], key_tiles: int) -> list[range]:
    """The tile map read by key tile: for each, the query blocks whose visit holds it. Since
    neither end of a visit falls as the blocks go down, they are one run (empty for a key tile
    no query sees), what a backward kernel streams for that key tile's dK and dV."""
    firsts, stops = [v.first for v in visits], [v.stop for v in visits]
    return [range(bisect.bisect_right(stops, n), bisect.bisect_right(firsts, n)) for n in range(key_tiles)]


def key_tile_rows(mask: Mask, tokens: int, block_m: int, block_n: int) -> list[tuple[int, int]]:
    """Each key tile's query rows [first, stop) in whole query blocks (stop may pass T): the
    rows a backward streams for the tile's dK and dV, in the square problem."""
    visits = block_map(mask, tokens, block_m, block_n)
    seen = query_blocks_by_key_tile(visits, -(-tokens // block_n))
    return [(run.start * block_m, max(run.start, run.stop) * block_m) for run in seen]


@dataclass(frozen=True)
class Coverage:
    """What a mask keeps against what a block-sparse kernel of one block shape visits, per
    batch and head: scores kept, tiles visited (those holding a kept score) and of them the
    partial ones, and the scores the visited tiles hold (the products such a kernel computes,
    tiles cut at T and at the last query)."""

    kept_scores: int
    all_scores: int
    visited_tiles: int
    partial_tiles: int
    all_tiles: int
    visited_scores: int

    def as_row(self) -> dict[str, int | float]:
        return {
            "kept_share": self.kept_scores / self.all_scores,
            "visited_share": self.visited_scores / self.all_scores,
            "partial_share": self.partial_tiles / max(1, self.visited_tiles),
            "visited_tiles": self.visited_tiles,
            "partial_tiles": self.partial_tiles,
            "all_tiles": self.all_tiles,
            "kept_scores": self.kept_scores,
            "visited_scores": self.visited_scores,
            "all_scores": self.all_scores,
        }


def coverage(
    mask: Mask, tokens: int, block_m: int, block_n: int, query_tokens: int | None = None
) -> Coverage:
    """The scores the mask keeps and the tiles of ``block_m`` × ``block_n`` a kernel visits."""
    queries = tokens if query_tokens is None else query_tokens
    visits = block_map(mask, tokens, block_m, block_n, queries)
    width = [min(tokens, (n + 1) * block_n) - n * block_n for n in range(-(-tokens // block_n))]
    return Coverage(
        kept_scores=kept_scores(mask, tokens, queries),
        all_scores=queries * tokens,
        visited_tiles=sum(v.visited for v in visits),
        partial_tiles=sum(len(v.partial) for v in visits),
        all_tiles=len(visits) * len(width),
        visited_scores=sum((v.rows[1] - v.rows[0]) * sum(width[v.first : v.stop]) for v in visits),
    )
