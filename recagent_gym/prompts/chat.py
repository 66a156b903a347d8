"""Contract of ``templates/chat.txt``: one utterance of a chat between two friends about movies.

Build: the speaker's social profile, memory and recent movies, the friend's name and the dialogue so far; the model
continues after ``<name>:``. Generate with a newline stop. Validate: a line of at least two words, not an echo, at
most :data:`MAX_CHARS` characters. Fallback (after one re-ask): a template line naming one of the speaker's recent
movies (so the friend can still hear about it); counted.
"""

from __future__ import annotations

from collections.abc import Sequence

from recagent_gym.prompts.free_text import clean_answer
from recagent_gym.prompts.template import load_template

MAX_CHARS = 240
STOP: tuple[str, ...] = ("\n",)


def build(
    *, profile: str, memory: str, name: str, friend: str, recent: str, clock: str, dialogue: Sequence[str]
) -> str:
    text = "".join(f"{line}\n" for line in dialogue)
    return load_template("chat").render(
        profile=profile, memory=memory, name=name, friend=friend, recent=recent, clock=clock, dialogue=text
    )


def validate(text: str, prompt: str) -> str | None:
    return clean_answer(text, prompt, max_chars=MAX_CHARS, min_words=2)


def fallback(*, recent_titles: Sequence[str], turn: int) -> str:
    if not recent_titles:
        return "I have not watched anything good lately. Any tips?"
    title = recent_titles[turn % len(recent_titles)]
    return f"I watched {title} recently. Have you seen it?"
