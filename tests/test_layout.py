"""The package's layers: the library below (each unit imports only lower layers), the runs above, no cycle of
modules or of packages, the env faces and the simulator apart, the kernel free of gymnasium and the only caller of
the users' batched step. The graph is built from the source (every ``import``, lazy ones inside functions
included); there is no exemption list."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

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


LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors",),
    ("settings_section", "actions"),
    ("data",),
    ("llm",),
    ("prompts",),
    ("memory", "social"),
    ("recommenders",),
    ("users",),
    ("session",),
    ("envs",),
    ("policies",),
    ("", "__main__", "runs"),
)
"""The library from the bottom up, then the runs. A unit (a package, or a module at the top of recagent_gym)
imports only units of lower layers; units of one layer do not import each other. ``""`` is the package's
``__init__`` (it registers the envs). The runs (``recagent_gym/runs/<unit>``: the command line, the root
configuration, data and LLM commands, evaluation, the simulator, the dashboard, policy training and comparison,
distillation) alone read the root ``Config`` and compose the library; they may import each other, without a
cycle."""

RANK = {unit: level for level, units in enumerate(LAYERS) for unit in units}


def unit_of(module: str) -> str:
    """``recagent_gym.users.agent.model`` -> ``users``; ``recagent_gym.runs.evaluation.x`` -> ``runs.evaluation``."""
    parts = module.split(".")[1:]
    if not parts:
        return ""
    if parts[0] == "runs" and len(parts) > 1:
        return f"runs.{parts[1]}"
    return parts[0]


def unit_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    units: dict[str, set[str]] = {}
    for module, targets in graph.items():
        units.setdefault(unit_of(module), set())
        for target in targets:
            if unit_of(target) != unit_of(module):
                units[unit_of(module)].add(unit_of(target))
                units.setdefault(unit_of(target), set())
    return units


def test_every_unit_has_a_layer() -> None:
    assert sorted(u for u in unit_graph(import_graph()) if u.split(".")[0] not in RANK) == []


def test_the_library_imports_only_lower_layers_and_never_a_run() -> None:
    graph = import_graph()
    upward = [
        (module, target)
        for module, targets in graph.items()
        for target in targets
        if unit_of(module) != unit_of(target)
        and RANK[unit_of(module).split(".")[0]] < RANK["runs"]
        and RANK[unit_of(target).split(".")[0]] >= RANK[unit_of(module).split(".")[0]]
    ]
    assert sorted(upward) == []


@pytest.mark.slow
def test_no_package_cycle() -> None:
    assert cycles(unit_graph(import_graph())) == []


def test_the_layer_check_sees_an_upward_import() -> None:
    graph = {"recagent_gym.users.x": {"recagent_gym.runs.config.root"}, "recagent_gym.runs.config.root": set()}
    units = unit_graph(graph)
    assert units == {"users": {"runs.config"}, "runs.config": set()}
    assert RANK["runs"] > RANK["users"]


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


@pytest.mark.slow
def test_no_import_cycle_anywhere_in_the_package() -> None:
    assert cycles(import_graph()) == []


def test_the_cycle_finder_finds_a_three_module_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


@pytest.mark.slow
def test_the_kernel_is_the_only_caller_of_respond_batch_outside_users() -> None:
    """No second session loop: outside users/ only the kernel asks users for a batch of responses (a user-model
    wrapper's own ``respond_batch`` or ``respond`` may delegate to the model it wraps)."""
    callers = []
    for path in ROOT.rglob("*.py"):
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith("users/") or relative == "session/kernel.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        delegating = {
            id(node)
            for function in ast.walk(tree)
            if isinstance(function, ast.FunctionDef) and function.name in ("respond", "respond_batch")
            for node in ast.walk(function)
        }
        for node in ast.walk(tree):
            call = isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            if call and node.func.attr == "respond_batch" and id(node) not in delegating:
                callers.append(f"{relative}:{node.lineno}")
    assert callers == []
