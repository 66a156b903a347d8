"""Secrets out of messages: which configuration keys hold secrets, and their values replaced by ``***``.

A key is secret when its field is typed :class:`~pydantic.SecretStr` (``llm.api_keys``), found by walking the
section models, or when its name says so (``*api_key*``, ``*secret*``, ``*password*``, ``*key``, ``*keys``,
``*token``) for input that matches no field, such as a misspelt ``llm.api_key``.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator, Sequence
from typing import Any

from pydantic import BaseModel, SecretStr

MASK = "***"
_SECRET_WORDS = ("api_key", "apikey", "secret", "password", "passwd")
_SECRET_ENDINGS = ("key", "keys", "token")  # not ``max_tokens``
_NOT_SECRET = ("api_key_env",)  # names an environment variable, holds no secret


def secret_paths(model: type[BaseModel], prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """Dotted paths (as tuples) of every :class:`SecretStr` field under ``model``."""
    paths: set[tuple[str, ...]] = set()
    for name, field in model.model_fields.items():
        path = (*prefix, name)
        for kind in _types(field.annotation):
            if kind is SecretStr:
                paths.add(path)
            elif isinstance(kind, type) and issubclass(kind, BaseModel):
                paths |= secret_paths(kind, path)
    return paths


def _types(annotation: Any) -> Iterator[Any]:
    yield annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType, list, tuple, dict, typing.Annotated):
        for arg in typing.get_args(annotation):
            yield from _types(arg)


def is_secret(path: Sequence[str], secrets: set[tuple[str, ...]]) -> bool:
    """Whether the key at ``path`` (or one of its parents) is secret."""
    parts = tuple(str(p) for p in path)
    if any(parts[: len(s)] == s for s in secrets):
        return True
    names = [p for p in parts if not p.isdigit()]
    return bool(names) and secret_name(names[-1])


def secret_name(name: str) -> bool:
    """Whether a key's name says that it holds a secret."""
    name = name.lower()
    if name in _NOT_SECRET:
        return False
    return any(w in name for w in _SECRET_WORDS) or name.endswith(_SECRET_ENDINGS)


def redact_value(value: Any, path: Sequence[str], secrets: set[tuple[str, ...]]) -> Any:
    """``value`` found at ``path`` with every secret inside it masked."""
    if is_secret(path, secrets):
        return MASK
    if isinstance(value, SecretStr):
        return MASK
    if isinstance(value, dict):
        return {k: redact_value(v, (*path, str(k)), secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_value(v, (*path, str(i)), secrets) for i, v in enumerate(value)]
    return value


def redact_override(text: str, secrets: set[tuple[str, ...]]) -> str:
    """``key=value`` with the value masked when the key, or a key inside a mapping value, is secret."""
    key, sep, _ = text.partition("=")
    if not sep:
        return MASK if any(w in text.lower() for w in (*_SECRET_WORDS, "sk-")) else text
    path = tuple(p for p in key.strip().split(".") if p)
    below = any(s[: len(path)] == path for s in secrets)  # e.g. ``llm={api_keys: [...]}``
    return f"{key}={MASK}" if below or is_secret(path, secrets) else text
