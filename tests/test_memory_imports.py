"""Issue 14: no import cycle inside ``recagent_gym.memory`` (function-level and type-checking imports included)."""

from __future__ import annotations

import ast
from pathlib import Path

import recagent_gym.memory as memory_package

PACKAGE = "recagent_gym.memory"


def _imports(path: Path) -> set[str]:
    """Every module of the package imported anywhere in ``path`` (any depth, any branch)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == PACKAGE:
                found |= {f"{PACKAGE}.{alias.name}" for alias in node.names}
            elif node.module.startswith(PACKAGE + "."):
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith(PACKAGE + ".")}
    return found


def test_memory_modules_import_each_other_without_a_cycle() -> None:
    folder = Path(memory_package.__file__).parent
    graph = {f"{PACKAGE}.{p.stem}": _imports(p) for p in folder.glob("*.py") if p.stem != "__init__"}
    assert f"{PACKAGE}.writer" in graph[f"{PACKAGE}.agent_memory"]  # the memory uses the writer ...
    state: dict[str, int] = {}  # ... and nothing leads back: depth-first search for a back edge

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            assert state.get(nxt) != 1, f"import cycle: {' -> '.join([*trail, node, nxt])}"
            if nxt not in state:
                visit(nxt, [*trail, node])
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [])
