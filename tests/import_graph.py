"""The import graph of the project's packages, read from the source (every import statement,
function-level ones included, without running anything), and its circles: the groups of
modules that import each other, directly or through others."""

from __future__ import annotations

import ast
from pathlib import Path


def modules(root: Path, packages: tuple[str, ...]) -> dict[str, Path]:
    """Dotted name → file, for every module of ``packages`` under ``root``."""
    found = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            name = ".".join(path.relative_to(root).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def _imported(module: str, is_package: bool, node: ast.AST) -> list[str]:
    """The dotted names an import statement names: modules, or a package's members."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:
        base = module.split(".")[: None if is_package else -1]
        base = base[: len(base) - (node.level - 1)]
        prefix = ".".join(base + ([node.module] if node.module else []))
    else:
        prefix = node.module or ""
    return [f"{prefix}.{alias.name}" for alias in node.names] + [prefix]


def graph(root: Path, packages: tuple[str, ...]) -> dict[str, set[str]]:
    """Module → the project's modules it imports (a name resolved to the longest module it
    starts with; a module's own packages, which Python imports before it, left out)."""
    known = modules(root, packages)
    edges = {}
    for module, path in known.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            for name in _imported(module, path.name == "__init__.py", node):
                while name and name not in known:
                    name = name.rpartition(".")[0]
                if name and name != module and not module.startswith(name + "."):
                    targets.add(name)
        edges[module] = targets
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every group of two or more modules that reach each other (Tarjan's strongly connected
    components), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(edges[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found
