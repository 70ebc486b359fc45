"""The index and every file it links to, copied into one folder with the same relative
paths. Snakemake's report packs such a folder as it is (`report(directory(...),
htmlindex="index.html")`), so in report.zip, offline, the index's links still work."""

from __future__ import annotations

import os
import shutil
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("href", "src") and value:
                self.found.append(value)


def local_links(page: str) -> list[str]:
    """The page's links to files beside it: no scheme, no host, no bare #anchor; each once,
    in order, without its #fragment or ?query."""
    parser = _Links()
    parser.feed(page)
    local = []
    for link in parser.found:
        parts = urlsplit(link)
        if parts.scheme or parts.netloc or not parts.path:
            continue
        local.append(unquote(parts.path))
    return list(dict.fromkeys(local))


def pack(index: str | os.PathLike, out: str | os.PathLike) -> list[str]:
    """Copy ``index`` and what it links to (relative to its folder) into ``out``; returns
    the links whose file is missing (they are named on stderr and left out). A link that
    leaves the index's folder is refused: the packed folder would not hold it."""
    index, out = Path(index), Path(out)
    root = index.parent.resolve()
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(index, out / "index.html")
    missing = []
    for link in local_links(index.read_text(encoding="utf-8")):
        source = (root / link).resolve()
        if not source.is_relative_to(root):
            raise ValueError(f"{index}: the link {link!r} leaves {root}, so it cannot be packed")
        if not source.is_file():
            missing.append(link)
            print(f"warning: {index} links {link}, which does not exist; not packed", file=sys.stderr)
            continue
        target = out / source.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
    return missing
