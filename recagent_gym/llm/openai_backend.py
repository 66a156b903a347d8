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
thread, so they work from plain code and also from a thread that already runs an event loop (a notebook), where
they block that loop while they wait. The HTTP clients belong to the loop that first used them: use one backend
either through the synchronous facade or by awaiting the ``a``-methods from one event loop, not both. Call
:meth:`OpenAIBackend.close` when done; a backend still open when the interpreter exits is closed then (its HTTP
sessions would otherwise end in ``Unclosed client session`` lines on stderr).

Every reply's text is passed through :func:`~recagent_gym.llm.secrets.redact` where it enters: a server (or a model
prompted to) that quotes the configured API key back never hands it to the caller, a log or a saved output.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import email.utils
import json
import threading
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import replace
from typing import Any, TypeVar

import numpy as np

from recagent_gym.llm.config import LLMConfig
from recagent_gym.llm.endpoints import Endpoint, EndpointPool
from recagent_gym.llm.http_json import HTTPStatusError, JSONClient
from recagent_gym.llm.openai_reply import Completion, MalformedReply, parse_completion
from recagent_gym.llm.protocol import Choice, Generation, LLMError, Usage
from recagent_gym.llm.secrets import redact, redacting_logger, resolve_api_keys
from recagent_gym.llm.seeding import derive_seed
from recagent_gym.llm.text import clean_text

log = redacting_logger(__name__)
for _client_logger in ("httpx", "httpx2", "openai"):  # their request and retry lines carry URLs and headers
    redacting_logger(_client_logger)
T = TypeVar("T")
K = TypeVar("K")

# Local servers (vLLM, Ollama, llama.cpp) accept any key; the client library insists on one.
PLACEHOLDER_KEY = "no-key-needed"
CHOICE_INSTRUCTION = "\n\nAnswer with exactly one of these options, and nothing else:\n{options}"
REASK_INSTRUCTION = (
    "\n\nYour previous answer {answer!r} is not one of the options. Reply with exactly one of:\n{options}"
)


DEFAULT_BASE_URL = "https://api.openai.com/v1"

_OPEN: set[OpenAIBackend] = set()
"""Backends whose event loop runs (held here until closed, so none is collected with its sessions still open)."""
_open_lock = threading.Lock()


@atexit.register
def _close_open_backends() -> None:
    """Close what a command left open, while the loops' daemon threads still run (before interpreter teardown)."""
    with _open_lock:
        backends = list(_OPEN)
    for backend in backends:
        with contextlib.suppress(Exception):
            backend.close()


