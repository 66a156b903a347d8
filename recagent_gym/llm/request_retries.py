"""When a chat request is worth another attempt, and how long to wait before it.

An attempt that fails in a retryable way (429, 5xx, 408/409, a timeout, a dropped connection, a malformed body)
raises :class:`RetryableFailure`; the server's own wish (``retry-after-ms`` or ``Retry-After``) is honoured up to
``backoff_max_s``, else the wait grows exponentially with "equal jitter" (half fixed, half random) so that
synchronized clients spread out.
"""

from __future__ import annotations

import email.utils
import time
from typing import Any

import numpy as np


class RetryableFailure(Exception):
    """An attempt failed in a way worth retrying; ``retry_after`` is the server's wish in seconds, if any."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


def retry_after_seconds(headers: Any) -> float | None:
    """Seconds from ``retry-after-ms`` or ``Retry-After`` (delta seconds or an HTTP date)."""
    if headers is None:
        return None
    try:
        millis = headers.get("retry-after-ms")
        if millis is not None:
            return max(0.0, float(millis) / 1000.0)
        value = headers.get("retry-after")
    except (AttributeError, ValueError):
        return None
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def backoff_delay(
    attempt: int, retry_after: float | None, *, base_s: float, cap_s: float, jitter: np.random.Generator
) -> float:
    """Seconds to wait before retry ``attempt + 1``: the server's ``retry_after`` (capped), else exponential."""
    if retry_after is not None:
        return min(retry_after, cap_s)
    base = base_s * (2.0**attempt)
    return float(min(cap_s, base * (0.5 + jitter.random())))  # "equal jitter": spreads synchronized retries
