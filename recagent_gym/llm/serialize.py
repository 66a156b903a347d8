"""Plain-data forms of the protocol's results, for the response cache and the recorder."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from recagent_gym.llm.protocol import Choice, Generation, Usage


def usage_to_dict(usage: Usage) -> dict[str, Any]:
    return asdict(usage)


def usage_from_dict(data: dict[str, Any]) -> Usage:
    return Usage(**data)


def generation_to_dict(generation: Generation) -> dict[str, Any]:
    return {
        "text": generation.text,
        "finish_reason": generation.finish_reason,
        "usage": usage_to_dict(generation.usage),
    }


def generation_from_dict(data: dict[str, Any]) -> Generation:
    return Generation(text=data["text"], finish_reason=data["finish_reason"], usage=usage_from_dict(data["usage"]))


def choice_to_dict(choice: Choice) -> dict[str, Any]:
    return {
        "index": choice.index,
        "option": choice.option,
        "scores": list(choice.scores) if choice.scores is not None else None,
        "extra": _plain(choice.extra),
        "usage": usage_to_dict(choice.usage),
    }


def choice_from_dict(data: dict[str, Any]) -> Choice:
    scores = data["scores"]
    return Choice(
        index=int(data["index"]),
        option=data["option"],
        scores=tuple(float(s) for s in scores) if scores is not None else None,
        usage=usage_from_dict(data["usage"]),
        extra=dict(data["extra"]),
    )


def _plain(value: Any) -> Any:
    """JSON-safe copy: tuples become lists, numpy scalars Python numbers, anything else its repr."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if hasattr(value, "item"):
        return value.item()
    return repr(value)
