"""The README and the documentation site: short front door, pages that exist, references generated from the code,
results pages that say where their figures come from. (The strict site build itself runs in CI, .ci/run.)"""

from __future__ import annotations

import argparse
import importlib.util
import re
from pathlib import Path

import yaml

from recagent_gym.runs.cli import build_parser
from recagent_gym.runs.config.root import Config
from recagent_gym.runs.provenance import MARKER

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def _hook():
    spec = importlib.util.spec_from_file_location("docs_reference_hook", ROOT / "docs_hooks" / "reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_is_a_front_door() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    for target in re.findall(r"\]\((?!https?://)([^)#\s]+)", text):
        assert (ROOT / target).exists(), f"README links to a missing file: {target}"


def _nav_pages(node: object) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [page for item in node for page in _nav_pages(item)]
    if isinstance(node, dict):
        return [page for value in node.values() for page in _nav_pages(value)]
    return []


def test_every_nav_page_exists_or_is_generated() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    hook = _hook()
    generated = {hook.CONFIG_PAGE, hook.CLI_PAGE}
    for page in _nav_pages(config["nav"]):
        assert page in generated or (DOCS / page).is_file(), page


def test_configuration_reference_has_every_field() -> None:
    text = _hook().configuration_page()
    for name, field in Config.model_fields.items():
        for key in field.annotation.model_fields:  # type: ignore[union-attr]
            assert f"| `{name}.{key}` |" in text, f"{name}.{key}"


def _commands(parser: argparse.ArgumentParser, path: list[str]) -> list[str]:
    found = [" ".join(["recagent-gym", *path])]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _commands(sub, [*path, name])
    return found


def test_cli_reference_has_every_command_and_flag() -> None:
    text = _hook().cli_page()
    for command in _commands(build_parser(), []):
        assert f"`{command}`" in text, command
    assert "--results-page PATH" in text


def test_every_results_page_has_its_provenance_or_says_it_has_none() -> None:
    pages = [p for p in (DOCS / "results").glob("*.md") if p.name != "index.md"]
    assert pages
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert MARKER in text or "Recorded by an earlier version" in text, page.name
        if MARKER in text:
            assert "| command | `recagent-gym " in text and "| commit | `" in text, page.name
