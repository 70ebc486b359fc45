"""The files docs/layout.md names: its tree read back into paths (an entry's indentation
gives its folder; the lines that carry an entry's description on are skipped)."""

from __future__ import annotations

import re
from pathlib import Path

ENTRY = re.compile(r"^(?P<indent> {0,8})(?P<name>[\w./-]+)(?:\s{2,}|$)")


def named_paths(layout: str) -> set[str]:
    """Every path the tree names, folders ending in '/'."""
    block = layout.split("```")[1]
    folders: list[tuple[int, str]] = []  # (indent, path) of the folders above the line
    found = set()
    for line in block.splitlines():
        entry = ENTRY.match(line)
        if entry is None:
            continue
        indent, name = len(entry["indent"]), entry["name"]
        folders = [(i, f) for i, f in folders if i < indent]
        path = (folders[-1][1] if folders else "") + name
        found.add(path)
        if name.endswith("/"):
            folders.append((indent, path))
    return found


def modules(root: Path, packages: tuple[str, ...]) -> set[str]:
    """Every Python file of ``packages`` but the packages' empty markers (an __init__.py with
    nothing but a docstring or nothing)."""
    found = set()
    for package in packages:
        for path in (root / package).rglob("*.py"):
            if path.name == "__init__.py" and _empty(path):
                continue
            found.add(path.relative_to(root).as_posix())
    return found


def _empty(path: Path) -> bool:
    import ast

    body = ast.parse(path.read_text(encoding="utf-8")).body
    return all(isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) for node in body)
