"""Contract of ``templates/post.txt``: a short post about movies, sent to all of the agent's friends.

Validate: a line of at least three words, not an echo, at most :data:`MAX_CHARS` characters. Fallback (after one
re-ask): a template post recommending the agent's most recent movie; counted.
"""

from __future__ import annotations

from collections.abc import Sequence

from recagent_gym.prompts.free_text import clean_answer
from recagent_gym.prompts.template import load_template

MAX_CHARS = 280
STOP: tuple[str, ...] = ("\n",)


def build(*, profile: str, memory: str, name: str, recent: str, clock: str) -> str:
    return load_template("post").render(profile=profile, memory=memory, name=name, recent=recent, clock=clock)


def validate(text: str, prompt: str) -> str | None:
    return clean_answer(text, prompt, max_chars=MAX_CHARS, min_words=3)


def fallback(*, recent_titles: Sequence[str]) -> str:
    if not recent_titles:
        return "Looking for a good movie to watch this week. Suggestions welcome!"
    return f"Just watched {recent_titles[0]}. Worth a look!"
