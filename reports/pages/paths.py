"""Which path of a study is which, from what its records say it is (``stores``, ``triton``,
``tile_local``, ``origin``: kernels.catalog.describe), never from its name: the pages find our
materialized, S-only and fused Triton paths and the tile-local one by these facts, so a
renamed or added path needs no page changed."""

from __future__ import annotations

import pandas as pd

from kernels.spec import BUILTIN_PACKAGE

FACTS = ("impl", "stores", "triton", "tile_local", "origin")


def facts(*tables: pd.DataFrame) -> pd.DataFrame:
    """A row per implementation the tables (metrics, backward: record tables) hold, with its facts."""
    rows = [t[list(FACTS)] for t in tables if not t.empty and set(FACTS) <= set(t.columns)]
    if not rows:
        return pd.DataFrame(columns=list(FACTS))
    return pd.concat(rows).drop_duplicates("impl").reset_index(drop=True)


def _ours(found: pd.DataFrame) -> pd.Series:
    return found["origin"].astype(str).str.startswith(BUILTIN_PACKAGE + ".")


def _first(found: pd.DataFrame, chosen: pd.Series) -> str | None:
    names = found.loc[chosen.fillna(False).astype(bool), "impl"]
    return str(names.iloc[0]) if len(names) else None


def triton_path(stores: str, *tables: pd.DataFrame) -> str | None:
    """Our exact Triton path that stores ``stores`` (SP, S, none) among the tables' rows, as
    kernels.catalog.triton_path chooses it; None where the study ran none."""
    found = facts(*tables)
    exact = ~found["tile_local"].astype(bool) & found["triton"].astype(bool)
    return _first(found, _ours(found) & exact & (found["stores"] == stores))


def tile_local_path(*tables: pd.DataFrame) -> str | None:
    """Our tile-local softmax path (wrong on purpose), or None where the study ran none."""
    found = facts(*tables)
    return _first(found, _ours(found) & found["tile_local"].astype(bool))
