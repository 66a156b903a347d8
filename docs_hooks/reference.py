"""MkDocs hook: the configuration and command-line reference pages, generated from the code at build time.

* ``reference/configuration.md``: every typed configuration section (pydantic models assembled by
  :class:`recagent_gym.runs.config.root.Config`), every field with its type, default and docstring;
* ``reference/cli.md``: every ``recagent-gym`` command's ``--help``, from the parser that the command line builds.

Neither page is committed: a field or flag added to the code appears on the next build, and one removed disappears.
"""

from __future__ import annotations

import argparse
import os
import re
import types
import typing
from typing import Any

CONFIG_PAGE = "reference/configuration.md"
CLI_PAGE = "reference/cli.md"


_ROLE = re.compile(r":(?:class|func|mod|meth|attr|data|obj|exc):<code>~?")


def on_page_content(html: str, **_: Any) -> str:
    """The docstrings' reStructuredText roles (``:class:`X```), which mkdocstrings leaves in front of the code span,
    as plain code spans."""
    return _ROLE.sub("<code>", html)


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for uri, text in ((CONFIG_PAGE, configuration_page()), (CLI_PAGE, cli_page())):
        files.append(File.generated(config, uri, content=text))
    return files


# ------------------------------------------------------------------------------------------------ configuration
def configuration_page() -> str:
    from recagent_gym.runs.config.root import Config

    lines = [
        "# Configuration reference",
        "",
        "Generated from the typed configuration sections at build time. A YAML file given to `--config` (or the name "
        "of a shipped one: `quickstart`, `simulate_small`, `agreement`, `rl_recsim`, ...) sets any of these keys; "
        "`--set SECTION.KEY=VALUE` overrides one. Unknown keys, wrong types and out-of-range values are errors that "
        "name the key.",
        "",
    ]
    for name, field in Config.model_fields.items():
        section: Any = field.annotation  # a Section subclass
        lines += [f"## `{name}`", "", _text(field.description), ""]
        lines += [f"Section class: `{section.__module__}.{section.__qualname__}`", ""]
        lines += ["| key | type | default | description |", "|---|---|---|---|"]
        for key, sub in section.model_fields.items():
            default = sub.get_default(call_default_factory=True, validated_data={})
            lines.append(
                f"| `{name}.{key}` | {_cell(_type_name(sub.annotation))} | {_cell(_default(default))} "
                f"| {_cell(_text(sub.description))} |"
            )
        lines.append("")
    return "\n".join(lines)


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(a) for a in args)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin is not None:
        inner = ", ".join(_type_name(a) for a in args)
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]"
    if annotation is type(None):
        return "None"
    return getattr(annotation, "__name__", str(annotation))


def _default(value: Any) -> str:
    if hasattr(value, "model_dump"):
        return "(section defaults)"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _text(doc: str | None) -> str:
    """A docstring as Markdown: reStructuredText roles and double backticks become code spans."""
    text = " ".join((doc or "").split())
    text = re.sub(r":(?:class|func|mod|meth|attr|data|obj):`~?([^`]+)`", r"`\1`", text)
    return text.replace("``", "`")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ") or "-"


# ------------------------------------------------------------------------------------------------ command line
def cli_page() -> str:
    from recagent_gym.runs.cli import build_parser

    os.environ["COLUMNS"] = "120"  # argparse wraps help to the terminal width
    lines = [
        "# Command-line reference",
        "",
        "Generated from the `recagent-gym` parser at build time: each command's `--help`. "
        "`python -m recagent_gym` is the same command.",
        "",
    ]
    for path, parser in _walk(build_parser(), []):
        title = " ".join(["recagent-gym", *path])
        lines += [f"{'#' * min(len(path) + 2, 4)} `{title}`", "", "```text", parser.format_help().rstrip(), "```", ""]
    return "\n".join(lines)


def _walk(parser: argparse.ArgumentParser, path: list[str]) -> typing.Iterator[tuple[list[str], Any]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _walk(sub, [*path, name])
