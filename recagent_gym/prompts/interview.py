"""Contract of ``templates/interview.txt``: the agent answers a free question in character (intervention).

Validate: a line of words, not an echo, at most :data:`MAX_CHARS` characters. Fallback (after one re-ask): a fixed
sentence saying the agent has no answer, flagged as a fallback by the caller; counted.
"""

from __future__ import annotations

from recagent_gym.prompts.free_text import clean_answer
from recagent_gym.prompts.template import load_template

MAX_CHARS = 400
STOP: tuple[str, ...] = ("\nInterviewer:", "\n\n")
FALLBACK = "I don't know what to say about that."


def build(*, profile: str, memory: str, name: str, clock: str, question: str) -> str:
    return load_template("interview").render(profile=profile, memory=memory, name=name, clock=clock, question=question)


def validate(text: str, prompt: str) -> str | None:
    return clean_answer(text, prompt, max_chars=MAX_CHARS)
