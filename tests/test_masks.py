"""Each mask against the field's own definition (attn-gym's mask functions, as FlexAttention
takes them), the tiles derived from it against the dense predicate for any block sizes, the
scores it keeps, how it is written and refused, and the float64 reference under it."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import torch
from attn_gym.masks import (
    causal_mask,
    generate_doc_mask_mod,
    generate_prefix_lm_mask,
    generate_sliding_window,
)
from attn_gym.masks.document_mask import length_to_offsets
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn.attention.flex_attention import noop_mask

from kernels import masks
from kernels.cli import main
from kernels.impl.inputs import make_qkv
from kernels.impl.reference import future_mask, reference_float64, visible
from kernels.masks import tiles

T = 37  # odd, so that no block size tiles it


def attn_gym_mask(text: str, tokens: int):
    """The attn-gym mask_mod of the same mask (its window counts the keys behind the query)."""
    name, _, argument = text.partition(":")
    if name in ("documents", "documents-full"):
        lengths = [int(n) for n in argument.split("+")]
        if len(lengths) == 1:  # one length tiles T, the last document holding what is left
            whole, left = divmod(tokens, lengths[0])
            lengths = [lengths[0]] * whole + ([left] if left else [])
        inner = causal_mask if name == "documents" else noop_mask
        return generate_doc_mask_mod(inner, length_to_offsets(lengths, "cpu"))
    return {
        "full": lambda: noop_mask,
        "causal": lambda: causal_mask,
        "window": lambda: generate_sliding_window(int(argument) - 1),
        "prefix": lambda: generate_prefix_lm_mask(int(argument)),
    }[name]()


def attn_gym_dense(text: str, tokens: int, queries: int) -> torch.Tensor:
    """attn-gym's predicate over the last ``queries`` positions against every key."""
    rows = torch.arange(tokens - queries, tokens)[:, None]
    keys = torch.arange(tokens)[None, :]
    zero = torch.tensor(0)
    return attn_gym_mask(text, tokens)(zero, zero, rows, keys).expand(queries, tokens)


MASKS = (
    "full",
    "causal",
    "window:1",
    "window:5",
    "window:37",
    "window:50",
    "documents:5+20+12",
    "documents:1+36",
    "documents:8",
    "documents-full:5+20+12",
    "documents-full:16",
    "prefix:1",
    "prefix:13",
    "prefix:37",
)


@pytest.mark.parametrize("text", MASKS)
@pytest.mark.parametrize("queries", [T, 7, 1])
def test_each_mask_is_attn_gyms(text, queries):
    mask = masks.parse(text)
    assert mask.refusal(T) is None
    assert torch.equal(visible(mask, T, "cpu", queries), attn_gym_dense(text, T, queries))
    assert tiles.kept_scores(mask, T, queries) == int(attn_gym_dense(text, T, queries).sum())


@pytest.mark.parametrize("queries", [T, 7])
def test_torch_naives_causal_mask_is_the_causal_masks_complement(queries):
    assert torch.equal(future_mask(T, "cpu", queries), ~visible(masks.parse("causal"), T, "cpu", queries))


@st.composite
def problems(draw):
    tokens = draw(st.integers(1, 70))
    queries = draw(st.integers(1, tokens))
    cuts = sorted(draw(st.sets(st.integers(1, tokens - 1), max_size=6))) if tokens > 1 else []
    lengths = [b - a for a, b in zip([0, *cuts], [*cuts, tokens], strict=True)]
    text = draw(
        st.one_of(
            st.sampled_from(["full", "causal"]),
            st.integers(1, tokens + 3).map(lambda w: f"window:{w}"),
            st.integers(1, tokens).map(lambda p: f"prefix:{p}"),
            st.integers(1, tokens + 3).map(lambda n: f"documents:{n}"),
            st.sampled_from(["documents:", "documents-full:"]).map(lambda k: k + "+".join(map(str, lengths))),
        )
    )
    return masks.parse(text), tokens, queries, draw(st.integers(1, 20)), draw(st.integers(1, 20))


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(problems())
def test_the_tiles_a_block_visits_follow_the_predicate_for_any_block_sizes(problem):
    """Visited = the tiles holding a key some row of the block sees; partial = those where
    some row misses some key; the rest of the visited tiles run unmasked."""
    mask, tokens, queries, block_m, block_n = problem
    dense = visible(mask, tokens, "cpu", queries)
    found = tiles.block_map(mask, tokens, block_m, block_n, queries)
    assert [v.rows[0] for v in found] == list(range(0, queries, block_m))
    for visit in found:
        r0, r1 = visit.rows
        for n in range(math.ceil(tokens / block_n)):
            cell = dense[r0:r1, n * block_n : (n + 1) * block_n]
            kind = "empty" if not cell.any() else "full" if cell.all() else "partial"
            in_visit = visit.first <= n < visit.stop
            assert (kind != "empty") == in_visit, (mask, visit, n, kind)
            assert (kind == "partial") == (n in visit.partial), (mask, visit, n, kind)
    cells = [
        dense[r0 : r0 + block_m, n0 : n0 + block_n]
        for r0 in range(0, queries, block_m)
        for n0 in range(0, tokens, block_n)
    ]
    seen = [cell for cell in cells if cell.any()]
    assert tiles.coverage(mask, tokens, block_m, block_n, queries) == tiles.Coverage(
        kept_scores=int(dense.sum()),
        all_scores=queries * tokens,
        visited_tiles=len(seen),
        partial_tiles=sum(not bool(cell.all()) for cell in seen),
        all_tiles=len(cells),
        visited_scores=sum(cell.numel() for cell in seen),
    )


