"""A persistent response cache in SQLite, wrapping any :class:`LanguageModel`.

The key hashes the inner model's name (backend and model), what else changes its numbers (the embedded model's
decoding: :func:`numerics_of`), the kind of call, the prompt (and options), every
parameter and the seed. ``read_write`` answers hits from the file and asks the inner model for the misses only (one
batched call); ``replay`` never asks it and raises :class:`CacheMiss` instead, so a recorded run can be repeated
offline and bit-identically. Hits are counted in ``Usage.cached_calls`` (latency 0, tokens as first recorded).

A damaged cache heals instead of failing every later run: an SQLite file that cannot be read is moved aside
(``<name>.damaged-<ns>``, logged) and an empty cache started in its place (a file that is no SQLite file at all is
refused in one line and never touched); a row that does not parse, or whose kind
and request differ from the ones it is looked up for (each row keeps what made it), is a miss, logged once, and
replaced by the fresh answer (one transaction). In ``replay`` mode a damaged file is one error line.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal, TypeVar

from recagent_gym.llm.protocol import CacheMiss, Choice, Generation, LanguageModel, LLMError, Usage, prefix_hint
from recagent_gym.llm.serialize import choice_from_dict, choice_to_dict, generation_from_dict, generation_to_dict
from recagent_gym.llm.wrapping import close_model, set_state_of, state_of

R = TypeVar("R", Generation, Choice)
CacheMode = Literal["read_write", "replay"]
log = logging.getLogger(__name__)
SQLITE_HEADER = b"SQLite format 3\x00"
"""The first bytes of every SQLite database: a file without them is not a cache, however damaged."""


def _connect(path: Path) -> sqlite3.Connection:
    # One connection shared by threads, serialised by a lock (sqlite3's default forbids cross-thread use).
    db = sqlite3.connect(str(path), check_same_thread=False)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute(
            "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, kind TEXT NOT NULL, "
            "request TEXT NOT NULL, response TEXT NOT NULL, created REAL NOT NULL)"
        )
        db.commit()
    except BaseException:
        db.close()
        raise
    return db


def open_cache(path: Path, mode: str) -> sqlite3.Connection:
    """The cache database at ``path``; a damaged file is moved aside and replaced by an empty cache (``read_write``)
    or refused in one line (``replay``)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return _connect(path)
    except sqlite3.OperationalError as exc:  # cannot open or write (a folder, no permission): not damage
        raise LLMError(f"response cache {path}: cannot open it ({exc})") from None
    except OSError as exc:
        raise LLMError(f"response cache {path}: cannot create its folder ({exc.strerror or exc})") from None
    except sqlite3.DatabaseError as exc:  # "file is not a database", "database disk image is malformed"
        if mode == "replay" or not path.is_file():
            raise LLMError(f"response cache {path} is not a readable SQLite cache ({exc})") from None
        with path.open("rb") as handle:
            ours = handle.read(len(SQLITE_HEADER)) == SQLITE_HEADER
        if not ours:  # some other file (a typo'd path): never moved, never written
            raise LLMError(f"llm.cache_path {path} is not an SQLite file; point it at a new or cache file") from None
    aside = path.with_name(f"{path.name}.damaged-{time.time_ns()}")
    for side in ("", "-wal", "-shm"):
        if Path(f"{path}{side}").exists():
            os.replace(f"{path}{side}", f"{aside}{side}")
    log.warning("response cache %s was damaged: moved to %s; starting an empty cache", path, aside.name)
    return _connect(path)


def numerics_of(model: object) -> str:
    """What besides its name changes a model's numbers (``numerics`` of the first model down the ``inner`` chain that
    has one: the embedded model's decoding and segmentation), or "" (then the key is what it always was)."""
    seen = 0
    while model is not None and seen < 16:
        value = getattr(model, "numerics", None)
        if isinstance(value, str):
            return value
        model, seen = getattr(model, "inner", None), seen + 1
    return ""


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
        self._db = open_cache(self.path, mode)
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self.damaged = 0
        """Rows found damaged or foreign (served as misses)."""

    @property
    def name(self) -> str:
        return self.inner.name

    def _lookup(
        self, key: str, kind: str, request: dict[str, Any], from_dict: Callable[[dict[str, Any]], R]
    ) -> R | None:
        """The stored answer, if its row is whole and was made by this very request; else None (a miss)."""
        try:
            with self._lock:
                row = self._db.execute("SELECT response, kind, request FROM responses WHERE key = ?", (key,)).fetchone()
            if row is None:
                return None
            if row[1] != kind or json.loads(row[2]) != json.loads(json.dumps(request, ensure_ascii=False)):
                raise ValueError("the row was made by another request")
            return from_dict(json.loads(row[0]))
        except (sqlite3.DatabaseError, ValueError, TypeError, KeyError, AttributeError) as exc:
            self.damaged += 1
            if self.damaged == 1:  # logged once per cache: the row is recomputed and replaced
                log.warning("response cache %s: a damaged or foreign entry is recomputed (%s)", self.path, exc)
            return None

    def _store(self, rows: list[tuple[str, str, str, str]]) -> None:
        try:
            with self._lock:
                self._db.executemany(
                    "INSERT OR REPLACE INTO responses (key, kind, request, response, created) VALUES (?, ?, ?, ?, ?)",
                    [(*row, time.time()) for row in rows],
                )
                self._db.commit()
        except sqlite3.DatabaseError as exc:  # a damaged page: the answers are kept for this run only
            log.warning("response cache %s: could not store %d answers (%s)", self.path, len(rows), exc)

    def _serve(
        self,
        kind: str,
        requests: list[dict[str, Any]],
        ask: Callable[[list[int]], Sequence[R]],
        to_dict: Callable[[R], dict[str, Any]],
        from_dict: Callable[[dict[str, Any]], R],
    ) -> list[R]:
        numerics = numerics_of(self.inner)
        backend = {"backend": self.inner.name, **({"numerics": numerics} if numerics else {})}
        keys = [_key({**backend, "kind": kind, **request}) for request in requests]
        results: list[R | None] = [None] * len(requests)
        missing: list[int] = []
        for i, key in enumerate(keys):
            result = self._lookup(key, kind, requests[i], from_dict)
            if result is None:
                missing.append(i)
            else:
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
