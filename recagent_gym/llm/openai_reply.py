"""The body of an OpenAI-compatible chat completion, checked where it enters: shape, types, and safe text.

A server (or a proxy in front of it) can answer 200 with anything: ``choices: [{}]``, ``message: null``,
``content: 123``, ``usage.prompt_tokens: "many"``, ``choices: "abc"``, or no JSON at all. :func:`parse_completion`
turns such a body into :class:`MalformedReply` (the backend retries it, then raises ``LLMError``) instead of an
``AttributeError`` deep in a caller, or an int passed on as text. A missing or null ``usage`` is allowed (several
local servers omit it) and counts zero tokens.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from recagent_gym.llm.text import clean_text


class MalformedReply(ValueError):
    """A 200 reply whose body is not a chat completion; the message says which part is wrong."""


@dataclass(frozen=True)
class Completion:
    """The parts of a chat completion the backend uses, typed and cleaned."""

    content: str
    refusal: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0


def _optional_text(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise MalformedReply(f"{where} is {type(value).__name__}, expected a string or null")
    return clean_text(value)


def _tokens(usage: dict[str, Any], key: str) -> int:
    value = usage.get(key)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise MalformedReply(f"usage.{key} is {value!r}, expected a non-negative integer")
    return value


def parse_completion(body: bytes | str) -> Completion:
    """The first choice of a chat completion body, or :class:`MalformedReply`."""
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MalformedReply(f"body is not JSON ({type(exc).__name__})") from None
    except RecursionError:
        raise MalformedReply("body is nested too deeply") from None
    if not isinstance(data, dict):
        raise MalformedReply(f"body is a JSON {type(data).__name__}, expected an object")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        raise MalformedReply(f"choices is {type(choices).__name__ if choices else repr(choices)}, expected a list")
    first = choices[0]
    if not isinstance(first, dict):
        raise MalformedReply(f"choices[0] is {type(first).__name__}, expected an object")
    message = first.get("message")
    if not isinstance(message, dict):
        raise MalformedReply(f"choices[0].message is {type(message).__name__}, expected an object")
    content = _optional_text(message.get("content"), "choices[0].message.content")
    refusal = _optional_text(message.get("refusal"), "choices[0].message.refusal")
    finish_reason = _optional_text(first.get("finish_reason"), "choices[0].finish_reason")
    usage = data.get("usage")
    if usage is None:
        usage = {}
    elif not isinstance(usage, dict):
        raise MalformedReply(f"usage is {type(usage).__name__}, expected an object")
    return Completion(
        content=content or "",
        refusal=refusal or None,
        finish_reason=finish_reason,
        prompt_tokens=_tokens(usage, "prompt_tokens"),
        completion_tokens=_tokens(usage, "completion_tokens"),
    )
