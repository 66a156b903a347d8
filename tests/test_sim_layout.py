"""Layering limits of the simulator and the memory writer (issue #29): files and functions stay readable."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "recagent_gym"


def test_runner_and_writer_stay_under_450_lines() -> None:
    for path in (PACKAGE / "simulator" / "runner.py", PACKAGE / "memory" / "writer.py"):
        assert len(path.read_text().splitlines()) < 450, path


def test_no_simulator_function_exceeds_60_lines() -> None:
    long = []
    for path in sorted((PACKAGE / "simulator").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                if lines > 60:
                    long.append(f"{path.name}:{node.name} ({lines} lines)")
    assert not long, long
