"""A sweep point: one implementation on one shape, with its one name, its one file path
pattern (the Snakemake wildcards) and its one command-line form, each in both directions.

Pure Python (argparse, re): the workflow plans thousands of points without importing torch.
"""

from __future__ import annotations

import argparse
import functools
import re
from dataclasses import dataclass, replace
from typing import Any

from kernels import catalog, masks
from kernels.spec import (
    BLOCK_SIZES,
    DEFAULT_BLOCK,
    DEFAULT_INPUTS,
    DEFAULT_PASS,
    DTYPES,
    ELEMENT_BYTES,
    HEAD_DIMS,
    INFERENCE_DIMS,
    INPUTS,
    LARGE_INPUT,
    MAX_BATCH,
    MAX_GRID_YZ,
    MAX_ROW_BLOCK,
    MAX_SEED,
    MAX_SPLITS,
    MAX_TOKENS,
    PASSES,
)

# results/points/<POINT_PATTERN>.json; the measure rule's output is spelled with it
# (a backward point's name ends in -backward; a forward one's carries no pass, as before passes)
# (-KV<n>: kv_heads, -Q<n>: query_tokens, each only where it differs from H or T, so that the
# square problem keeps the names it had before them; -ns<n>: num_splits, only where a point asks
# for a split count rather than its path's own rule)
POINT_PATTERN = (
    "{impl}/{dtype}/B{batch}-H{heads}{kv_heads}{query_tokens}-T{tokens}-d{head_dim}-{mask}-{blocks}"
    "{num_splits}-{inputs}{direction}"
)
# results/validate/<VALIDATION_PATTERN>.json: what a point's implementation must pass first
VALIDATION_PATTERN = "{impl}_{dtype}_{blocks}"
# results/build/<BUILD_PATTERN>.json: one build job per implementation, dtype, blocks and d (a
# kernel's variants are the same at every T but a few: each compiled once, for all its T)
BUILD_PATTERN = VALIDATION_PATTERN + "/d{head_dim}"
NO_BLOCKS = "na"
WILDCARD_CONSTRAINTS: dict[str, str] = {
    "impl": catalog.NAME.pattern,  # any registered name: checked against the catalog
    "dtype": "|".join(DTYPES),
    "batch": r"\d+",
    "heads": r"\d+",
    "tokens": r"\d+",
    "head_dim": r"\d+",
    "mask": masks.FILE_PATTERN,  # the mask's file form: causal, full, window-256, ...
    "blocks": rf"{NO_BLOCKS}|bm\d+-bn\d+",
    "inputs": "|".join(INPUTS),
    "direction": "|-backward",  # empty for the forward
    "kv_heads": r"|-KV\d+",  # empty where K and V have a head per query head
    "query_tokens": r"|-Q\d+",  # empty where there are as many queries as keys
    "num_splits": r"|-ns\d+",  # empty where the path chooses its split count (or has none)
}


SHAPE_FIELDS = (
    "batch",
    "heads",
    "kv_heads",
    "query_tokens",
    "tokens",
    "head_dim",
    "dtype",
    "mask",
    "causal",
    "block_m",
    "block_n",
    "num_splits",
)


def _pattern_regex(pattern: str) -> re.Pattern:
    parts = re.split(r"\{(\w+)\}", pattern)  # literal, name, literal, name, ...
    regex = "".join(
        re.escape(part) if i % 2 == 0 else f"(?P<{part}>{WILDCARD_CONSTRAINTS[part]})"
        for i, part in enumerate(parts)
    )
    return re.compile(regex)


_POINT_REGEX = _pattern_regex(POINT_PATTERN)


def blocks_label(block_m: int | None, block_n: int | None) -> str:
    return NO_BLOCKS if block_m is None else f"bm{block_m}-bn{block_n}"


def parse_blocks(label: str) -> tuple[int | None, int | None]:
    if label == NO_BLOCKS:
        return None, None
    bm, bn = label.split("-")
    return int(bm.removeprefix("bm")), int(bn.removeprefix("bn"))


