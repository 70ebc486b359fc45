"""A table's seal: what its writer wrote (rows, bytes, SHA-256), in <table>.seal.json beside
it, written after the table. A table cut at a row boundary still reads as a table, and the
pages would describe the short one ("at 1 length" where four were measured); held against
its seal, it is found, set aside and made again, as a damaged record is. A table without a
seal (its writer stopped between the two, or it was written by hand) is not trusted either."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
from pathlib import Path

SUFFIX = ".seal.json"


def seal_path(path: str | os.PathLike) -> Path:
    path = Path(path)
    return path.with_name(path.name + SUFFIX)


def _rows(path: Path, content: bytes) -> int | None:
    """Data rows: a CSV's lines after its header, a Parquet file's row count."""
    if path.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq

            return pq.ParquetFile(io.BytesIO(content)).metadata.num_rows
        except Exception:  # noqa: BLE001 (not Parquet: its hash says it changed)
            return None
    try:
        lines = list(csv.reader(io.StringIO(content.decode("utf-8"))))
    except (UnicodeDecodeError, csv.Error):
        return None
    return max(len([line for line in lines if line]) - 1, 0)


def fingerprint(path: str | os.PathLike) -> dict:
    path = Path(path)
    content = path.read_bytes()
    digest = hashlib.sha256(content).hexdigest()
    return {"table": path.name, "rows": _rows(path, content), "bytes": len(content), "sha256": digest}


def _count(found: dict) -> str:
    rows = found.get("rows")
    counted = f"{rows:,} row{'s' * (rows != 1)}, " if rows is not None else ""
    return counted + f"{found.get('bytes', 0):,} bytes"


def broken_seal(path: str | os.PathLike) -> str | None:
    """Why the table at ``path`` is not what its writer wrote, or None when it is."""
    seal = seal_path(path)
    try:
        sealed = json.loads(seal.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return f"has no seal ({seal.name}): its writer did not finish it, or it was written by hand"
    except (OSError, UnicodeDecodeError, ValueError) as err:
        return f"its seal {seal.name} cannot be read ({err})"
    now = fingerprint(path)
    if not isinstance(sealed, dict) or now["sha256"] == sealed.get("sha256"):
        return None if isinstance(sealed, dict) else f"its seal {seal.name} is not an object"
    return _difference(now, sealed, seal.name)


def _difference(now: dict, sealed: dict, seal: str) -> str:
    """What differs between the table and its seal: its counts where they do, else its
    content alone (the same rows and bytes, another SHA-256: edited in place)."""
    if any(now[part] != sealed.get(part) for part in ("rows", "bytes")):
        return (
            f"holds {_count(now)}, but its writer wrote {_count(sealed)} ({seal}): cut short or changed since"
        )
    theirs = sealed.get("sha256")
    if not isinstance(theirs, str) or not theirs:
        return (
            f"holds the {_count(now)} its writer wrote, but its seal {seal} records no SHA-256 to hold it to"
        )
    return (
        f"holds the {_count(now)} its writer wrote, but not their content: its SHA-256 is "
        f"{now['sha256'][:12]}…, its seal's ({seal}) {theirs[:12]}…: changed in place since"
    )
