"""Any OpenAI-compatible chat server (OpenAI, vLLM, Ollama, llama.cpp server) by ``base_url`` alone.

An async core (``agenerate``/``achoose``) sends the prompts of a batch concurrently, at most ``max_concurrency`` in
flight, cycling through the configured API keys (the paper's parallel keys). Each request is retried on 429, 5xx,
timeouts, dropped connections and malformed bodies with exponential backoff and jitter, honouring ``Retry-After``;
the client's own retries are off so that every attempt is counted here. ``timeout_s`` bounds each whole attempt
(connect, send, wait and read, however slowly the body trickles in). Every 200 body is checked where it enters
(:mod:`~recagent_gym.llm.openai_reply`): a malformed one is retried like a dropped connection. Results come back in
prompt order, one per prompt; a request that fails for good raises a typed :class:`LLMError` naming the server, with
secrets redacted. An answer that is unusable as such (a refusal; for ``choose``, no option named even after one
re-ask) is not an error: ``generate`` returns empty text with ``finish_reason="refusal"`` and ``choose`` returns an
unanswered :class:`~recagent_gym.llm.protocol.Choice`, so the caller's documented fallback applies and is counted.

``generate``/``choose`` are the synchronous facade: they run the coroutine on a private event loop in a background
thread (:mod:`~recagent_gym.llm.background_loop`), so they work from plain code and also from a thread that already runs
an event loop (a notebook), where they block that loop while they wait. The HTTP clients belong to the loop that first
used them: use one backend either through the synchronous facade or by awaiting the ``a``-methods from one event loop,
not both. Call :meth:`OpenAIBackend.close` when done; a backend still open when the interpreter exits is closed then
(its HTTP sessions would otherwise end in ``Unclosed client session`` lines on stderr).

Every reply's text is passed through :func:`~recagent_gym.llm.secrets.redact` where it enters: a server (or a model
prompted to) that quotes the configured API key back never hands it to the caller, a log or a saved output.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import replace
from typing import Any, TypeVar

import numpy as np

from recagent_gym.llm.background_loop import BackgroundLoop
from recagent_gym.llm.config import LLMConfig
from recagent_gym.llm.endpoints import DEFAULT_BASE_URL, Endpoint, EndpointPool, server_label
from recagent_gym.llm.http_json import HTTPStatusError, JSONClient
from recagent_gym.llm.openai_reply import Completion, MalformedReply, parse_completion
from recagent_gym.llm.openai_sdk import post_through_sdk, sdk_clients
from recagent_gym.llm.option_matching import (
    CHOICE_INSTRUCTION,
    REASK_INSTRUCTION,
    choice_response_format,
    match_option,
    option_labels,
    parse_json_choice,
)
from recagent_gym.llm.priority import REQUEST_PRIORITY
from recagent_gym.llm.prompt_batches import gather_in_order, spread_answers
from recagent_gym.llm.protocol import Choice, Generation, LLMError, Usage
from recagent_gym.llm.request_retries import RetryableFailure, backoff_delay, retry_after_seconds
from recagent_gym.llm.secrets import redact, redacting_logger, resolve_api_keys
from recagent_gym.llm.seeding import derive_seed
from recagent_gym.llm.text import clean_text

log = redacting_logger(__name__)
for _client_logger in ("httpx", "httpx2", "openai"):  # their request and retry lines carry URLs and headers
    redacting_logger(_client_logger)
T = TypeVar("T")

# Local servers (vLLM, Ollama, llama.cpp) accept any key; the client library insists on one.
PLACEHOLDER_KEY = "no-key-needed"


def resolve_http_client(setting: str, *, custom: bool = False) -> str:
    """The client that sends requests: ``setting``, except that a custom HTTP client (``http_client_factory``,
    an ``httpx`` client for the ``openai`` package) needs the ``openai`` client."""
    return "openai" if custom else setting


class OpenAIBackend:
    """:class:`~recagent_gym.llm.protocol.LanguageModel` over the ``openai`` client; see the module docstring.

    Counters (plain data in :meth:`get_state`): ``requests`` (HTTP attempts), ``retries``, ``reasks``,
    ``schema_fallbacks``.
    """

    def __init__(self, config: LLMConfig, *, http_client_factory: Callable[[], Any] | None = None) -> None:
        keys = resolve_api_keys(config)
        if not keys and config.base_url is None and not config.base_urls:
            raise LLMError(
                f"no API key for {config.model}: set the environment variable {config.api_key_env} "
                "(several keys separated by commas) or llm.api_keys"
            )
        self.config = config
        self._urls: list[str | None] = list(config.base_urls) or [config.base_url]
        self._server = ", ".join(server_label(u) for u in self._urls)
        self._keys = [k.get_secret_value() for k in keys] or [PLACEHOLDER_KEY]
        self._http_client_factory = http_client_factory
        self._use_schema = config.structured_output != "text"
        self.http_client = resolve_http_client(config.http_client, custom=http_client_factory is not None)
        """``aiohttp`` (:mod:`~recagent_gym.llm.http_json`) or ``openai`` (the ``openai`` package's client)."""
        self._jitter = np.random.default_rng(derive_seed(config.seed, "backoff"))
        self._background = BackgroundLoop(self, "recagent-openai")
        self._pool: EndpointPool | None = None
        self.requests = 0
        self.retries = 0
        self.reasks = 0
        self.schema_fallbacks = 0

    @property
    def name(self) -> str:
        return f"openai:{self.config.model}"

    def __repr__(self) -> str:  # keys never appear here
        return (
            f"OpenAIBackend(model={self.config.model!r}, base_urls={self._urls!r}, "
            f"keys={len(self._keys)}, max_concurrency={self.config.max_concurrency})"
        )

    # -- event loop and clients -----------------------------------------------------------------------------------

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self._background.run(coro)

    def _ensure_pool(self) -> EndpointPool:
        # Created inside the loop that uses them: httpx connection pools belong to one event loop.
        if self._pool is None:

            def clients(url: str | None) -> list[Any]:
                if self.http_client == "aiohttp":
                    return [JSONClient(url or DEFAULT_BASE_URL, key) for key in self._keys]
                return sdk_clients(
                    url, self._keys, timeout_s=self.config.timeout_s, http_client_factory=self._http_client_factory
                )

            self._pool = EndpointPool.build(
                self._urls,
                [server_label(u) for u in self._urls],
                clients,
                max_concurrency=self.config.max_concurrency,
                cooldown_s=self.config.endpoint_cooldown_s,
                rpm=self.config.endpoint_rpm,
            )
        return self._pool

    @property
    def endpoint_requests(self) -> list[int]:
        """HTTP attempts per endpoint of ``llm.base_urls`` (in their order)."""
        return self._pool.requests if self._pool is not None else [0] * len(self._urls)

    @property
    def endpoint_stats(self) -> list[dict[str, Any]]:
        """Per endpoint of ``llm.base_urls``: label, attempts, failures, resting now (plain data, no keys)."""
        return self._pool.stats() if self._pool is not None else []

    def close(self) -> None:
        """Close the HTTP clients and stop the background loop."""
        if not self._background.running:
            return
        clients = [c for e in self._pool.endpoints for c in e.clients] if self._pool is not None else []

        async def shutdown() -> None:
            for client in clients:
                await client.close()

        self._background.stop(shutdown())
        self._pool = None

    # -- one request with retries ---------------------------------------------------------------------------------

    async def _complete(self, messages: list[dict[str, str]], **params: Any) -> tuple[Completion, float]:
        """One chat completion with retries; returns the checked reply and its latency (the last attempt's)."""
        pool = self._ensure_pool()
        attempts = self.config.max_retries + 1
        failed: Endpoint | None = None
        for attempt in range(attempts):
            started = time.perf_counter()
            endpoint: Endpoint | None = None
            try:
                # the least loaded available endpoint; a retry goes to another one where there is one
                async with pool.slot(avoid=failed, priority=REQUEST_PRIORITY.get()) as endpoint:
                    client = endpoint.next_client()  # ... and to the next key (a 429 is per key)
                    self.requests += 1
                    try:
                        reply = await self._attempt(client, messages, params)
                    except RetryableFailure as failure:
                        # a replica down or overloaded rests before its slot frees: the others take its requests
                        if len(pool.endpoints) > 1 and not failure.reason.startswith("429"):
                            pool.rest(endpoint)
                        raise
                pool.succeeded(endpoint)
                return reply, time.perf_counter() - started
            except RetryableFailure as failure:
                assert endpoint is not None  # raised inside the slot
                failed = endpoint
                if attempt + 1 >= attempts:
                    raise self._error(f"request failed after {attempts} attempts, last: {failure.reason}") from None
                # another endpoint is ready: fail over at once; else back off as for a single server
                fresh = len(pool.endpoints) > 1 and pool.has_healthy(avoid=endpoint)
                delay = 0.0 if fresh else self._backoff(attempt, failure.retry_after)
                self.retries += 1
                log.info(
                    "%s at %s: %s; retry %d/%d in %.2f s",
                    self.name,
                    endpoint.label,
                    redact(failure.reason),
                    attempt + 1,
                    attempts - 1,
                    delay,
                )
                await asyncio.sleep(delay)
            except HTTPStatusError as exc:
                raise self._error(f"HTTP {exc.status} (not retried): {exc.message}") from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _error(self, text: str) -> LLMError:
        """An :class:`LLMError` naming the model and the server, secrets redacted."""
        return LLMError(redact(f"{self.name} at {self._server}: {text}"))

    async def _attempt(self, client: Any, messages: list[dict[str, str]], params: dict[str, Any]) -> Completion:
        """One HTTP attempt, bounded as a whole by ``timeout_s``; retryable failures raise :class:`RetryableFailure`."""
        timeout = self.config.timeout_s
        try:
            body = await asyncio.wait_for(self._post(client, messages, params), timeout=timeout)
        except TimeoutError as exc:
            raise RetryableFailure(f"timed out (no complete reply within timeout_s={timeout:g} s)") from exc
        except HTTPStatusError as exc:
            if exc.status == 429:
                raise RetryableFailure("429 rate limited", retry_after_seconds(exc.headers)) from exc
            if exc.status >= 500 or exc.status in (408, 409):
                raise RetryableFailure(f"HTTP {exc.status}", retry_after_seconds(exc.headers)) from exc
            raise
        except OSError as exc:  # no complete reply (ConnectionError and the socket's own errors)
            raise RetryableFailure(f"connection failed ({type(exc).__name__})") from exc
        try:
            reply = parse_completion(body)
        except MalformedReply as exc:
            raise RetryableFailure(f"malformed reply: {exc}") from exc
        # The text as it enters: a reply quoting the key (an echoing proxy, a prompted model) never passes it on.
        return replace(reply, content=redact(reply.content), refusal=reply.refusal and redact(reply.refusal))

    async def _post(self, client: Any, messages: list[dict[str, str]], params: dict[str, Any]) -> bytes:
        """The raw body of one completion request (read whole; the caller checks its shape)."""
        if isinstance(client, JSONClient):
            return await client.post_json(
                "/chat/completions", {"model": self.config.model, "messages": messages, **params}
            )
        return await post_through_sdk(client, self.config.model, self.config.timeout_s, messages, params)

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        cfg = self.config
        return backoff_delay(
            attempt, retry_after, base_s=cfg.backoff_base_s, cap_s=cfg.backoff_max_s, jitter=self._jitter
        )

    @staticmethod
    def _usage(reply: Completion, latency: float) -> Usage:
        return Usage(
            calls=1, prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens, latency_s=latency
        )

    # -- generate -------------------------------------------------------------------------------------------------

    async def _generate_one(self, prompt: str, params: dict[str, Any]) -> Generation:
        reply, latency = await self._complete([{"role": "user", "content": clean_text(prompt)}], **params)
        if reply.refusal:  # an unusable answer, not a failure: the caller's fallback applies
            log.warning("%s refused to answer: %s", self.name, redact(reply.refusal)[:200])
            return Generation(text="", usage=self._usage(reply, latency), finish_reason="refusal")
        return Generation(text=reply.content, usage=self._usage(reply, latency), finish_reason=reply.finish_reason)

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
        unique = list(dict.fromkeys(prompts))  # a prompt asked twice in one batch is sent once (see spread_answers)
        tasks = []
        for prompt in unique:
            call = dict(params)
            if seed is not None:
                call["seed"] = derive_seed(seed, prompt)  # per prompt, independent of its batch position
            tasks.append(self._generate_one(prompt, call))
        answers = dict(zip(unique, await gather_in_order(tasks), strict=True))
        return spread_answers(prompts, answers, lambda g: replace(g, usage=Usage()))

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

    async def _choose_one(self, prompt: str, options: Sequence[str], seed: int | None) -> Choice:
        labels = option_labels([clean_text(option) for option in options])
        listing = "\n".join(f"- {label}" for label in labels)
        question = clean_text(prompt) + CHOICE_INSTRUCTION.format(options=listing)
        params: dict[str, Any] = {"max_tokens": 64, "temperature": 0.0}
        if seed is not None:
            params["seed"] = derive_seed(seed, prompt)
        total = Usage()
        if self._use_schema:
            fmt = choice_response_format(labels)
            try:
                reply, latency = await self._complete(
                    [{"role": "user", "content": question}], response_format=fmt, **params
                )
            except LLMError as exc:
                # A server without structured outputs answers 400 naming response_format: fall back, once.
                if self.config.structured_output == "auto" and "response_format" in str(exc):
                    self._use_schema = False
                    self.schema_fallbacks += 1
                    log.warning("%s: no structured output support; choosing by validated text", self.name)
                else:
                    raise
            else:
                total = total + self._usage(reply, latency)
                if not reply.refusal:
                    index = parse_json_choice(reply.content, labels)
                    if index is not None:
                        return Choice(index, options[index], usage=total, extra={"method": "json_schema"})
                # a refusal or an off-schema answer gets the text path's one re-ask below
        messages = [{"role": "user", "content": question}]
        answer, refusal = "", None
        for attempt in range(2):
            reply, latency = await self._complete(messages, **params)
            total = total + self._usage(reply, latency)
            refusal, answer = reply.refusal, reply.content
            index = None if refusal else match_option(answer, labels)
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
        # Unusable twice: never coerced to an option; the caller's fallback applies (and counts it).
        reason = f"refused: {refusal[:200]}" if refusal else f"answer {answer[:80]!r} is none of the options"
        reason = redact(reason)
        log.warning("%s: no usable choice after one re-ask (%s)", self.name, reason)
        return Choice.unanswered(reason, usage=total, extra={"method": "text", "reasked": True, "answer": answer[:80]})

    async def achoose(
        self, prompts: Sequence[str], options: Sequence[Sequence[str]], *, seed: int | None = None
    ) -> list[Choice]:
        if len(prompts) != len(options):
            raise ValueError(f"{len(prompts)} prompts but {len(options)} option lists")
        for i, opts in enumerate(options):
            if isinstance(opts, str) or len(opts) == 0:
                raise ValueError(f"prompt {i}: options must be a non-empty sequence of strings")
        keys = [(p, tuple(o)) for p, o in zip(prompts, options, strict=True)]
        unique = list(dict.fromkeys(keys))
        answers = await gather_in_order([self._choose_one(p, list(o), seed) for p, o in unique])
        return spread_answers(keys, dict(zip(unique, answers, strict=True)), lambda c: replace(c, usage=Usage()))

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
