"""How a chat server is asked to pick one of several options, and how its reply is matched to one.

The options are listed as ``- label`` lines after the prompt (:data:`CHOICE_INSTRUCTION`); an answer that names none
of them gets one re-ask (:data:`REASK_INSTRUCTION`). Where the server supports structured outputs the reply is
constrained by a JSON schema instead (:func:`choice_response_format`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

CHOICE_INSTRUCTION = "\n\nAnswer with exactly one of these options, and nothing else:\n{options}"
REASK_INSTRUCTION = (
    "\n\nYour previous answer {answer!r} is not one of the options. Reply with exactly one of:\n{options}"
)


def option_labels(options: Sequence[str]) -> list[str]:
    """What the server sees and answers: the options without outer whitespace, or numbers if that merges two."""
    labels = [option.strip() for option in options]
    if len(set(labels)) < len(labels) or not all(labels):
        labels = [str(i + 1) for i in range(len(options))]
    return labels


def match_option(answer: str, labels: list[str]) -> int | None:
    """The label an answer names (quotes, final punctuation and case aside), or None."""
    text = answer.strip().strip("\"'`").strip()
    text = text.rstrip(".!").strip()
    for i, label in enumerate(labels):
        if text == label:
            return i
    lowered = [label.lower() for label in labels]
    if lowered.count(text.lower()) == 1:
        return lowered.index(text.lower())
    return None


def choice_response_format(labels: list[str]) -> dict[str, Any]:
    """The ``response_format`` that constrains a reply to ``{"choice": <one of labels>}``."""
    schema = {
        "type": "object",
        "properties": {"choice": {"type": "string", "enum": labels}},
        "required": ["choice"],
        "additionalProperties": False,
    }
    return {"type": "json_schema", "json_schema": {"name": "choice", "strict": True, "schema": schema}}


def parse_json_choice(content: str, labels: list[str]) -> int | None:
    """The label a structured reply chose, or None when it is not such a reply."""
    try:
        value = json.loads(content)
    except json.JSONDecodeError:
        return None
    if isinstance(value, dict) and isinstance(value.get("choice"), str) and value["choice"] in labels:
        return labels.index(value["choice"])
    return None
