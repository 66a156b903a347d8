"""Contract of ``templates/feeling.txt``: one line on how the agent felt about a movie it just watched.

Build: the agent's feeling-relevant profile and the item line. Generate with a newline stop. Validate: one line of
words, not an echo of the prompt, at most :data:`MAX_CHARS` characters (cut at a word). Fallback (after one re-ask):
a template sentence from the agent's own decision score (liked / found it okay / did not enjoy); counted.
"""

from __future__ import annotations

from recagent_gym.prompts.free_text import clean_answer
from recagent_gym.prompts.template import load_template

MAX_CHARS = 200
STOP: tuple[str, ...] = ("\n",)


def build(*, profile: str, name: str, item: str) -> str:
    return load_template("feeling").render(profile=profile, name=name, item=item)


def validate(text: str, prompt: str) -> str | None:
    return clean_answer(text, prompt, max_chars=MAX_CHARS, min_words=2)


def fallback(*, title: str, score: float) -> str:
    """A neutral sentence whose tone follows the decision score (positive: liked)."""
    if score > 1.0:
        return f"I really liked {title}."
    if score > -1.0:
        return f"{title} was okay."
    return f"I did not enjoy {title} much."
