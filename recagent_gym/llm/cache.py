"""A persistent response cache in SQLite, wrapping any :class:`LanguageModel`.

The key hashes the inner model's name (backend and model), the kind of call, the prompt (and options), every
parameter and the seed. ``read_write`` answers hits from the file and asks the inner model for the misses only (one
batched call); ``replay`` never asks it and raises :class:`CacheMiss` instead, so a recorded run can be repeated
offline and bit-identically. Hits are counted in ``Usage.cached_calls`` (latency 0, tokens as first recorded).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal, TypeVar

from recagent_gym.llm.protocol import CacheMiss, Choice, Generation, LanguageModel, Usage, prefix_hint
from recagent_gym.llm.serialize import choice_from_dict, choice_to_dict, generation_from_dict, generation_to_dict
from recagent_gym.llm.wrapping import close_model, set_state_of, state_of

R = TypeVar("R", Generation, Choice)
CacheMode = Literal["read_write", "replay"]


def _key(payload: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def _as_hit(usage: Usage) -> Usage:
    return replace(usage, calls=1, cached_calls=1, latency_s=0.0, cost_usd=0.0)


class CachedLLM:
    """Wraps ``inner``; counters ``hits`` and ``misses`` (prompts), plain data in :meth:`get_state`."""

    def __init__(self, inner: LanguageModel, path: str | Path, mode: CacheMode = "read_write") -> None:
        if mode not in ("read_write", "replay"):
            raise ValueError(f"cache mode must be 'read_write' or 'replay', got {mode!r}")
        self.inner = inner
        self.path = Path(path)
        self.mode = mode
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # One connection shared by threads, serialised by a lock (sqlite3's default forbids cross-thread use).
        self._db = sqlite3.connect(str(self.path), check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, kind TEXT NOT NULL, "
            "request TEXT NOT NULL, response TEXT NOT NULL, created REAL NOT NULL)"
        )
        self._db.commit()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def name(self) -> str:
        return self.inner.name

    def _lookup(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute("SELECT response FROM responses WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def _store(self, rows: list[tuple[str, str, str, str]]) -> None:
        with self._lock:
            self._db.executemany(
                "INSERT OR REPLACE INTO responses (key, kind, request, response, created) VALUES (?, ?, ?, ?, ?)",
                [(*row, time.time()) for row in rows],
            )
            self._db.commit()

    def _serve(
        self,
        kind: str,
        requests: list[dict[str, Any]],
        ask: Callable[[list[int]], Sequence[R]],
        to_dict: Callable[[R], dict[str, Any]],
        from_dict: Callable[[dict[str, Any]], R],
    ) -> list[R]:
        keys = [_key({"backend": self.inner.name, "kind": kind, **request}) for request in requests]
        results: list[R | None] = [None] * len(requests)
        missing: list[int] = []
        for i, key in enumerate(keys):
            found = self._lookup(key)
            if found is None:
                missing.append(i)
            else:
                result = from_dict(found)
                results[i] = replace(result, usage=_as_hit(result.usage))
        self.hits += len(requests) - len(missing)
        if missing and self.mode == "replay":
            first = requests[missing[0]]["prompt"]
            raise CacheMiss(
                f"replay cache {self.path} has no {kind} answer for {len(missing)} of {len(requests)} prompts "
                f"(first: {first[:80]!r}) from {self.inner.name}"
            )
        if missing:
            self.misses += len(missing)
            fresh = ask(missing)
            rows = []
            for i, result in zip(missing, fresh, strict=True):
                results[i] = result
                request = json.dumps(requests[i], ensure_ascii=False)
                rows.append((keys[i], kind, request, json.dumps(to_dict(result), ensure_ascii=False)))
            self._store(rows)
        return [r for r in results if r is not None]

    def generate(
        self,
        prompts: Sequence[str],
        *,
        max_tokens: int = 64,
        temperature: float = 0.0,
        stop: Sequence[str] = (),
        seed: int | None = None,
    ) -> list[Generation]:
        params = {"max_tokens": max_tokens, "temperature": temperature, "stop": list(stop), "seed": seed}
        requests = [{"prompt": p, **params} for p in prompts]

        def ask(indices: list[int]) -> list[Generation]:
            return self.inner.generate(
                [prompts[i] for i in indices], max_tokens=max_tokens, temperature=temperature, stop=stop, seed=seed
            )

        return self._serve("generate", requests, ask, generation_to_dict, generation_from_dict)

    def choose(
        self, prompts: Sequence[str], options: Sequence[Sequence[str]], *, seed: int | None = None
    ) -> list[Choice]:
        requests = [{"prompt": p, "options": list(o), "seed": seed} for p, o in zip(prompts, options, strict=True)]

        def ask(indices: list[int]) -> list[Choice]:
            return self.inner.choose([prompts[i] for i in indices], [options[i] for i in indices], seed=seed)

        return self._serve("choose", requests, ask, choice_to_dict, choice_from_dict)

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def prefix_priority(self, priority: int) -> AbstractContextManager[None]:
        return prefix_hint(self.inner, priority)

    def get_state(self) -> dict[str, Any]:
        return {"hits": self.hits, "misses": self.misses, "inner": state_of(self.inner)}

    def set_state(self, state: dict[str, Any]) -> None:
        self.hits, self.misses = int(state["hits"]), int(state["misses"])
        set_state_of(self.inner, state.get("inner"))

    def close(self) -> None:
        with self._lock:
            self._db.close()
        close_model(self.inner)
