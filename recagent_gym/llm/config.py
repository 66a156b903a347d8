"""Configuration of the language-model backend and its wrappers (cache, recorder, budget)."""

from __future__ import annotations

import urllib.parse
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from recagent_gym.settings_section import Section

EMBEDDED_MODEL = "gemma-3-270m-q4_k_m"
"""The name reported for the packaged embedded model."""


class LLMConfig(Section):
    backend: Literal["embedded", "openai"] = "embedded"
    """``embedded``: Gemma 3 270M in-process via llama-cpp-python (offline). ``openai``: any OpenAI-compatible server
    (OpenAI, vLLM, Ollama, llama.cpp server) at ``base_url``. (Tests pass their scripted model as ``llm=``.)"""

    model: str | None = Field(None, min_length=1)
    """Model name sent to the server: required for ``openai`` (e.g. ``gpt-4o-mini``, or the name your vLLM or Ollama
    server serves). For ``embedded``, None reports the packaged model (:data:`EMBEDDED_MODEL`)."""

    base_url: str | None = None
    """Base URL of an OpenAI-compatible server, e.g. ``http://127.0.0.1:8080/v1``; None means api.openai.com."""

    base_urls: list[str] = Field(default_factory=list)
    """Several OpenAI-compatible endpoints serving the same model (e.g. vLLM replicas on several GPUs or nodes),
    instead of ``base_url``: each request goes to the one with the fewest requests in flight, each endpoint has its
    own ``max_concurrency`` and ``endpoint_rpm``, and a request whose endpoint fails (refused, timeout, 5xx) is
    retried on another at once while the failed one rests ``endpoint_cooldown_s`` and is then tried again
    (``recagent_gym/llm/endpoints.py``)."""

    endpoint_cooldown_s: float = Field(10.0, gt=0.0, le=3600.0)
    """With ``base_urls``: how long an endpoint that failed gets no new requests (doubled for each failure in a row,
    up to 8 times); then it takes one request at a time until one succeeds."""

    endpoint_rpm: float | None = Field(None, gt=0.0, le=1_000_000.0)
    """Most requests started per minute at each endpoint (a provider's or a gateway's rate limit), evenly spaced;
    None: no limit beyond ``max_concurrency``."""

    api_keys: list[SecretStr] = Field(default_factory=list)
    """API keys used round-robin (the paper's parallel keys). Prefer ``api_key_env``; keys are never logged."""

    api_key_env: str = "OPENAI_API_KEY"
    """Environment variable holding one key, or several separated by commas."""

    temperature: float = Field(0.0, ge=0.0, le=2.0)
    """Sampling temperature for free generation."""

    max_tokens: int = Field(64, ge=1, le=8192)
    """Default cap on generated tokens per call (the paper's ``max_token``)."""

    seed: int = Field(0, ge=0)
    """Base seed; per-call seeds are derived from it and the caller's seed."""

    max_concurrency: int = Field(64, ge=1, le=1024)
    """Most requests in flight at once to a remote server (per endpoint of ``base_urls``). Size it to what the
    server serves at once: for vLLM its ``--max-num-seqs`` (256 by default) divided by the clients sharing it; for a
    hosted API, requests-per-minute limit x mean latency (s) / 60 (e.g. 3,500 RPM x 1 s / 60 = 58). A round of N
    agents sends about N requests per wave, so below N a wave takes several latencies."""

    timeout_s: float = Field(60.0, gt=0)
    """Limit on each whole attempt at a remote request (connect, send, wait, read however slowly), in seconds."""

    max_retries: int = Field(4, ge=0, le=20)
    """Retries on 429, 5xx, timeouts, dropped connections and malformed replies (exponential backoff with jitter,
    honours Retry-After)."""

    backoff_base_s: float = Field(0.5, gt=0.0, le=60.0)
    """First retry delay for remote servers; doubles per attempt, with jitter, unless the server sends
    ``Retry-After``."""

    backoff_max_s: float = Field(30.0, gt=0.0, le=600.0)
    """Longest wait between two retries (a longer ``Retry-After`` is capped here)."""

    http_client: Literal["aiohttp", "openai"] = "aiohttp"
    """Remote backends: ``aiohttp`` posts each request's JSON over ``aiohttp``'s keep-alive connections (about a
    tenth of the ``openai`` client's CPU per request, which bounds a large simulation: ``llm/http_json.py``);
    ``openai`` uses the ``openai`` package's client. Both take proxies from the environment."""
    structured_output: Literal["auto", "json_schema", "text"] = "auto"
    """How ``choose`` asks a remote server: ``json_schema`` (an enum of the options), ``text`` (validated parse of
    the reply, one re-ask), or ``auto`` (JSON schema, falling back to text if the server rejects it)."""

    n_ctx: int = Field(2048, ge=256)
    """Context window of the embedded model."""

    n_threads: int | None = Field(None, ge=1)
    """CPU threads for the embedded model; None uses all cores."""

    kv_size: int = Field(8192, ge=256, le=131072)
    """Embedded model: KV-cache cells shared by all sequences of a batch and the resident prompt prefixes."""

    prefix_slots: int = Field(8, ge=0, le=64)
    """Embedded model: prompt prefixes kept in the KV cache between calls, so a repeated profile and memory
    prefix is not recomputed (least recently used is dropped)."""

    max_sequences: int = Field(64, ge=1, le=192)
    """Embedded model: sequences decoded together in one batch (prompts for ``generate``, prompt-option pairs for
    ``choose``); larger requests are split."""

    n_batch: int = Field(512, ge=32, le=8192)
    """Embedded model: tokens per ``llama_decode`` call."""

    decoding: Literal["canonical", "batched"] = "canonical"
    """Embedded model: ``canonical`` decodes each prompt (each prompt-option pair when scoring) on its own, in
    segments fixed by its tokens alone, so that every score and generation is a function of its prompt: the same
    whatever else the call held, which items an earlier call or a cache already answered, and what earlier calls
    left in the KV cache (a warm run repeats a cold one to the digit; ``llm/canonical_decode.py``). ``batched``
    decodes a call's prompts together in one trie with resident prefix slots (``prefix_slots``): faster on large
    batches, but scores move by up to a few tenths of a nat with the batch and the cache
    (``benchmarks/probe_embedded_invariance.py``)."""

    canonical_block: int = Field(64, ge=1, le=512)
    """Embedded model, ``canonical`` decoding: tokens per segment. A resident prefix is reused up to a multiple of
    it, so a smaller block recomputes less of a prompt that diverges from the previous one, in more decode calls."""

    canonical_tail_lines: int = Field(2, ge=0, le=8)
    """Embedded model, ``canonical`` decoding: a scored prompt's segments also start where its last N lines begin,
    so the prompts of one user's candidates (which differ only in the ``Movie:`` / ``Watched:`` lines) reuse all of
    their shared prefix instead of the part up to the last block start (``llm/score_plan.py``). 0: blocks only."""

    choose_method: Literal["score", "grammar"] = "score"
    """Embedded model: ``score`` ranks options by log-likelihood after the prompt (gives scores); ``grammar``
    generates under a GBNF grammar that only admits the options (no scores)."""

    model_path: str | None = None
    """A GGUF file to run instead of the packaged Gemma 3 270M."""

    embedder_precision: Literal["auto", "bf16", "fp32"] = "auto"
    """What the LLM agents' sentence embedder (all-MiniLM-L6-v2: memory writes, retrieval queries, item texts)
    computes in. ``bf16``: torch's CPU autocast, about half the CPU time per text where the CPU has bfloat16
    instructions; its memory retrieval agrees with fp32 (top-5 sets, enhancement pairs: ``docs/speed.md``,
    ``benchmarks/bench_embed_agreement.py``) but its vectors are not fp32's. ``fp32``: the float32 reference.
    ``auto`` (default): bf16 where torch's oneDNN has bfloat16 kernels for this CPU (AVX-512 and later), else fp32.
    The text-vector store keeps each precision apart."""

    embedder_process: bool = True
    """Run the simulator's MiniLM in a process of its own (``llm/embedder_process.py``; the same vectors, bitwise).
    In one process the model's every operation waits for the interpreter lock that a hundred agent threads share:
    on a 2-core AVX2 machine a one-text call took 25 ms alone and 2.1 s beside one busy thread (48 ms in its own
    process: ``benchmarks/bench_embed_contention.py``), and a 100-agent ``simulate_paper`` round took 5.6-6.6 s in
    its own process against 6.6-7.3 s in one (``docs/speed.md``). False keeps it in the simulator's process (about
    300 MB less memory, no second interpreter to start)."""

    cache_path: str | None = None
    """SQLite response cache; None disables caching. A relative path lies in the run's output folder (``--out``,
    ``train.output_dir``), not in the current directory."""

    cache_mode: Literal["off", "read_write", "replay"] = "off"
    """``replay`` raises on a cache miss, so a run can be repeated bit-identically and offline."""

    record_path: str | None = None
    """JSONL file receiving every request and response (keys redacted); a relative path lies in the run's output
    folder."""

    max_calls: int | None = Field(None, ge=1)
    """Call budget; exceeding it raises ``BudgetExceeded``."""

    max_total_tokens: int | None = Field(None, ge=1)
    """Token budget (prompt + completion); exceeding it raises ``BudgetExceeded``."""

    cost_per_1k_prompt: float = Field(0.0, ge=0.0)
    """USD per 1,000 prompt tokens, for the cost estimate."""

    cost_per_1k_completion: float = Field(0.0, ge=0.0)
    """USD per 1,000 completion tokens, for the cost estimate."""

    @field_validator("base_url")
    @classmethod
    def _base_url_is_usable(cls, value: str | None) -> str | None:
        return None if value is None else check_base_url(value)

    @field_validator("base_urls")
    @classmethod
    def _base_urls_are_usable(cls, value: list[str]) -> list[str]:
        return [check_base_url(url) for url in value]

    @model_validator(mode="after")
    def _remote_model_is_named(self) -> LLMConfig:
        if self.backend != "embedded" and self.model is None:
            raise ValueError(
                f"llm.backend is {self.backend!r} but llm.model is not set: name the server's model, "
                "e.g. --set llm.model=gpt-4o-mini"
            )
        if self.base_urls and self.base_url is not None:
            raise ValueError("set llm.base_url or llm.base_urls, not both (base_urls lists every endpoint)")
        if len(set(self.base_urls)) < len(self.base_urls):
            raise ValueError(f"llm.base_urls lists an endpoint twice: {self.base_urls}")
        return self

    @property
    def model_name(self) -> str:
        """The model's name as reported: ``model``, or :data:`EMBEDDED_MODEL` for the packaged one."""
        return self.model or EMBEDDED_MODEL

    def in_run_folder(self, folder: str | Path) -> LLMConfig:
        """A copy whose relative run files (:data:`RUN_FILES`) lie in ``folder``; absolute ones are kept."""
        update = {
            key: str(Path(folder) / value)
            for key in RUN_FILES
            if (value := getattr(self, key)) is not None and not Path(value).is_absolute()
        }
        return self.model_copy(update=update)


