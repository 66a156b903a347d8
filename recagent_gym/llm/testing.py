"""Deterministic stand-ins for tests of other modules: a scripted language model and a hashing embedder.

Neither is ever a default: ``build_llm`` only returns :class:`ScriptedLLM` when the configuration asks for
``backend: scripted`` explicitly.
"""

from __future__ import annotations

import hashlib
import re
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from recagent_gym.llm.protocol import Choice, Generation, LLMError, Usage

Reply = str | Callable[[str], str]
"""A fixed reply, or a function of the prompt (it may raise to simulate a failure)."""

Chooser = Callable[[str, Sequence[str]], int | Sequence[float]]
"""Given a prompt and its options: the index chosen, or one score per option (the highest wins)."""

_WORD = re.compile(r"\w+", re.UNICODE)


def _stable_unit(*parts: str) -> float:
    """A number in [0, 1) fixed by ``parts`` (same across processes, unlike ``hash``)."""
    digest = hashlib.blake2b("\x1f".join(parts).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little") / 2**64


def _count_tokens(text: str) -> int:
    return len(text.split())


class HashingEmbedder:
    """Bag-of-words feature hashing into ``dim`` signed buckets, L2-normalised.

    Texts sharing words get positive cosine similarity, so retrieval tests behave sensibly; identical texts get
    identical vectors. A text without any word is hashed whole, so every row still has unit norm.
    """

    def __init__(self, dim: int = 64) -> None:
        if dim < 2:
            raise ValueError(f"dim must be >= 2, got {dim}")
        self._dim = dim
        self.calls = 0
        """Calls so far (tests count the model calls a change saves with these two)."""
        self.texts_seen = 0
        """Texts embedded so far."""

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def name(self) -> str:
        return f"hashing:{self._dim}"

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("pass a sequence of texts, not a single string")
        self.calls += 1
        self.texts_seen += len(texts)
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for row, text in enumerate(texts):
            tokens = _WORD.findall(text.lower()) or [text]
            for token in tokens:
                digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()
                value = int.from_bytes(digest, "little")
                out[row, value % self._dim] += 1.0 if (value >> 63) & 1 else -1.0
            norm = float(np.linalg.norm(out[row]))
            if norm == 0.0:  # opposite-signed collisions cancelled out: fall back to one fixed bucket
                out[row, 0] = 1.0
            else:
                out[row] /= norm
        return out

    def __repr__(self) -> str:
        return f"HashingEmbedder(dim={self._dim})"


class ScriptedLLM:
    """A :class:`~recagent_gym.llm.protocol.LanguageModel` that answers from rules, a queue, or a default.

    ``generate`` answers each prompt with the first rule whose regex is found in the prompt, else the next queued
    reply, else ``default``; with none of them it raises :class:`LLMError` (a test should say what it expects).
    ``choose`` uses, in order: ``choice_rules`` (regex -> option text or index), queued ``choices``, ``chooser``,
    else a stable pseudo-random score per (prompt, option, seed) so choices vary but repeat exactly.
    Usage counts whitespace-separated words as tokens. Counters: ``calls`` (prompts answered), ``batches``.
    """

    def __init__(
        self,
        *,
        rules: Sequence[tuple[str, Reply]] = (),
        replies: Iterable[Reply] = (),
        default: Reply | None = None,
        choice_rules: Sequence[tuple[str, str | int]] = (),
        choices: Iterable[str | int] = (),
        chooser: Chooser | None = None,
        model: str = "scripted",
    ) -> None:
        self._rules = [(re.compile(pattern), reply) for pattern, reply in rules]
        self._replies: deque[Reply] = deque(replies)
        self._default = default
        self._choice_rules = [(re.compile(pattern), pick) for pattern, pick in choice_rules]
        self._choices: deque[str | int] = deque(choices)
        self._chooser = chooser
        self._model = model
        self.calls = 0
        self.batches = 0
        self.history: list[dict[str, Any]] = []
        """Every request in order: ``{"kind", "prompt", "options"?, "seed"}``."""

    @property
    def name(self) -> str:
        return f"scripted:{self._model}"

    # -- generate -------------------------------------------------------------------------------------------------

    def _reply_for(self, prompt: str) -> str:
        for pattern, reply in self._rules:
            if pattern.search(prompt):
                return reply(prompt) if callable(reply) else reply
        if self._replies:
            reply = self._replies.popleft()
            return reply(prompt) if callable(reply) else reply
        if self._default is not None:
            return self._default(prompt) if callable(self._default) else self._default
        raise LLMError(f"ScriptedLLM has no reply for prompt starting {prompt[:60]!r}")

    def generate(
        self,
        prompts: Sequence[str],
        *,
        max_tokens: int = 64,
        temperature: float = 0.0,
        stop: Sequence[str] = (),
        seed: int | None = None,
    ) -> list[Generation]:
        self.batches += 1
        results: list[Generation] = []
        for prompt in prompts:
            self.history.append({"kind": "generate", "prompt": prompt, "seed": seed})
            text = self._reply_for(prompt)
            finish = "stop"
            for marker in stop:
                if marker and marker in text:
                    text = text[: text.index(marker)]
            words = text.split()
            if len(words) > max_tokens:
                text, finish = " ".join(words[:max_tokens]), "length"
            self.calls += 1
            usage = Usage(calls=1, prompt_tokens=_count_tokens(prompt), completion_tokens=_count_tokens(text))
            results.append(Generation(text=text, usage=usage, finish_reason=finish))
        return results

    # -- choose ---------------------------------------------------------------------------------------------------

    def _pick(self, prompt: str, options: Sequence[str], seed: int | None) -> tuple[int, tuple[float, ...] | None]:
        for pattern, pick in self._choice_rules:
            if pattern.search(prompt):
                return self._resolve(pick, options), None
        if self._choices:
            return self._resolve(self._choices.popleft(), options), None
        if self._chooser is not None:
            picked = self._chooser(prompt, options)
            if isinstance(picked, int | np.integer):
                return self._resolve(int(picked), options), None
            scores = tuple(float(s) for s in picked)
            if len(scores) != len(options):
                raise LLMError(f"chooser returned {len(scores)} scores for {len(options)} options")
            return int(np.argmax(scores)), scores
        # log of a stable uniform number: looks like a log-likelihood, same on every run
        scores = tuple(float(np.log(1e-9 + _stable_unit(prompt, opt, str(seed)))) for opt in options)
        return int(np.argmax(scores)), scores

    @staticmethod
    def _resolve(pick: str | int, options: Sequence[str]) -> int:
        if isinstance(pick, str):
            if pick not in options:
                raise LLMError(f"scripted choice {pick!r} is not among the options {list(options)!r}")
            return list(options).index(pick)
        if not 0 <= pick < len(options):
            raise LLMError(f"scripted choice index {pick} is out of range for {len(options)} options")
        return pick

    def choose(
        self,
        prompts: Sequence[str],
        options: Sequence[Sequence[str]],
        *,
        seed: int | None = None,
    ) -> list[Choice]:
        if len(prompts) != len(options):
            raise ValueError(f"{len(prompts)} prompts but {len(options)} option lists")
        self.batches += 1
        results: list[Choice] = []
        for prompt, opts in zip(prompts, options, strict=True):
            if not opts:
                raise ValueError("choose needs at least one option per prompt")
            self.history.append({"kind": "choose", "prompt": prompt, "options": list(opts), "seed": seed})
            index, scores = self._pick(prompt, opts, seed)
            self.calls += 1
            usage = Usage(calls=1, prompt_tokens=_count_tokens(prompt), completion_tokens=1)
            results.append(Choice(index=index, option=opts[index], scores=scores, usage=usage))
        return results

    # -- state ----------------------------------------------------------------------------------------------------

    def get_state(self) -> dict[str, Any]:
        """Counters and the queues of plain replies/choices (callables cannot be saved and are kept as they are)."""
        return {
            "calls": self.calls,
            "batches": self.batches,
            "replies": [r for r in self._replies if isinstance(r, str)],
            "choices": list(self._choices),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self.calls = int(state["calls"])
        self.batches = int(state["batches"])
        self._replies = deque(state["replies"])
        self._choices = deque(state["choices"])

    def __repr__(self) -> str:
        return f"ScriptedLLM(model={self._model!r}, calls={self.calls})"
