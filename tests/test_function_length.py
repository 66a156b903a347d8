"""Size limits: no function over 60 lines in the layers a step runs through (session/, envs/ and the simulator,
runs/simulator/), no file over 450 lines anywhere in the package (a function is counted from its ``def`` line to its
last line, docstring included; nested functions count on their own too)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import recagent_gym

PACKAGE = Path(recagent_gym.__file__).parent
MAX_FUNCTION_LINES = 60
MAX_FILE_LINES = 450


def long_functions(folder: str) -> list[str]:
    found = []
    for path in sorted((PACKAGE / folder).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name} ({length} lines)")
    return found


@pytest.mark.parametrize("folder", ["session", "envs", "runs/simulator"])
def test_no_function_over_60_lines(folder: str) -> None:
    assert (PACKAGE / folder).is_dir()
    assert long_functions(folder) == []


def test_no_file_over_450_lines() -> None:
    long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_FILE_LINES:
            long.append(f"{path.relative_to(PACKAGE)} ({lines} lines)")
    assert long == []
