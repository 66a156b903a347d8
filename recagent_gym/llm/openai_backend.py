"""Any OpenAI-compatible chat server (OpenAI, vLLM, Ollama, llama.cpp server) by ``base_url`` alone.

An async core (``agenerate``/``achoose``) sends the prompts of a batch concurrently, at most ``max_concurrency`` in
flight, cycling through the configured API keys (the paper's parallel keys). Each request is retried on 429, 5xx,
timeouts, dropped connections and malformed bodies with exponential backoff and jitter, honouring ``Retry-After``;
the client's own retries are off so that every attempt is counted here. Results come back in prompt order, one per
prompt; a request that fails for good raises a typed :class:`LLMError`.

``generate``/``choose`` are the synchronous facade: they run the coroutine on a private event loop in a background
thread, so they work from plain code and also from a thread that already runs an event loop (a notebook), where
they block that loop while they wait. The HTTP clients belong to the loop that first used them: use one backend
either through the synchronous facade or by awaiting the ``a``-methods from one event loop, not both.
"""

from __future__ import annotations

import asyncio
import email.utils
import itertools
import json
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, TypeVar

import numpy as np

from recagent_gym.llm.config import LLMConfig
from recagent_gym.llm.protocol import Choice, Generation, LLMError, Usage
from recagent_gym.llm.secrets import redact, resolve_api_keys
from recagent_gym.llm.seeding import derive_seed

log = logging.getLogger(__name__)
T = TypeVar("T")

# Local servers (vLLM, Ollama, llama.cpp) accept any key; the client library insists on one.
PLACEHOLDER_KEY = "no-key-needed"
CHOICE_INSTRUCTION = "\n\nAnswer with exactly one of these options, and nothing else:\n{options}"
REASK_INSTRUCTION = (
    "\n\nYour previous answer {answer!r} is not one of the options. Reply with exactly one of:\n{options}"
)


class Refusal(LLMError):
    """The server refused to answer (a content refusal), after the one re-ask where applicable."""


class InvalidChoice(LLMError):
    """The server's answer named none of the options, also after one re-ask; never coerced to an option."""


