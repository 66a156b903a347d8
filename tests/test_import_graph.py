"""The package's import graph, read from the source (imports inside functions count too)."""

from __future__ import annotations

import ast
from pathlib import Path

import recagent_gym

PACKAGE = Path(recagent_gym.__file__).parent
KERNEL_SIDE = ("session", "envs", "config", "recommenders", "users.factory", "users.protocol", "section")
"""The modules whose imports this suite guards (the session kernel, its faces and the config assembler)."""


def import_graph() -> dict[str, set[str]]:
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = ("recagent_gym", *path.relative_to(PACKAGE).with_suffix("").parts)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                names = [f"{base}.{a.name}" for a in node.names] + [base]
            for name in names:
                target = owner(name) if name.startswith("recagent_gym") else None
                if target and target != module:
                    graph[module].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components of more than one module (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def _subpackage(module: str) -> str:
    return [*module.split("."), ""][1]


def _kernel_side(module: str) -> bool:
    return any(module == f"recagent_gym.{p}" or module.startswith(f"recagent_gym.{p}.") for p in KERNEL_SIDE)


def test_no_import_cycle_through_the_kernel_its_faces_or_the_config() -> None:
    offending = [sorted(c) for c in cycles(import_graph()) if any(_kernel_side(m) for m in c)]
    assert offending == []


def test_no_import_cycle_anywhere_in_the_package() -> None:
    assert [sorted(c) for c in cycles(import_graph())] == []


def test_envs_and_simulator_do_not_import_each_other() -> None:
    graph = import_graph()
    crossing = [
        (a, b)
        for a, targets in graph.items()
        for b in targets
        if {_subpackage(a), _subpackage(b)} == {"envs", "simulator"}
    ]
    assert crossing == []


def test_lower_layers_take_their_section_not_the_root_config() -> None:
    for module in ("recagent_gym.users.factory", "recagent_gym.recommenders.factory", "recagent_gym.session.kernel"):
        assert "recagent_gym.config" not in import_graph()[module], module


def test_the_cycle_finder_finds_a_three_module_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [{"a", "b", "c"}]
