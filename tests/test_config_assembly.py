"""The configuration as an assembler: each component defines its section on :mod:`recagent_gym.settings_section`, the
root assembles them, and a section imports without its package's code, the root or any other component (no cycle)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from recagent_gym.runs.config import Config
from recagent_gym.settings_section import Section

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "recagent_gym"
SECTION_MODULES = sorted(
    ".".join(path.relative_to(ROOT).with_suffix("").parts)
    for path in (*PACKAGE.glob("*/config.py"), *PACKAGE.glob("runs/config/*_section.py"))
)
HEAVY = ("pandas", "torch", "sentence_transformers", "llama_cpp", "faiss", "stable_baselines3")
ALLOWED = {"recagent_gym.settings_section", "recagent_gym.llm.config"}  # the base, and the judge's LLM section


def _fresh(code: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_every_section_is_assembled_by_the_root() -> None:
    sections = {field.annotation for field in Config.model_fields.values()}
    assert len(SECTION_MODULES) == len(sections) == 10
    assert all(isinstance(s, type) and issubclass(s, Section) for s in sections)
    assert {s.__module__ for s in sections} == set(SECTION_MODULES)


@pytest.mark.parametrize("module", [*SECTION_MODULES, "recagent_gym.runs.config"])
@pytest.mark.slow
def test_a_section_imports_first_without_heavy_code(module: str) -> None:
    loaded = _fresh(f"import sys, {module}; print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    assert loaded == "[]"


@pytest.mark.parametrize("module", SECTION_MODULES)
def test_a_section_imports_only_the_base(module: str) -> None:
    tree = ast.parse((ROOT / (module.replace(".", "/") + ".py")).read_text(encoding="utf-8"))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert {m for m in imported if m.startswith("recagent_gym")} <= ALLOWED


def test_no_lazy_module_getattr_in_the_config_path() -> None:
    for init in (PACKAGE / "runs" / "config" / "__init__.py", *PACKAGE.glob("*/__init__.py")):
        tree = ast.parse(init.read_text(encoding="utf-8"))
        names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        assert "__getattr__" not in names, init


def test_one_default_episode_length() -> None:
    import gymnasium as gym

    from recagent_gym.envs import ENV_ID
    from recagent_gym.envs.config import DEFAULT_MAX_EPISODE_STEPS, EnvConfig

    assert gym.spec(ENV_ID).max_episode_steps == DEFAULT_MAX_EPISODE_STEPS == EnvConfig().max_pages
    text = "\n".join(p.read_text(encoding="utf-8") for p in PACKAGE.rglob("*.py"))
    assert text.count("DEFAULT_MAX_EPISODE_STEPS =") == 1
