"""Text crossing the backend boundary, made safe to store, log and send back in the next prompt."""

from __future__ import annotations

import re

_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """``text`` with every lone UTF-16 surrogate replaced by U+FFFD (a split pair is joined into its character).

    A JSON reply may hold ``"\\ud83d"`` (half an emoji); Python decodes it into a string that cannot be encoded
    as UTF-8, so the next request quoting it, a log line or a checkpoint would fail far from the cause.
    """
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
