"""Prompt templates: one ``templates/<name>.txt`` file per prompt, with named ``{placeholders}``.

Each prompt's contract (build inputs, parse, validate, fall back) lives in a module beside this one, named after the
template. Rendering checks that exactly the template's placeholders are given, so a missing or misspelled input is
an error, not an empty string in the prompt.
"""

from __future__ import annotations

import string
from functools import cache
from pathlib import Path

TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"


class PromptError(ValueError):
    """A template is missing, or was rendered with missing or unknown placeholders."""


class PromptTemplate:
    """A template file with named placeholders, e.g. ``{profile}``; ``{{`` and ``}}`` are literal braces."""

    def __init__(self, name: str, text: str) -> None:
        self.name = name
        self.text = text
        self.fields = frozenset(
            field for _, field, _, _ in string.Formatter().parse(text) if field is not None and field != ""
        )

    def render(self, **values: object) -> str:
        given = set(values)
        missing = self.fields - given
        unknown = given - self.fields
        if missing or unknown:
            raise PromptError(
                f"prompt {self.name!r}: missing placeholders {sorted(missing)}, unknown {sorted(unknown)}"
            )
        return self.text.format(**values)


@cache
def load_template(name: str) -> PromptTemplate:
    """The template ``templates/<name>.txt`` (cached)."""
    path = TEMPLATE_DIR / f"{name}.txt"
    if not path.is_file():
        raise PromptError(f"no prompt template {name!r} (looked for {path})")
    return PromptTemplate(name, path.read_text(encoding="utf-8"))
