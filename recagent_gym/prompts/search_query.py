"""Contract of ``templates/search_query.txt``: a short catalogue search query written by the agent.

Used only with ``user.search_query_source: llm``; the default builds the query from a template (no LLM call).
Validate: 1..:data:`MAX_WORDS` words, at most :data:`MAX_CHARS` characters, not an echo. Fallback (after one
re-ask): :func:`template_query`; counted.
"""

from __future__ import annotations

from collections.abc import Sequence

from recagent_gym.prompts.free_text import clean_answer
from recagent_gym.prompts.template import load_template

MAX_CHARS = 80
MAX_WORDS = 10
STOP: tuple[str, ...] = ("\n",)


def build(*, profile: str, memory: str, name: str, hint: str) -> str:
    return load_template("search_query").render(profile=profile, memory=memory, name=name, hint=hint)


def hint(*, name: str, heard_title: str | None) -> str:
    """The prompt's hint of a recently heard title (``templates/search_query_hint.txt``, after a space), or ""."""
    if heard_title is None:
        return ""
    return " " + load_template("search_query_hint").render(name=name, title=heard_title).strip()


def validate(text: str, prompt: str) -> str | None:
    line = clean_answer(text, prompt, max_chars=MAX_CHARS)
    if line is None or len(line.split()) > MAX_WORDS:
        return None
    return line


def template_query(*, heard_title: str | None, interests: Sequence[str]) -> str:
    """A heard title when there is one, else the user's interests (``"comedy drama movies"``), else ``"movies"``."""
    if heard_title:
        return heard_title
    if interests:
        return " ".join(g.lower() for g in interests[:2]) + " movies"
    return "movies"
