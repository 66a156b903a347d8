"""Contract of the ``profile_generation`` prompt: an LLM writes a persona (name, gender, age, traits, career).

- **Build**: the user's favourite genres, a few watched titles and a plain description of their behaviour features;
  the prompt ends with ``Name:`` so a base model continues the profile (a generator should stop at a blank line).
- **Parse**: ``Key: value`` lines after the ``Name:`` that the prompt ends with; unknown keys are ignored.
- **Validate** each field: name 2-40 characters of letters, spaces, ``.'-``; gender ``female``/``male``/
  ``non-binary``; age an integer in 12..100; traits 1-5 comma-separated items of at most 30 characters; career
  2-60 characters.
- **Fallback**: every field that is missing or invalid is listed in ``problems``; the caller
  (:func:`recagent_gym.users.llm_profiles.generate_profiles`) takes the dataset-aligned value for it and counts it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from recagent_gym.prompts.template import load_template

FIELDS = ("name", "gender", "age", "traits", "career")
FEATURE_TEXT = {
    "Watcher": "watches a lot and rates what they watch",
    "Explorer": "searches for movies they heard of and explores new ones",
    "Critic": "demanding, criticises movies and recommendations",
    "Chatter": "chats with friends and trusts their recommendations",
    "Poster": "posts about movies publicly",
}
_NAME = re.compile(r"^[^\W\d_][\w .'\-]{1,39}$")
_GENDERS = {"female": "female", "male": "male", "woman": "female", "man": "male", "non-binary": "non-binary"}


def build(genres: Sequence[str], titles: Sequence[str], features: Sequence[str]) -> str:
    behaviour = "; ".join(FEATURE_TEXT[f] for f in features if f in FEATURE_TEXT) or "watches now and then"
    return load_template("profile_generation").render(
        genres=", ".join(genres) or "various", titles="; ".join(titles) or "nothing yet", behaviour=behaviour
    )


def parse(text: str) -> tuple[dict[str, object], list[str]]:
    """Valid fields of the continuation, and one problem per missing or invalid field."""
    raw: dict[str, str] = {}
    for number, line in enumerate(("Name:" + text).splitlines()):
        if not line.strip():
            if raw:
                break  # a blank line ends this profile; the model may go on with another
            continue
        key, sep, value = line.partition(":")
        key = key.strip().lower()
        if not sep or key in raw:
            if number > 0 and key in raw:
                break  # a second "Name:" starts the next profile
            continue
        raw[key] = value.strip()
    fields: dict[str, object] = {}
    problems: list[str] = []
    for key in FIELDS:
        if key not in raw or not raw[key]:
            problems.append(f"{key}: missing")
            continue
        try:
            fields[key] = _VALIDATORS[key](raw[key])
        except ValueError as exc:
            problems.append(f"{key}: {exc}")
    return fields, problems


def _name(value: str) -> str:
    if not _NAME.match(value):
        raise ValueError(f"{value[:50]!r} is not a plausible name")
    return value


def _gender(value: str) -> str:
    key = value.lower().strip(" .")
    if key not in _GENDERS:
        raise ValueError(f"{value[:30]!r} is not female, male or non-binary")
    return _GENDERS[key]


def _age(value: str) -> int:
    match = re.fullmatch(r"(\d{1,3})(?:\s*(?:years?(?: old)?)?)\.?", value.strip())
    if not match or not 12 <= int(match.group(1)) <= 100:
        raise ValueError(f"{value[:30]!r} is not an age in 12..100")
    return int(match.group(1))


def _traits(value: str) -> str:
    items = [t.strip(" .") for t in value.split(",") if t.strip(" .")]
    if not 1 <= len(items) <= 5 or any(len(t) > 30 for t in items):
        raise ValueError(f"{value[:60]!r} is not 1-5 short comma-separated traits")
    return ", ".join(items)


def _career(value: str) -> str:
    value = value.strip(" .")
    if not 2 <= len(value) <= 60:
        raise ValueError(f"{value[:70]!r} is not a career of 2-60 characters")
    return value


_VALIDATORS = {"name": _name, "gender": _gender, "age": _age, "traits": _traits, "career": _career}
