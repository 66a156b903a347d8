"""The policies package has no import cycle, function-level imports included, and one bootstrap."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

import recagent_gym
from recagent_gym.evaluation.metrics import summarize
from recagent_gym.policies.protocol import bootstrap_mean

PACKAGE = Path(recagent_gym.__file__).parent


def _imports(path: Path) -> set[str]:
    """Every ``recagent_gym`` module ``path`` imports, at any level of the file."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("recagent_gym"):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("recagent_gym"))
    return found


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_policies_modules_import_no_cycle():
    graph = {_module(p): _imports(p) for p in PACKAGE.rglob("*.py")}
    policies = sorted(m for m in graph if m.startswith("recagent_gym.policies"))

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), list(graph.get(start, ()))
        while todo:
            node = todo.pop()
            if node == goal:
                return True
            if node not in seen:
                seen.add(node)
                todo.extend(graph.get(node, ()))
        return False

    cycles = [m for m in policies if reaches(m, m)]
    assert cycles == [], f"import cycles through {cycles}"


def test_policies_bootstrap_is_the_evaluation_summarize():
    values = np.random.default_rng(3).normal(size=40)
    interval = bootstrap_mean(values, n_boot=500, seed=7)
    estimate = summarize(values, np.random.default_rng(7), bootstrap=500)
    assert (interval.mean, interval.low, interval.high, interval.n) == (
        estimate.mean,
        estimate.low,
        estimate.high,
        estimate.n,
    )