class _Retryable(Exception):
    """An attempt failed in a way worth retrying; ``retry_after`` is the server's wish in seconds, if any."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


def _retry_after_seconds(headers: Any) -> float | None:
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


class OpenAIBackend:
    """:class:`~recagent_gym.llm.protocol.LanguageModel` over the ``openai`` client; see the module docstring.

    Counters (plain data in :meth:`get_state`): ``requests`` (HTTP attempts), ``retries``, ``reasks``,
    ``schema_fallbacks``.
    """

    def __init__(self, config: LLMConfig, *, http_client_factory: Callable[[], Any] | None = None) -> None:
        keys = resolve_api_keys(config)
        if not keys and config.base_url is None:
            raise LLMError(
                f"no API key for {config.model}: set the environment variable {config.api_key_env} "
                "(several keys separated by commas) or llm.api_keys"
            )
        self.config = config
        self._keys = [k.get_secret_value() for k in keys] or [PLACEHOLDER_KEY]
        self._key_cycle = itertools.cycle(range(len(self._keys)))
        self._http_client_factory = http_client_factory
        self._use_schema = config.structured_output != "text"
        self._jitter = np.random.default_rng(derive_seed(config.seed, "backoff"))
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._clients: list[Any] | None = None
        self._semaphore: asyncio.Semaphore | None = None
        self._start_lock = threading.Lock()
        self.requests = 0
        self.retries = 0
        self.reasks = 0
        self.schema_fallbacks = 0

    @property
    def name(self) -> str:
        return f"openai:{self.config.model}"

    def __repr__(self) -> str:  # keys never appear here
        return (
            f"OpenAIBackend(model={self.config.model!r}, base_url={self.config.base_url!r}, "
            f"keys={len(self._keys)}, max_concurrency={self.config.max_concurrency})"
        )

    # -- event loop and clients -----------------------------------------------------------------------------------

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        with self._start_lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="recagent-openai", daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def _ensure_clients(self) -> list[Any]:
        # Created inside the loop that uses them: httpx connection pools belong to one event loop.
        if self._clients is None:
            from openai import AsyncOpenAI

            self._clients = [
                AsyncOpenAI(
                    api_key=key,
                    base_url=self.config.base_url,
                    timeout=self.config.timeout_s,
                    max_retries=0,
                    http_client=self._http_client_factory() if self._http_client_factory else None,
                )
                for key in self._keys
            ]
            self._semaphore = asyncio.Semaphore(self.config.max_concurrency)
        return self._clients

    def close(self) -> None:
        """Close the HTTP clients and stop the background loop."""
        if self._loop is None:
            return
        clients = self._clients or []

        async def shutdown() -> None:
            for client in clients:
                await client.close()

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._loop.close()
        self._loop, self._thread, self._clients = None, None, None

    # -- one request with retries ---------------------------------------------------------------------------------

    async def _complete(self, messages: list[dict[str, str]], **params: Any) -> tuple[Any, float]:
        """One chat completion with retries; returns the response and its latency (the last attempt's)."""
        import openai

        clients = self._ensure_clients()
        assert self._semaphore is not None
        attempts = self.config.max_retries + 1
        for attempt in range(attempts):
            client = clients[next(self._key_cycle)]  # a retry after a 429 moves on to the next key
            started = time.perf_counter()
            try:
                async with self._semaphore:
                    self.requests += 1
                    try:
                        response = await client.chat.completions.create(
                            model=self.config.model, messages=messages, **params
                        )
                    except openai.RateLimitError as exc:
                        raise _Retryable("429 rate limited", _retry_after_seconds(exc.response.headers)) from exc
                    except openai.APITimeoutError as exc:
                        raise _Retryable("timed out") from exc
                    except openai.APIConnectionError as exc:
                        raise _Retryable(f"connection failed ({type(exc.__cause__).__name__})") from exc
                    except openai.APIResponseValidationError as exc:
                        raise _Retryable("malformed response body") from exc
                    except openai.APIStatusError as exc:
                        if exc.status_code >= 500 or exc.status_code in (408, 409):
                            wait = _retry_after_seconds(exc.response.headers)
                            raise _Retryable(f"HTTP {exc.status_code}", wait) from exc
                        raise
                    except (json.JSONDecodeError, ValueError) as exc:
                        raise _Retryable(f"malformed response body ({type(exc).__name__})") from exc
                    if not getattr(response, "choices", None):
                        raise _Retryable("response without choices")
                return response, time.perf_counter() - started
            except _Retryable as failure:
                if attempt + 1 >= attempts:
                    raise LLMError(
                        f"{self.name}: request failed after {attempts} attempts, last: {failure.reason}"
                    ) from None
                delay = self._backoff(attempt, failure.retry_after)
                self.retries += 1
                log.info("%s: %s; retry %d/%d in %.2f s", self.name, failure.reason, attempt + 1, attempts - 1, delay)
                await asyncio.sleep(delay)
            except openai.APIStatusError as exc:
                message = redact(str(exc))
                raise LLMError(f"{self.name}: HTTP {exc.status_code} (not retried): {message}") from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        cap = self.config.backoff_max_s
        if retry_after is not None:
            return min(retry_after, cap)
        base = self.config.backoff_base_s * (2.0**attempt)
        return float(min(cap, base * (0.5 + self._jitter.random())))  # "equal jitter": spreads synchronized retries

    @staticmethod
    def _usage(response: Any, latency: float) -> Usage:
        usage = getattr(response, "usage", None)
        return Usage(
            calls=1,
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            latency_s=latency,
        )

    # -- generate -------------------------------------------------------------------------------------------------

    async def _generate_one(self, prompt: str, params: dict[str, Any]) -> Generation:
        response, latency = await self._complete([{"role": "user", "content": prompt}], **params)
        choice = response.choices[0]
        message = choice.message
        if getattr(message, "refusal", None):
            raise Refusal(f"{self.name} refused: {redact(str(message.refusal))[:200]}")
        return Generation(
            text=message.content or "", usage=self._usage(response, latency), finish_reason=choice.finish_reason
        )

    async def agenerate(
        self,
        prompts: Sequence[str],
        *,
        max_tokens: int = 64,
        temperature: float = 0.0,
        stop: Sequence[str] = (),
        seed: int | None = None,
    ) -> list[Generation]:
        params: dict[str, Any] = {"max_tokens": max_tokens, "temperature": temperature}
        if stop:
            params["stop"] = list(stop)[:4]  # the API accepts at most four stop sequences
        tasks = []
        for prompt in prompts:
            call = dict(params)
            if seed is not None:
                call["seed"] = derive_seed(seed, prompt)  # per prompt, independent of its batch position
            tasks.append(self._generate_one(prompt, call))
        return await _gather_in_order(tasks)

    def generate(
        self,
        prompts: Sequence[str],
        *,
        max_tokens: int = 64,
        temperature: float = 0.0,
        stop: Sequence[str] = (),
        seed: int | None = None,
    ) -> list[Generation]:
        if isinstance(prompts, str):
            raise TypeError("prompts must be a sequence of strings, not one string")
        return self._run(self.agenerate(prompts, max_tokens=max_tokens, temperature=temperature, stop=stop, seed=seed))

    # -- choose ---------------------------------------------------------------------------------------------------

    @staticmethod
    def _labels(options: Sequence[str]) -> list[str]:
        """What the server sees and answers: the options without outer whitespace, or numbers if that merges two."""
        labels = [option.strip() for option in options]
        if len(set(labels)) < len(labels) or not all(labels):
            labels = [str(i + 1) for i in range(len(options))]
        return labels

    @staticmethod
    def _match(answer: str, labels: list[str]) -> int | None:
        text = answer.strip().strip("\"'`").strip()
        text = text.rstrip(".!").strip()
        for i, label in enumerate(labels):
            if text == label:
                return i
        lowered = [label.lower() for label in labels]
        if lowered.count(text.lower()) == 1:
            return lowered.index(text.lower())
        return None

    async def _choose_one(self, prompt: str, options: Sequence[str], seed: int | None) -> Choice:
        import openai

        labels = self._labels(options)
        listing = "\n".join(f"- {label}" for label in labels)
        question = prompt + CHOICE_INSTRUCTION.format(options=listing)
        params: dict[str, Any] = {"max_tokens": 64, "temperature": 0.0}
        if seed is not None:
            params["seed"] = derive_seed(seed, prompt)
        total = Usage()
        if self._use_schema:
            schema = {
                "type": "object",
                "properties": {"choice": {"type": "string", "enum": labels}},
                "required": ["choice"],
                "additionalProperties": False,
            }
            fmt = {"type": "json_schema", "json_schema": {"name": "choice", "strict": True, "schema": schema}}
            try:
                response, latency = await self._complete(
                    [{"role": "user", "content": question}], response_format=fmt, **params
                )
            except LLMError as exc:
                # A server without structured outputs answers 400 naming response_format: fall back, once.
                if self.config.structured_output == "auto" and "response_format" in str(exc.__cause__ or exc):
                    self._use_schema = False
                    self.schema_fallbacks += 1
                    log.warning("%s: no structured output support; choosing by validated text", self.name)
                else:
                    raise
            else:
                total = total + self._usage(response, latency)
                message = response.choices[0].message
                if not getattr(message, "refusal", None):
                    index = self._parse_json_choice(message.content or "", labels)
                    if index is not None:
                        return Choice(index, options[index], usage=total, extra={"method": "json_schema"})
                # a refusal or an off-schema answer gets the text path's one re-ask below
        messages = [{"role": "user", "content": question}]
        answer = ""
        for attempt in range(2):
            try:
                response, latency = await self._complete(messages, **params)
            except openai.OpenAIError as exc:  # pragma: no cover - _complete already converts these
                raise LLMError(redact(str(exc))) from None
            total = total + self._usage(response, latency)
            message = response.choices[0].message
            refusal = getattr(message, "refusal", None)
            answer = message.content or ""
            index = None if refusal else self._match(answer, labels)
            if index is not None:
                extra = {"method": "text", "reasked": attempt > 0}
                return Choice(index, options[index], usage=total, extra=extra)
            if attempt == 0:
                self.reasks += 1
                messages = [
                    {
                        "role": "user",
                        "content": question + REASK_INSTRUCTION.format(answer=answer[:80], options=listing),
                    }
                ]
            elif refusal:
                raise Refusal(f"{self.name} refused to choose: {redact(str(refusal))[:200]}")
        raise InvalidChoice(f"{self.name}: answer {redact(answer)[:80]!r} is none of {labels} (after one re-ask)")

    @staticmethod
    def _parse_json_choice(content: str, labels: list[str]) -> int | None:
        try:
            value = json.loads(content)
        except json.JSONDecodeError:
            return None
        if isinstance(value, dict) and isinstance(value.get("choice"), str) and value["choice"] in labels:
            return labels.index(value["choice"])
        return None

    async def achoose(
        self, prompts: Sequence[str], options: Sequence[Sequence[str]], *, seed: int | None = None
    ) -> list[Choice]:
        if len(prompts) != len(options):
            raise ValueError(f"{len(prompts)} prompts but {len(options)} option lists")
        for i, opts in enumerate(options):
            if isinstance(opts, str) or len(opts) == 0:
                raise ValueError(f"prompt {i}: options must be a non-empty sequence of strings")
        return await _gather_in_order([self._choose_one(p, o, seed) for p, o in zip(prompts, options, strict=True)])

    def choose(
        self, prompts: Sequence[str], options: Sequence[Sequence[str]], *, seed: int | None = None
    ) -> list[Choice]:
        if isinstance(prompts, str):
            raise TypeError("prompts must be a sequence of strings, not one string")
        return self._run(self.achoose(prompts, options, seed=seed))

    # -- state ----------------------------------------------------------------------------------------------------

    def get_state(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "retries": self.retries,
            "reasks": self.reasks,
            "schema_fallbacks": self.schema_fallbacks,
            "use_schema": self._use_schema,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self.requests = int(state["requests"])
        self.retries = int(state["retries"])
        self.reasks = int(state["reasks"])
        self.schema_fallbacks = int(state["schema_fallbacks"])
        self._use_schema = bool(state["use_schema"])


async def _gather_in_order(tasks: Sequence[Awaitable[T]]) -> list[T]:
    """All results in order; on the first failure the other requests are cancelled and the failure raised."""
    futures = [asyncio.ensure_future(task) for task in tasks]
    try:
        return list(await asyncio.gather(*futures))
    except BaseException:
        for future in futures:
            future.cancel()
        await asyncio.gather(*futures, return_exceptions=True)
        raise
