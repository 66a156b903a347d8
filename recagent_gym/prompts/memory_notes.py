"""The text an agent's memory receives about what happened (``templates/memory_note_*.txt``): watches, searches,
feelings, chats, posts and messages. Notes are records, not prompts: no model reads them back as instructions."""

from __future__ import annotations

from recagent_gym.prompts.template import load_template


def _note(template: str, **values: object) -> str:
    return load_template(f"memory_note_{template}").render(**values).strip()


def watched(*, name: str, title: str) -> str:
    return _note("watched", name=name, title=title)


def searched(*, name: str, query: str) -> str:
    return _note("searched", name=name, query=query)


def feeling(*, name: str, title: str, feeling: str, rating: float | None) -> str:
    return _note(
        "feeling", name=name, title=title, feeling=feeling, rating="" if rating is None else f" (rated {rating:g}/5)"
    )


def chat(*, name: str, other: str, transcript: str) -> str:
    return _note("chat", name=name, other=other, transcript=transcript)


def post(*, name: str, text: str) -> str:
    return _note("post", name=name, text=text)


def message(*, sender: str, receiver: str, text: str) -> str:
    return _note("message", sender=sender, receiver=receiver, text=text)