@dataclass(frozen=True)
class Point:
    impl: str
    batch: int
    heads: int
    tokens: int
    head_dim: int
    dtype: str
    mask: str | bool  # a mask as written (kernels.masks: causal, window:256, ...); True/False: causal/full
    block_m: int | None = None
    block_n: int | None = None
    sp_dtype: str | None = None  # S/P dtype of the materialized paths; default: dtype
    max_row_block: int = MAX_ROW_BLOCK
    inputs: str = DEFAULT_INPUTS  # what q, k and v hold (kernels.spec.INPUTS)
    direction: str = DEFAULT_PASS  # the pass measured (kernels.spec.PASSES)
    query_tokens: int | None = None  # queries per sequence against T keys; None: T (square)
    kv_heads: int | None = None  # heads of K and V, each shared by H / kv_heads query heads; None: H
    num_splits: int | None = None  # key chunks of a split-KV call; None: its path's own rule

    def __post_init__(self) -> None:
        catalog.get(self.impl)  # an unknown name is an error listing the registered ones
        self._check_mask()
        for name in ("batch", "heads", "tokens", "head_dim", *INFERENCE_DIMS):
            value = getattr(self, name)
            if value is None and name in INFERENCE_DIMS:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r}: must be an integer of at least 1")
        self._check_inference_dims()
        for name in ("dtype", "sp_dtype"):
            value = getattr(self, name)
            if value is not None and value not in ELEMENT_BYTES:
                raise ValueError(f"{name}={value!r}: allowed values are {', '.join(ELEMENT_BYTES)}")
        for name, most in (("tokens", MAX_TOKENS), ("heads", MAX_GRID_YZ), ("batch", MAX_BATCH)):
            if getattr(self, name) > most:
                raise ValueError(f"{name}={getattr(self, name)}: at most {most:,}")
        if self.sp_dtype is not None and "sp_dtype" not in catalog.get(self.impl).options:
            takes = [n for n, i in catalog.registered().items() if "sp_dtype" in i.options]
            raise ValueError(f"sp_dtype applies to impl {', '.join(takes)} only, not {self.impl}")
        if self.inputs not in INPUTS:
            raise ValueError(f"inputs={self.inputs!r}: allowed values are {', '.join(INPUTS)}")
        if self.direction not in PASSES:
            raise ValueError(f"pass={self.direction!r}: allowed values are {', '.join(PASSES)}")
        for name in ("block_m", "block_n"):
            value = getattr(self, name)
            if value is not None and value not in BLOCK_SIZES:
                raise ValueError(f"{name}={value!r}: allowed values are {', '.join(map(str, BLOCK_SIZES))}")
        if self.triton:
            object.__setattr__(self, "block_m", self.block_m or DEFAULT_BLOCK)
            object.__setattr__(self, "block_n", self.block_n or DEFAULT_BLOCK)
        self._check_splits()

    def _check_mask(self) -> None:
        """The mask in its one spelling (``causal: true/false`` as causal and full), refused
        naming the field where it is no mask or does not fit T."""
        if isinstance(self.mask, bool):
            object.__setattr__(self, "mask", masks.from_causal(self.mask).spelled())
        kind = parsed_mask(self.mask)  # its errors name the mask as written
        if isinstance(self.tokens, int) and (why := kind.refusal(self.tokens)):
            raise ValueError(why)
        object.__setattr__(self, "mask", kind.spelled())

    def _check_splits(self) -> None:
        """num_splits: an integer from 1 to MAX_SPLITS, kept only where the implementation's
        registration takes the option (as blocks are only for the Triton paths), so that a
        point moved onto another path (``replace(point, impl=...)``) keeps one name."""
        value = self.num_splits
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SPLITS:
            raise ValueError(
                f"num_splits={value!r}: must be an integer from 1 to {MAX_SPLITS:,} (or absent: the "
                "path's own rule)"
            )
        if "num_splits" not in catalog.get(self.impl).options:
            object.__setattr__(self, "num_splits", None)

    def _check_inference_dims(self) -> None:
        """query_tokens and kv_heads equal to T and H are the square problem: absent, so that
        a point has one name; otherwise what they may be, naming the field."""
        if self.query_tokens == self.tokens:
            object.__setattr__(self, "query_tokens", None)
        if self.kv_heads == self.heads:
            object.__setattr__(self, "kv_heads", None)
        if self.query_tokens is not None and self.query_tokens > self.tokens:
            raise ValueError(
                f"query_tokens={self.query_tokens}: at most tokens={self.tokens} (queries attend to "
                "the last query_tokens positions of a sequence of T keys)"
            )
        if self.kv_heads is not None and self.heads % self.kv_heads:
            raise ValueError(
                f"kv_heads={self.kv_heads}: must divide heads={self.heads} (each K/V head serves "
                "an equal group of query heads)"
            )

    def shape(self) -> dict:
        """The fields that size the problem and its tiles, by name (tables' columns); the
        inference dimensions as numbers, T and H where the point leaves them out."""
        return {name: getattr(self, name) for name in SHAPE_FIELDS} | {
            "query_tokens": self.queries,
            "kv_heads": self.kv,
        }

    @property
    def mask_kind(self) -> masks.Mask:
        """The mask itself (kernels.masks), which the kernels and models ask."""
        return parsed_mask(self.mask)

    @property
    def causal(self) -> bool:
        """Whether the mask is the causal one (the sweep's ``causal: true``)."""
        return self.mask == "causal"

    @property
    def queries(self) -> int:
        """Query rows per sequence: query_tokens, or T."""
        return self.query_tokens or self.tokens

    @property
    def kv(self) -> int:
        """K/V heads: kv_heads, or H."""
        return self.kv_heads or self.heads

    @property
    def group_size(self) -> int:
        """Query heads sharing one K/V head (1 without grouped heads)."""
        return self.heads // self.kv

    @property
    def square(self) -> bool:
        """The square problem: as many queries as keys and a K/V head per query head."""
        return self.query_tokens is None and self.kv_heads is None

    @property
    def groups(self) -> int:
        """B·H independent (query_tokens × d) attention problems."""
        return self.batch * self.heads

    @property
    def kv_groups(self) -> int:
        """B·kv_heads (T × d) K and V matrices."""
        return self.batch * self.kv

    @property
    def e(self) -> int:
        return ELEMENT_BYTES[self.dtype]

    @property
    def e_sp(self) -> int:
        """Bytes of one stored score (of S, and of P where it is stored)."""
        return ELEMENT_BYTES[catalog.stored_dtype(self.impl, self.dtype, self.sp_dtype)]

    @property
    def stores(self) -> str:
        """SP, S or none (kernels.catalog.STORES)."""
        return catalog.get(self.impl).stores

    @property
    def backward(self) -> bool:
        """The point measures a forward that saves for the backward, then the backward."""
        return self.direction == "backward"

    @property
    def trains(self) -> bool:
        """A backward is measured and modelled at this shape: the square problem or grouped
        heads, not fewer queries than keys (inference's shape, which no study trains on)."""
        return self.query_tokens is None

    def forward(self) -> Point:
        """The same point's forward pass."""
        return replace(self, direction=DEFAULT_PASS)

    @property
    def materialized(self) -> bool:
        return self.stores == "SP"

    @property
    def triton(self) -> bool:
        return catalog.get(self.impl).triton

    @property
    def stored_rows(self) -> int:
        """Query rows whose scores exist at once: all T, or an implementation's chunk."""
        return min(self.tokens, catalog.get(self.impl).stored_rows or self.tokens)

    # --- names and paths ---------------------------------------------------------------

    def wildcards(self) -> dict[str, str]:
        return {
            "impl": self.impl,
            "dtype": self.dtype,
            "batch": str(self.batch),
            "heads": str(self.heads),
            "tokens": str(self.tokens),
            "head_dim": str(self.head_dim),
            "mask": masks.file_form(self.mask_kind),
            "blocks": blocks_label(self.block_m, self.block_n),
            "inputs": self.inputs,
            "direction": "" if self.direction == DEFAULT_PASS else f"-{self.direction}",
            "kv_heads": "" if self.kv_heads is None else f"-KV{self.kv_heads}",
            "query_tokens": "" if self.query_tokens is None else f"-Q{self.query_tokens}",
            "num_splits": "" if self.num_splits is None else f"-ns{self.num_splits}",
        }

    @property
    def name(self) -> str:
        """The point's file name under results/points/, without the extension."""
        return POINT_PATTERN.format(**self.wildcards())

    @property
    def validation_name(self) -> str:
        """The validation (implementation, dtype, blocks) the point depends on."""
        return VALIDATION_PATTERN.format(**self.wildcards())

    @property
    def build_name(self) -> str:
        """The build job that compiles the point's kernel variants."""
        return BUILD_PATTERN.format(**self.wildcards())

    @classmethod
    def from_wildcards(cls, wc: Any) -> Point:
        bm, bn = parse_blocks(wc["blocks"])
        return cls(
            wc["impl"],
            int(wc["batch"]),
            int(wc["heads"]),
            int(wc["tokens"]),
            int(wc["head_dim"]),
            wc["dtype"],
            masks.from_file_form(wc["mask"]).spelled(),
            bm,
            bn,
            inputs=wc["inputs"],
            direction=(wc.get("direction") or DEFAULT_PASS).removeprefix("-"),
            query_tokens=int(wc["query_tokens"].removeprefix("-Q")) if wc.get("query_tokens") else None,
            kv_heads=int(wc["kv_heads"].removeprefix("-KV")) if wc.get("kv_heads") else None,
            num_splits=int(wc["num_splits"].removeprefix("-ns")) if wc.get("num_splits") else None,
        )

    @classmethod
    def from_name(cls, name: str) -> Point:
        """Inverse of ``name``."""
        match = _POINT_REGEX.fullmatch(name.removesuffix(".json"))
        if not match:
            raise ValueError(f"point name {name!r} does not read as {POINT_PATTERN}")
        return cls.from_wildcards(match.groupdict())

    # --- the command-line form -----------------------------------------------------------

    def cli_args(self) -> list[str]:
        """The point's flags, as ``add_cli_arguments`` defines them."""
        args = [
            "--impl",
            self.impl,
            "--batch",
            str(self.batch),
            "--heads",
            str(self.heads),
            "--tokens",
            str(self.tokens),
            "--head-dim",
            str(self.head_dim),
            "--dtype",
            self.dtype,
        ]
        if self.causal:
            args.append("--causal")
        elif self.mask != "full":
            args += ["--mask", self.mask]
        if self.block_m is not None:
            args += ["--block-m", str(self.block_m), "--block-n", str(self.block_n)]
        if self.sp_dtype is not None:
            args += ["--sp-dtype", self.sp_dtype]
        if self.inputs != DEFAULT_INPUTS:
            args += ["--inputs", self.inputs]
        if self.direction != DEFAULT_PASS:
            args += ["--pass", self.direction]
        if self.query_tokens is not None:
            args += ["--query-tokens", str(self.query_tokens)]
        if self.kv_heads is not None:
            args += ["--kv-heads", str(self.kv_heads)]
        if self.num_splits is not None:
            args += ["--num-splits", str(self.num_splits)]
        return args

    @classmethod
    def from_cli(cls, args: argparse.Namespace) -> Point:
        """The point the flags of ``add_cli_arguments`` describe; a flag that does not apply
        to the implementation is an error naming it."""
        entry = catalog.get(args.impl)
        for flag in ("block_m", "block_n"):
            if getattr(args, flag) is not None and not entry.triton:
                raise ValueError(
                    f"--{flag.replace('_', '-')} applies to the Triton "
                    f"implementations only, not --impl {args.impl}"
                )
        splits = getattr(args, "num_splits", None)
        if splits is not None and "num_splits" not in entry.options:
            takes = [name for name, found in catalog.registered().items() if "num_splits" in found.options]
            raise ValueError(f"--num-splits applies to --impl {', '.join(takes)} only, not {args.impl}")
        return cls(
            args.impl,
            args.batch,
            args.heads,
            args.tokens,
            args.head_dim,
            args.dtype,
            mask_argument(args),
            args.block_m,
            args.block_n,
            args.sp_dtype,
            inputs=args.inputs,
            direction=getattr(args, "direction", DEFAULT_PASS),
            query_tokens=getattr(args, "query_tokens", None),
            kv_heads=getattr(args, "kv_heads", None),
            num_splits=splits,
        )


