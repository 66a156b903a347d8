"""API keys: where they come from, and scrubbing them from anything printed, logged or saved."""

from __future__ import annotations

import logging
import os
import re
import threading

from pydantic import SecretStr

from recagent_gym.llm.config import LLMConfig

REDACTED = "***"
# Shapes of common provider keys, scrubbed even when the key was never registered here.
_KEY_PATTERN = re.compile(r"\b(?:sk|rk|pk)-[A-Za-z0-9_\-]{12,}")
_known: set[str] = set()
_lock = threading.Lock()


def register_secret(value: str) -> None:
    """Remember a secret so :func:`redact` removes it wherever it appears."""
    if len(value) >= 4:  # shorter strings would scrub ordinary words
        with _lock:
            _known.add(value)


def redact(text: str) -> str:
    """``text`` with every registered secret and key-shaped string replaced by ``***``."""
    with _lock:
        known = sorted(_known, key=len, reverse=True)
    for secret in known:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return _KEY_PATTERN.sub(REDACTED, text)


class RedactingFilter(logging.Filter):
    """Scrubs secrets from a log record's final message (its format arguments included) before any handler sees it."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        return True


_FILTER = RedactingFilter()


def redacting_logger(name: str) -> logging.Logger:
    """``logging.getLogger(name)`` with :class:`RedactingFilter` attached (once): for the modules that talk to
    servers, and for the HTTP client's own logger, whose request lines carry the URL."""
    logger = logging.getLogger(name)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
    return logger


def resolve_api_keys(config: LLMConfig) -> list[SecretStr]:
    """Keys from ``config.api_keys``, else from the environment variable ``config.api_key_env`` (comma-separated).

    Every key is registered for redaction. An empty list means no key was configured.
    """
    keys = [key for key in config.api_keys if key.get_secret_value().strip()]
    if not keys:
        raw = os.environ.get(config.api_key_env, "")
        keys = [SecretStr(part.strip()) for part in raw.split(",") if part.strip()]
    for key in keys:
        register_secret(key.get_secret_value())
    return keys
