"""The default backend: Gemma 3 270M (Q4_K_M GGUF from PyPI) run in-process by llama.cpp on CPU, offline.

- ``generate`` decodes all prompts of a batch together (one ``llama_decode`` per generated token for the whole
  batch), greedy at temperature 0, else sampled with a seed derived from the call's seed and the prompt; stop
  strings and an optional GBNF ``grammar`` for constrained generation.
- ``choose`` ranks each option by its log-likelihood after the prompt (``choose_method: score``), decoding the
  prompt once for all its options and once for all prompts that share it; or generates under a grammar admitting
  only the options (``choose_method: grammar``).
- Prompt prefixes stay in the KV cache between calls (:mod:`~recagent_gym.llm.llama_runtime`): put the fixed
  parts of a prompt (instructions, profile, memory) first and the page last.

With ``llm.decoding: canonical`` (the default) every prompt is decoded on its own in segments fixed by its tokens
(:mod:`~recagent_gym.llm.canonical_decode`): a score or generation is then a function of its prompt alone, the same in
a warm run as in a cold one. With ``batched``, scores move by up to a few tenths of a nat with the batch composition
and the resident prefixes (llama.cpp sums in another order); the response cache (``llm.cache_mode: replay``) then
gives bit-identical replays.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from recagent_gym.llm import score_plan
from recagent_gym.llm.canonical_decode import CanonicalDecoder, OneAtATime
from recagent_gym.llm.config import LLMConfig
from recagent_gym.llm.llama_runtime import LlamaRuntime, common_prefix
from recagent_gym.llm.model_files import packaged_gemma_path
from recagent_gym.llm.protocol import Choice, Generation, LLMError, Usage
from recagent_gym.llm.score_plan import ScoredSequence
from recagent_gym.llm.seeding import derive_seed
from recagent_gym.llm.text import clean_text

log = logging.getLogger(__name__)


def options_grammar(options: Sequence[str]) -> str:
    """A GBNF grammar whose only sentences are the given options."""

    def literal(text: str) -> str:
        escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
        return f'"{escaped}"'

    return "root ::= " + " | ".join(literal(option) for option in options)


class EmbeddedLLM:
    """:class:`~recagent_gym.llm.protocol.LanguageModel` on llama.cpp; see the module docstring."""

    def __init__(self, config: LLMConfig | None = None, *, model_path: str | Path | None = None) -> None:
        cfg = config or LLMConfig()
        chosen = model_path or cfg.model_path
        path = Path(chosen).expanduser() if chosen else packaged_gemma_path()
        if not path.is_file():
            raise LLMError(f"embedded model file not found: {path} (llm.model_path)")
        self.config = cfg
        self.model = cfg.model_name if chosen is None else path.stem
        self.n_ctx = cfg.n_ctx
        self.n_threads = cfg.n_threads or os.cpu_count() or 1
        started = time.perf_counter()
        self._rt = LlamaRuntime(
            path,
            kv_size=cfg.kv_size,
            n_batch=cfg.n_batch,
            n_threads=self.n_threads,
            n_slots=cfg.prefix_slots,
            max_working=cfg.max_sequences,
            seed=cfg.seed,
        )
        self.load_s = time.perf_counter() - started
        # what evaluate/step/finish go through: the shared-trie batches, or one sequence at a time (canonical)
        self._engine: LlamaRuntime | OneAtATime = self._rt
        if cfg.decoding == "canonical":
            if cfg.canonical_block > cfg.n_batch:
                raise LLMError(f"llm.canonical_block {cfg.canonical_block} exceeds llm.n_batch {cfg.n_batch}")
            self._engine = OneAtATime(CanonicalDecoder(self._rt, cfg.canonical_block))
        self._calls = 0
        self._local = threading.local()
        log.info(
            "embedded model %s loaded from %s in %.2f s (%d threads)", self.model, path, self.load_s, self.n_threads
        )

    @property
    def name(self) -> str:
        return f"embedded:{self.model}"

    @property
    def numerics(self) -> str:
        """What besides the model changes its scores: the decoding, and with ``canonical`` its segment starts (a
        response cache keys its rows by it, so a row written under other segments is not served)."""
        cfg = self.config
        if cfg.decoding != "canonical":
            return cfg.decoding
        return f"canonical-block{cfg.canonical_block}-tail{cfg.canonical_tail_lines}"

    @property
    def stats(self) -> dict[str, int]:
        """Tokens actually decoded vs reused from the prefix cache, since loading."""
        return {"tokens_decoded": self._rt.tokens_decoded, "tokens_reused": self._rt.tokens_reused}

    @contextlib.contextmanager
    def prefix_priority(self, priority: int) -> Iterator[None]:
        """Calls made inside (on this thread) keep their prompt prefixes resident at ``priority`` (default 0): a
        prefix is never pushed out by one of lower priority. The agent's page decisions use 1, so the prompts that
        run between two pages (feelings, memory, social) do not evict the prefixes of the users in session."""
        previous = self._priority()
        self._local.priority = int(priority)
        try:
            yield
        finally:
            self._local.priority = previous

    def _priority(self) -> int:
        return getattr(self._local, "priority", 0)

    def _call_seed(self, seed: int | None) -> int:
        # Without a seed, successive calls still differ but repeat across runs (counter from the config seed).
        self._calls += 1
        return derive_seed(self.config.seed, "call", self._calls) if seed is None else seed

    def _per_batch(self) -> int:
        """Sequences decoded together: ``max_sequences``, or one with canonical decoding."""
        return 1 if self.config.decoding == "canonical" else self.config.max_sequences

    def forget_prefixes(self) -> None:
        """Empty the KV cache (every resident prefix): the next call starts cold."""
        with self._rt.lock:
            self._rt.reset()

    def _check_length(self, n_tokens: int, what: str) -> None:
        if n_tokens > self.n_ctx:
            raise LLMError(f"{what} needs {n_tokens} tokens, more than the context of {self.n_ctx} (llm.n_ctx)")

    # -- generate -------------------------------------------------------------------------------------------------

    def generate(
        self,
        prompts: Sequence[str],
        *,
        max_tokens: int = 64,
        temperature: float = 0.0,
        stop: Sequence[str] = (),
        seed: int | None = None,
        grammar: str | None = None,
    ) -> list[Generation]:
        """One generation per prompt. ``grammar`` (GBNF, rule ``root``) constrains every output."""
        if isinstance(prompts, str):
            raise TypeError("prompts must be a sequence of strings, not one string")
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
        call_seed = self._call_seed(seed)
        results: list[Generation] = []
        size = self._per_batch()
        with self._rt.lock:
            for start in range(0, len(prompts), size):
                chunk = list(prompts[start : start + size])
                results.extend(self._generate_chunk(chunk, max_tokens, temperature, stop, call_seed, grammar))
        return results

    def _make_sampler(self, temperature: float, seed: int, grammar: str | None) -> Any:
        import llama_cpp as lib

        chain = lib.llama_sampler_chain_init(lib.llama_sampler_chain_default_params())
        if grammar is not None:
            constraint = lib.llama_sampler_init_grammar(self._rt.vocab, grammar.encode("utf-8"), b"root")
            if not constraint:
                lib.llama_sampler_free(chain)
                raise LLMError(f"invalid GBNF grammar (llama.cpp rejected it): {grammar[:200]!r}")
            lib.llama_sampler_chain_add(chain, constraint)
        if temperature <= 0.0:
            lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_greedy())
        else:
            lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_temp(temperature))
            lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_dist(seed))
        return chain

    def _generate_chunk(
        self,
        prompts: list[str],
        max_tokens: int,
        temperature: float,
        stop: Sequence[str],
        call_seed: int,
        grammar: str | None,
    ) -> list[Generation]:
        import llama_cpp as lib

        started = time.perf_counter()
        rt = self._rt
        tokens = [rt.tokenize(prompt) for prompt in prompts]
        for prompt_tokens in tokens:
            self._check_length(len(prompt_tokens) + max_tokens, "a prompt plus max_tokens")
        # The seed depends on the prompt, not its batch position, so a cached answer equals a fresh one.
        samplers = [self._make_sampler(temperature, derive_seed(call_seed, p), grammar) for p in prompts]
        n = len(prompts)
        out: list[list[int]] = [[] for _ in range(n)]
        texts: list[bytes] = [b"" for _ in range(n)]
        finish: list[str | None] = [None] * n
        stops = [s for s in stop if s]

        def accept(k: int, token: int) -> None:
            if rt.is_eog(token):
                finish[k] = "stop"
                return
            out[k].append(token)
            texts[k] += rt.piece(token)
            if stops:
                text = texts[k].decode("utf-8", errors="ignore")
                if any(s in text for s in stops):
                    finish[k] = "stop"
                    return
            if len(out[k]) >= max_tokens:
                finish[k] = "length"

        def first(wants: list[tuple[int, int]], batch_index: int) -> None:
            for k, _pos in wants:
                accept(k, rt.sample(samplers[k], batch_index))

        try:
            self._engine.evaluate(tokens, [[len(t) - 1] for t in tokens], first, reserve=n * max_tokens)
            while True:
                active = [k for k in range(n) if finish[k] is None]
                if not active:
                    break
                entries = [(k, out[k][-1], len(tokens[k]) + len(out[k]) - 1) for k in active]

                def next_token(entry: int, batch_index: int, entries: list[tuple[int, int, int]] = entries) -> None:
                    k = entries[entry][0]
                    accept(k, rt.sample(samplers[k], batch_index))

                self._engine.step(entries, next_token)
            self._engine.finish([(k, tokens[k]) for k in _distinct(prompts)], self._priority())
        except BaseException:
            self._engine.clear_working()
            raise
        finally:
            for sampler in samplers:
                lib.llama_sampler_free(sampler)

        elapsed = time.perf_counter() - started
        results = []
        for k in range(n):
            text = texts[k].decode("utf-8", errors="replace")
            for marker in stops:
                if marker in text:
                    text = text[: text.index(marker)]
            usage = Usage(calls=1, prompt_tokens=len(tokens[k]), completion_tokens=len(out[k]), latency_s=elapsed / n)
            # bytes decoded with "replace" hold no surrogates today; the shared boundary helper keeps it that way
            results.append(Generation(text=clean_text(text), usage=usage, finish_reason=finish[k]))
        return results

    # -- choose ---------------------------------------------------------------------------------------------------

    def choose(
        self,
        prompts: Sequence[str],
        options: Sequence[Sequence[str]],
        *,
        seed: int | None = None,
    ) -> list[Choice]:
        if isinstance(prompts, str):
            raise TypeError("prompts must be a sequence of strings, not one string")
        if len(prompts) != len(options):
            raise ValueError(f"{len(prompts)} prompts but {len(options)} option lists")
        for i, opts in enumerate(options):
            if isinstance(opts, str) or len(opts) == 0:
                raise ValueError(f"prompt {i}: options must be a non-empty sequence of strings")
            if any(not option for option in opts):
                raise ValueError(f"prompt {i}: an option is the empty string")
        if self.config.choose_method == "grammar":
            return self._choose_by_grammar(prompts, options, seed)
        started = time.perf_counter()
        scores, prompt_tokens = self.score(prompts, options)
        elapsed = time.perf_counter() - started
        results = []
        for i, opts in enumerate(options):
            values = np.asarray(scores[i], dtype=np.float64)
            index = int(np.argmax(values))  # ties go to the first option
            probs = np.exp(values - values.max())
            probs /= probs.sum()
            usage = Usage(calls=1, prompt_tokens=prompt_tokens[i], latency_s=elapsed / len(prompts))
            extra = {"method": "score", "probs": tuple(float(p) for p in probs)}
            results.append(Choice(index=index, option=opts[index], scores=tuple(scores[i]), usage=usage, extra=extra))
        return results

    def score(
        self, prompts: Sequence[str], continuations: Sequence[Sequence[str]]
    ) -> tuple[list[list[float]], list[int]]:
        """Log-likelihood of each continuation after its prompt, and the tokens read per prompt.

        The continuation is tokenized together with the prompt (as the model would read it) and its tokens are
        those after the longest common prefix with the prompt alone.
        """
        rt = self._rt
        sequences, prompt_tokens = score_plan.plan(prompts, continuations, rt.tokenize, self._tail_lines())
        for seq in sequences:
            for target in seq.targets:
                self._check_length(len(target.full), f"prompt {target.prompt} with option {target.option}")
        scores: list[list[float]] = [[0.0] * len(c) for c in continuations]
        with rt.lock:
            for chunk in self._score_chunks(sequences):
                self._score_chunk(chunk, scores)
        return scores, prompt_tokens

    def _tail_lines(self) -> int:
        return self.config.canonical_tail_lines if self.config.decoding == "canonical" else 0

    def _score_chunks(self, sequences: list[ScoredSequence]) -> list[list[ScoredSequence]]:
        """Split into batches of at most ``max_sequences`` sequences whose trie fits the KV cache."""
        limit = int(self.config.kv_size * 0.8)
        chunks: list[list[ScoredSequence]] = []
        current: list[ScoredSequence] = []
        cells = 0
        for seq in sequences:
            new = len(seq.tokens) - (common_prefix(seq.tokens, current[-1].tokens) if current else 0)
            if current and (len(current) >= self._per_batch() or cells + new > limit):
                chunks.append(current)
                current, cells = [], 0
                new = len(seq.tokens)
            current.append(seq)
            cells += new
        if current:
            chunks.append(current)
        return chunks

    def _score_chunk(self, chunk: list[ScoredSequence], scores: list[list[float]]) -> None:
        rt = self._rt

        def collect(wants: list[tuple[int, int]], batch_index: int) -> None:
            for k, pos in wants:
                for target in chunk[k].targets:
                    scores[target.prompt][target.option] += rt.log_softmax_at(batch_index, target.full[pos + 1])

        try:
            self._engine.evaluate(
                [seq.tokens for seq in chunk], [seq.wanted for seq in chunk], collect,
                marks=[seq.marks for seq in chunk],
            )  # fmt: skip
            keep: dict[int, int] = {}
            for k, seq in enumerate(chunk):
                keep.setdefault(seq.targets[0].prompt, k)
            self._engine.finish(
                _group_prefixes([(k, chunk[k].tokens[: chunk[k].head]) for k in keep.values()]), self._priority()
            )
        except BaseException:
            self._engine.clear_working()
            raise

    def _choose_by_grammar(
        self, prompts: Sequence[str], options: Sequence[Sequence[str]], seed: int | None
    ) -> list[Choice]:
        results = []
        for prompt, opts in zip(prompts, options, strict=True):
            longest = max(len(self._rt.tokenize(option, add_bos=False)) for option in opts)
            (generation,) = self.generate(
                [prompt], max_tokens=longest + 4, temperature=0.0, seed=seed, grammar=options_grammar(opts)
            )
            if generation.text not in opts:
                raise LLMError(f"grammar-constrained output {generation.text!r} is not one of the options")
            index = list(opts).index(generation.text)
            results.append(Choice(index=index, option=opts[index], usage=generation.usage, extra={"method": "grammar"}))
        return results

    # -- state ----------------------------------------------------------------------------------------------------

    def get_state(self) -> dict[str, Any]:
        """The call counter that derives seeds for unseeded calls (the KV cache is a cache, not state)."""
        return {"calls": self._calls}

    def set_state(self, state: dict[str, Any]) -> None:
        self._calls = int(state["calls"])

    def close(self) -> None:
        self._rt.close()

    def __repr__(self) -> str:
        return f"EmbeddedLLM(model={self.model!r}, n_threads={self.n_threads}, kv_size={self.config.kv_size})"


def _distinct(prompts: Sequence[str]) -> list[int]:
    """Index of the first occurrence of each distinct prompt."""
    seen: dict[str, int] = {}
    for k, prompt in enumerate(prompts):
        seen.setdefault(prompt, k)
    return list(seen.values())


def _group_prefixes(prompts: list[tuple[int, list[int]]]) -> list[tuple[int, list[int]]]:
    """The prefixes worth keeping resident after a call: one per group of consecutive prompts that share at least
    half their tokens (e.g. one user's candidates after the same few-shot history), cut to the group's common
    prefix. Keeping whole prompts instead would fill every slot with the first user's candidates, and the other
    users of a batched call (a vector env's sub-envs) would start cold on their next page."""
    groups: list[tuple[int, list[int]]] = []
    for k, tokens in prompts:
        if groups:
            first, prefix = groups[-1]
            shared = common_prefix(prefix, tokens)
            if shared >= len(tokens) // 2:
                groups[-1] = (first, prefix[:shared])
                continue
        groups.append((k, list(tokens)))
    return groups