@functools.lru_cache(maxsize=256)
def parsed_mask(spelling: str) -> masks.Mask:
    """kernels.masks.parse, once per spelling (models ask a point's mask at every block)."""
    return masks.parse(spelling)


def mask_argument(args: argparse.Namespace) -> str:
    """--mask, or --causal (its older spelling), or full; both given is an error."""
    given = getattr(args, "mask", None)
    if given is not None and getattr(args, "causal", False):
        raise ValueError(f"--causal and --mask {given} given: give one (--mask causal is --causal)")
    return given if given is not None else "causal" if getattr(args, "causal", False) else "full"


def mask_text(text: str) -> str:
    """An argparse type: a mask as written, refused saying which masks there are."""
    try:
        return parsed_mask(text).spelled()
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def impl_name(text: str) -> str:
    """An implementation's name as a flag takes it; whether it is registered is checked once
    the command has fixed the Triton mode (a plugin's kernels are imported then)."""
    if why := catalog.name_problem(text):
        raise argparse.ArgumentTypeError(
            f"{catalog.shown_name(text)} is not an implementation name (e.g. triton_flash): {why}"
        )
    return text


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value


def bounded_int(most: int, why: str):
    """An argparse type: an integer from 1 to ``most``, refused naming ``why`` beyond it."""

    def parse(text: str) -> int:
        value = positive_int(text)
        if value > most:
            raise argparse.ArgumentTypeError(f"{value:,} is more than {most:,} ({why})")
        return value

    parse.__name__ = "integer"  # argparse names the type in its messages
    return parse


