"""Requests through the ``openai`` package's client (``llm.http_client: openai``, or a custom ``httpx`` client).

The package is imported inside these functions only: it costs seconds to import. Its errors are turned into those
of :mod:`~recagent_gym.llm.http_json` and :mod:`~recagent_gym.llm.request_retries`, so that the backend treats both
clients alike.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from recagent_gym.llm.http_json import HTTPStatusError
from recagent_gym.llm.request_retries import RetryableFailure


def sdk_clients(
    url: str | None, keys: Sequence[str], *, timeout_s: float, http_client_factory: Callable[[], Any] | None
) -> list[Any]:
    """One ``AsyncOpenAI`` client per key for the server at ``url``, its own retries off (counted by the caller)."""
    from openai import AsyncOpenAI

    return [
        AsyncOpenAI(
            api_key=key,
            base_url=url,
            timeout=timeout_s,
            max_retries=0,
            http_client=http_client_factory() if http_client_factory else None,
        )
        for key in keys
    ]


async def post_through_sdk(
    client: Any, model: str, timeout_s: float, messages: list[dict[str, str]], params: dict[str, Any]
) -> bytes:
    """The raw body of one chat completion request (read whole; the caller checks its shape)."""
    import openai

    try:
        raw = await client.chat.completions.with_raw_response.create(model=model, messages=messages, **params)
    except openai.APITimeoutError as exc:
        raise RetryableFailure(f"timed out (timeout_s={timeout_s:g} s)") from exc
    except openai.APIConnectionError as exc:
        raise RetryableFailure(f"connection failed ({type(exc.__cause__).__name__})") from exc
    except openai.APIResponseValidationError as exc:
        raise RetryableFailure("malformed response body") from exc
    except openai.APIStatusError as exc:
        raise HTTPStatusError(exc.status_code, exc.response.headers, exc.response.content) from exc
    return bytes(raw.http_response.content)  # read in full by the client (not a streamed request)