def test_a_window_keeps_a_share_of_the_scores_that_falls_with_t():
    """A causal window of w keys keeps w(w+1)/2 + (T − w)·w of the T² scores: at T = 32,768 and
    w = 4,096, 11.7 % of them and 23 % of the causal ones."""
    tokens, w = 32_768, 4_096
    kept = tiles.kept_scores(masks.parse(f"window:{w}"), tokens)
    assert kept == w * (w + 1) // 2 + (tokens - w) * w
    assert round(kept / tokens**2, 3) == 0.117
    assert round(kept / tiles.kept_scores(masks.parse("causal"), tokens), 2) == 0.23


@pytest.mark.parametrize("text", ["full", "causal", "window:256", "documents:300+700+24", "documents:512"])
def test_a_mask_is_written_as_it_parses(text):
    assert masks.parse(text).spelled() == text
    assert masks.from_causal(True).spelled() == "causal" and masks.from_causal(False).spelled() == "full"


@pytest.mark.parametrize(
    "text, said",
    [
        ("window:0", "mask 'window:0': the window (keys each query sees) must be an integer ≥ 1"),
        ("window:07", "must be an integer ≥ 1, as in window:256"),
        ("window", "mask 'window': window takes an argument, as in window:256"),
        ("causal:3", "mask 'causal:3': causal takes no argument"),
        ("documents:300+", "mask 'documents:300+': each document's length must be an integer ≥ 1"),
        ("prefix:-1", "mask 'prefix:-1': the prefix (its tokens) must be an integer ≥ 1"),
        ("sliding:4", "unknown kind 'sliding'; the masks are full, causal, window:256, documents:300+700+24"),
    ],
)
def test_a_mask_that_cannot_be_read_is_refused_saying_what_is_allowed(text, said):
    with pytest.raises(ValueError) as refused:
        masks.parse(text)
    assert said in str(refused.value)


@pytest.mark.parametrize(
    "text, said",
    [
        ("documents:300+700+23", "the documents' lengths sum to 1,023, not T = 1,024"),
        ("prefix:1025", "the prefix of 1,025 tokens is longer than T = 1,024"),
    ],
)
def test_a_mask_that_does_not_fit_t_is_refused_naming_why(text, said):
    assert said in masks.parse(text).refusal(1024)
    assert masks.parse("documents:300+700+24").refusal(1024) is None


@pytest.mark.parametrize("text", ["window:5", "documents:5+20+12", "documents-full:5+20+12", "prefix:13"])
def test_the_float64_reference_applies_the_mask(text):
    """Against softmax over attn-gym's predicate: 7 queries at the end, 4 heads sharing 2."""
    q, k, v = make_qkv(1, 4, T, 16, torch.float32, "cpu", 5)
    q, k, v = q[:, :, -7:], k[:, :2], v[:, :2]
    s = q.double() @ k.double().repeat_interleave(2, dim=1).transpose(-1, -2) / 4.0
    s = s.masked_fill(~attn_gym_dense(text, T, 7), float("-inf"))
    expected = torch.softmax(s, dim=-1) @ v.double().repeat_interleave(2, dim=1)
    got = reference_float64(q, k, v, causal=False, mask=masks.parse(text), chunk_rows=3)
    assert torch.allclose(got, expected, rtol=0, atol=1e-12)


def test_mask_tiles_prints_kept_against_visited(capsys):
    """Causal at T = 128 in 64 × 64 tiles: 8,256 of 16,384 scores kept; 3 of 4 tiles visited
    (12,288 scores), the 2 on the diagonal partial."""
    assert main(["mask-tiles", "--mask", "causal", "window:300", "--tokens", "128", "--blocks", "64"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == [
        "mask",
        "tokens",
        "queries",
        "block_m",
        "block_n",
        "kept",
        "visited",
        "partial",
        "of",
        "visited",
    ]
    assert lines[1].split() == ["causal", "128", "128", "64", "64", "50.4%", "75.0%", "66.7%"]
    assert lines[2].split()[5:] == ["50.4%", "75.0%", "66.7%"]  # a window past T is causal


def test_mask_tiles_refuses_a_mask_that_does_not_fit(capsys):
    with pytest.raises(SystemExit, match="the prefix of 200 tokens is longer than T = 128"):
        main(["mask-tiles", "--mask", "prefix:200", "--tokens", "128"])
    with pytest.raises(SystemExit):
        main(["mask-tiles", "--mask", "window:0", "--tokens", "128"])
    assert (
        "mask 'window:0': the window (keys each query sees) must be an integer ≥ 1" in capsys.readouterr().err
    )


def test_the_masks_page_of_the_docs_gives_what_mask_tiles_computes():
    """docs/masks.md's table of kept against visited shares, row by row, from the tile map."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "masks.md").read_text(encoding="utf-8")
    rows = re.findall(
        r"^\| ([\w:+-]+) \| ([\d,]+) \| (\d+) × \d+ \| ([\d.]+) % \| ([\d.]+) % \| ([\d.]+) % \|$", text, re.M
    )
    assert len(rows) == 6
    for text_mask, tokens, block, *shares in rows:
        found = tiles.coverage(
            masks.parse(text_mask), int(tokens.replace(",", "")), int(block), int(block)
        ).as_row()
        computed = [f"{100 * found[k]:.1f}" for k in ("kept_share", "visited_share", "partial_share")]
        assert computed == shares, (text_mask, tokens, block)