tokens_int = bounded_int(MAX_TOKENS, "the most T a study plans, as in the configuration")
heads_int = bounded_int(MAX_GRID_YZ, "CUDA's grid limit, which carries B·H, as in the configuration")
batch_int = bounded_int(MAX_BATCH, "the most B the configuration's total_tokens can make")
splits_int = bounded_int(MAX_SPLITS, "CUDA's grid limit, which carries the splits, as in the configuration")


def seed_int(text: str) -> int:
    """A seed torch accepts once per-case seeds are derived from it (0 … MAX_SEED)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"{value} is outside 0 … {MAX_SEED:,}")
    return value


def launch_pair(text: str) -> tuple[int, int]:
    """``num_warps,num_stages`` of the fused kernel, e.g. ``8,2``."""
    parts = text.split(",")
    if len(parts) != 2:
        raise argparse.ArgumentTypeError(f"{text!r}: give num_warps,num_stages, e.g. 8,2")
    return positive_int(parts[0]), positive_int(parts[1])


def add_cli_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags that describe one point (``Point.cli_args`` writes them)."""
    parser.add_argument(
        "--impl", required=True, type=impl_name, help="a registered implementation, ours or a plugin's"
    )
    parser.add_argument("--batch", type=batch_int, default=1, help="B")
    parser.add_argument("--heads", type=heads_int, default=1, help=f"H (at most {MAX_GRID_YZ:,})")
    parser.add_argument(
        "--kv-heads", type=heads_int, help="heads of K and V, dividing H (default: H; 1: multi-query)"
    )
    parser.add_argument("--tokens", type=tokens_int, required=True, help=f"T (at most {MAX_TOKENS:,})")
    parser.add_argument(
        "--query-tokens",
        type=tokens_int,
        help="queries per sequence against the T keys, at most T (default: T; 1: decode)",
    )
    parser.add_argument("--head-dim", type=int, choices=HEAD_DIMS, required=True, help="d")
    parser.add_argument("--dtype", choices=DTYPES, required=True)
    parser.add_argument("--causal", action="store_true", help="mask future keys (--mask causal)")
    parser.add_argument(
        "--mask",
        type=mask_text,
        help=f"which keys each query sees: {masks.spellings()} (default: full, or --causal)",
    )
    parser.add_argument(
        "--block-m", type=int, choices=BLOCK_SIZES, help=f"Triton only (default: {DEFAULT_BLOCK})"
    )
    parser.add_argument(
        "--block-n", type=int, choices=BLOCK_SIZES, help=f"Triton only (default: {DEFAULT_BLOCK})"
    )
    parser.add_argument(
        "--num-splits",
        type=splits_int,
        help="key chunks of a split-KV call, e.g. triton_split_kv (default: the path's own rule)",
    )
    parser.add_argument("--sp-dtype", choices=DTYPES, help="S/P dtype of triton_naive (default: --dtype)")
    parser.add_argument(
        "--inputs",
        choices=INPUTS,
        default=DEFAULT_INPUTS,
        help=f"normal: q, k, v from N(0, 1); large: q = k = {LARGE_INPUT:,.0f}, whose scores "
        "overflow float16",
    )
    parser.add_argument(
        "--pass",
        dest="direction",
        choices=PASSES,
        default=DEFAULT_PASS,
        help="forward: one call; backward: a forward that saves for the backward, then the backward "
        "from a fresh random dO",
    )
