"""The package's layers: no import cycle anywhere, the env faces and the simulator apart, the kernel free of
gymnasium. The graph is built from the source (every ``import``, lazy ones inside functions included)."""

from __future__ import annotations

import ast
from pathlib import Path

import recagent_gym

ROOT = Path(recagent_gym.__file__).parent


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """``module -> modules of the package it imports`` (an import of a package counts as one of its __init__)."""
    modules = {module_name(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    base = ".".join([*parts[: len(parts) - node.level + 1], base]).strip(".")
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def imports_between(graph: dict[str, set[str]], a: str, b: str) -> list[tuple[str, str]]:
    return sorted((m, t) for m, ts in graph.items() for t in ts if m.startswith(a) and t.startswith(b))


def test_envs_and_simulator_do_not_import_each_other() -> None:
    graph = import_graph()
    assert imports_between(graph, "recagent_gym.envs", "recagent_gym.runs.simulator") == []
    assert imports_between(graph, "recagent_gym.runs.simulator", "recagent_gym.envs") == []


def test_session_kernel_is_free_of_gymnasium_and_of_its_faces() -> None:
    for path in (ROOT / "session").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not [n for n in names if n.split(".")[0] in ("gymnasium", "stable_baselines3")], path
    graph = import_graph()
    for face in ("envs", "simulator", "evaluation", "policies"):
        assert imports_between(graph, "recagent_gym.session", f"recagent_gym.{face}") == []


def test_no_import_cycle_anywhere_in_the_package() -> None:
    assert cycles(import_graph()) == []


def test_the_cycle_finder_finds_a_three_module_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


LOWER_LAYERS = ("data", "llm", "memory", "social", "prompts", "recommenders", "session", "users")
"""Packages whose modules take their own section; only their command modules (and the transfer experiment, v0 and
v1, which assembles a whole run) read the root configuration."""

ASSEMBLERS = ("recagent_gym.runs.distill.transfer", "recagent_gym.runs.distill.transfer_v1")


def test_lower_layers_take_their_section_not_the_root_config() -> None:
    graph = import_graph()
    readers = [
        module
        for module, targets in graph.items()
        if module.split(".")[1:2] and module.split(".")[1] in LOWER_LAYERS
        and not module.endswith(".commands") and module not in ASSEMBLERS
        and any(t == "recagent_gym.runs.config" or t.startswith("recagent_gym.runs.config.") for t in targets)
    ]  # fmt: skip
    assert readers == []
