"""Where a path's name is written as a string: every string constant of a package's modules
(docstrings aside) that is one of the given names, with the module, line and name. Generic
code asks a path's registration what it is, so a built-in name belongs only in its own
folder (``kernels/paths/<folder>``, whose registration is named by it) and in the spec."""

from __future__ import annotations

import ast
from pathlib import Path


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the constants that are docstrings (of the module, a class or a function)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def written_names(root: Path, packages: tuple[str, ...], names: set[str]) -> list[tuple[str, int, str]]:
    """(module path, line, name) for each string constant in ``packages`` that is a name."""
    found = []
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            skip = _docstrings(tree)
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and node.value in names and id(node) not in skip:
                    found.append((path.relative_to(root).as_posix(), node.lineno, node.value))
    return found


def own_place(module: str, name: str, origin: str) -> bool:
    """Whether ``module`` may write ``name``: the spec's defaults, or the folder (or module)
    of the path that registered it (``origin``: kernels.paths.<folder>...)."""
    if module == "kernels/spec.py":
        return True
    parts = origin.split(".")
    home = "/".join(parts[:3])
    return module.startswith(home + "/") or module == home + ".py"