RUN_FILES: tuple[str, ...] = ("cache_path", "record_path")
"""The files an LLM stack writes during a run (response cache, request record)."""


def check_base_url(url: str) -> str:
    """``url`` if a client can reach a server with it (http or https, a host, a numeric port if any); otherwise a
    ``ValueError`` saying what is wrong, checked when the configuration is parsed so that every command (not only
    the first request) says so. Credentials in the URL are not repeated in the message."""
    shown = repr(_without_credentials(url))
    if any(c.isspace() or not c.isprintable() for c in url):
        raise ValueError(f"{shown} contains a space or control character")
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as exc:  # "Invalid IPv6 URL", "Port out of range 0-65535", "Port could not be cast ..."
        what = "bad port" if "Port" in str(exc) else f"not a URL ({exc})"
        raise ValueError(f"{shown}: {what}") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise ValueError(f"{shown}: a base URL starts with http:// or https://, e.g. http://127.0.0.1:8080/v1")
    if not parts.hostname:
        raise ValueError(f"{shown} has no host, e.g. http://127.0.0.1:8080/v1")
    if port == 0:
        raise ValueError(f"{shown}: bad port 0")
    return url


def _without_credentials(url: str) -> str:
    head, at, tail = url.rpartition("@")
    if not at or "//" not in head:
        return url
    return head.split("//", 1)[0] + "//***@" + tail