def server_label(base_url: str | None) -> str:
    """The server as error messages name it: scheme, host, port and path, without user info or query (where a key
    could hide), redacted."""
    parts = urllib.parse.urlsplit(base_url or DEFAULT_BASE_URL)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return redact(urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", "")))


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
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pool: EndpointPool | None = None
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
            f"OpenAIBackend(model={self.config.model!r}, base_urls={self._urls!r}, "
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
                with _open_lock:
                    _OPEN.add(self)
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def _ensure_pool(self) -> EndpointPool:
        # Created inside the loop that uses them: httpx connection pools belong to one event loop.
        if self._pool is None:

            def clients(url: str | None) -> list[Any]:
                if self.http_client == "aiohttp":
                    return [JSONClient(url or DEFAULT_BASE_URL, key) for key in self._keys]
                from openai import AsyncOpenAI

                return [
                    AsyncOpenAI(
                        api_key=key,
                        base_url=url,
                        timeout=self.config.timeout_s,
                        max_retries=0,
                        http_client=self._http_client_factory() if self._http_client_factory else None,
                    )
                    for key in self._keys
                ]

            self._pool = EndpointPool.build(
                self._urls,
                [server_label(u) for u in self._urls],
                clients,
                max_concurrency=self.config.max_concurrency,
                cooldown_s=self.config.endpoint_cooldown_s,
            )
        return self._pool

    @property
    def endpoint_requests(self) -> list[int]:
        """HTTP attempts per endpoint of ``llm.base_urls`` (in their order)."""
        return self._pool.requests if self._pool is not None else [0] * len(self._urls)

    def close(self) -> None:
        """Close the HTTP clients and stop the background loop."""
        if self._loop is None:
            return
        clients = [c for e in self._pool.endpoints for c in e.clients] if self._pool is not None else []

        async def shutdown() -> None:
            for client in clients:
                await client.close()

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._loop.close()
        self._loop, self._thread, self._pool = None, None, None
        with _open_lock:
            _OPEN.discard(self)

    # -- one request with retries ---------------------------------------------------------------------------------

    async def _complete(self, messages: list[dict[str, str]], **params: Any) -> tuple[Completion, float]:
        """One chat completion with retries; returns the checked reply and its latency (the last attempt's)."""
        pool = self._ensure_pool()
        attempts = self.config.max_retries + 1
        failed: Endpoint | None = None
        for attempt in range(attempts):
            endpoint = pool.pick(avoid=failed)  # a retry goes to another endpoint where there is one
            client = endpoint.next_client()  # ... and to the next key (a 429 is per key)
            started = time.perf_counter()
            endpoint.load += 1
            try:
                try:
                    async with endpoint.semaphore:
                        self.requests += 1
                        endpoint.requests += 1
                        reply = await self._attempt(client, messages, params)
                finally:
                    endpoint.load -= 1
                return reply, time.perf_counter() - started
            except _Retryable as failure:
                failed = endpoint
                if len(pool.endpoints) > 1 and not failure.reason.startswith("429"):
                    pool.rest(endpoint)  # a replica down or overloaded: the others take its requests
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
        """One HTTP attempt, bounded as a whole by ``timeout_s``; retryable failures raise :class:`_Retryable`."""
        timeout = self.config.timeout_s
        try:
            body = await asyncio.wait_for(self._post(client, messages, params), timeout=timeout)
        except TimeoutError as exc:
            raise _Retryable(f"timed out (no complete reply within timeout_s={timeout:g} s)") from exc
        except HTTPStatusError as exc:
            if exc.status == 429:
                raise _Retryable("429 rate limited", _retry_after_seconds(exc.headers)) from exc
            if exc.status >= 500 or exc.status in (408, 409):
                raise _Retryable(f"HTTP {exc.status}", _retry_after_seconds(exc.headers)) from exc
            raise
        except OSError as exc:  # no complete reply (ConnectionError and the socket's own errors)
            raise _Retryable(f"connection failed ({type(exc).__name__})") from exc
        try:
            reply = parse_completion(body)
        except MalformedReply as exc:
            raise _Retryable(f"malformed reply: {exc}") from exc
        # The text as it enters: a reply quoting the key (an echoing proxy, a prompted model) never passes it on.
        return replace(reply, content=redact(reply.content), refusal=reply.refusal and redact(reply.refusal))

    async def _post(self, client: Any, messages: list[dict[str, str]], params: dict[str, Any]) -> bytes:
        """The raw body of one completion request (read whole; the caller checks its shape)."""
        if isinstance(client, JSONClient):
            return await client.post_json(
                "/chat/completions", {"model": self.config.model, "messages": messages, **params}
            )
        return await self._post_sdk(client, messages, params)

    async def _post_sdk(self, client: Any, messages: list[dict[str, str]], params: dict[str, Any]) -> bytes:
        """:meth:`_post` through the ``openai`` client, its errors turned into those of
        :mod:`~recagent_gym.llm.http_json` (imported here only: the package costs seconds to import)."""
        import openai

        try:
            raw = await client.chat.completions.with_raw_response.create(
                model=self.config.model, messages=messages, **params
            )
        except openai.APITimeoutError as exc:
            raise _Retryable(f"timed out (timeout_s={self.config.timeout_s:g} s)") from exc
        except openai.APIConnectionError as exc:
            raise _Retryable(f"connection failed ({type(exc.__cause__).__name__})") from exc
        except openai.APIResponseValidationError as exc:
            raise _Retryable("malformed response body") from exc
        except openai.APIStatusError as exc:
            raise HTTPStatusError(exc.status_code, exc.response.headers, exc.response.content) from exc
        return bytes(raw.http_response.content)  # read in full by the client (not a streamed request)

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        cap = self.config.backoff_max_s
        if retry_after is not None:
            return min(retry_after, cap)
        base = self.config.backoff_base_s * (2.0**attempt)
        return float(min(cap, base * (0.5 + self._jitter.random())))  # "equal jitter": spreads synchronized retries

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
        unique = list(dict.fromkeys(prompts))  # a prompt asked twice in one batch is sent once (see _spread)
        tasks = []
        for prompt in unique:
            call = dict(params)
            if seed is not None:
                call["seed"] = derive_seed(seed, prompt)  # per prompt, independent of its batch position
            tasks.append(self._generate_one(prompt, call))
        answers = dict(zip(unique, await _gather_in_order(tasks), strict=True))
        return _spread(prompts, answers, lambda g: replace(g, usage=Usage()))

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
        labels = self._labels([clean_text(option) for option in options])
        listing = "\n".join(f"- {label}" for label in labels)
        question = clean_text(prompt) + CHOICE_INSTRUCTION.format(options=listing)
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
                    index = self._parse_json_choice(reply.content, labels)
                    if index is not None:
                        return Choice(index, options[index], usage=total, extra={"method": "json_schema"})
                # a refusal or an off-schema answer gets the text path's one re-ask below
        messages = [{"role": "user", "content": question}]
        answer, refusal = "", None
        for attempt in range(2):
            reply, latency = await self._complete(messages, **params)
            total = total + self._usage(reply, latency)
            refusal, answer = reply.refusal, reply.content
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
        # Unusable twice: never coerced to an option; the caller's fallback applies (and counts it).
        reason = f"refused: {refusal[:200]}" if refusal else f"answer {answer[:80]!r} is none of the options"
        reason = redact(reason)
        log.warning("%s: no usable choice after one re-ask (%s)", self.name, reason)
        return Choice.unanswered(reason, usage=total, extra={"method": "text", "reasked": True, "answer": answer[:80]})

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
        keys = [(p, tuple(o)) for p, o in zip(prompts, options, strict=True)]
        unique = list(dict.fromkeys(keys))
        answers = await _gather_in_order([self._choose_one(p, list(o), seed) for p, o in unique])
        return _spread(keys, dict(zip(unique, answers, strict=True)), lambda c: replace(c, usage=Usage()))

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


def _spread(keys: Sequence[K], answers: dict[K, T], copy: Callable[[T], T]) -> list[T]:
    """One answer per key, in order. Identical prompts of one batch (the same post compressed into several friends'
    memories) were sent once: with per-prompt seeds a server gives them the same answer anyway. Repeats get the
    answer with zero usage, since they cost no request."""
    out: list[T] = []
    seen: set[K] = set()
    for key in keys:
        out.append(answers[key] if key not in seen else copy(answers[key]))
        seen.add(key)
    return out


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
