"""One embedder shared by many threads (the simulator's agents): a cache, calls shared across callers, and the
texts of urgent callers first.

:class:`CachedEmbedder` wraps any embedder (``llm/embedder.py``); the vectors are the wrapped embedder's, unchanged.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import Future

import numpy as np

from recagent_gym.llm.embedder import Embedder, _dim_of, embedder_name
from recagent_gym.llm.priority import REQUEST_PRIORITY

NO_CALL = -(2**31)
"""The level of the model calls in progress when there is none."""


class _Levels:
    """Texts waiting for a model call, by the priority of the most urgent caller asking for each (first come first
    served within a level)."""

    def __init__(self) -> None:
        self._by_level: dict[int, dict[str, None]] = {}
        self._level: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._level)

    def add(self, text: str, level: int) -> None:
        """Queue ``text`` at ``level``; a text queued lower moves up (a text queued higher stays)."""
        old = self._level.get(text)
        if old is not None:
            if old >= level:
                return
            del self._by_level[old][text]
            if not self._by_level[old]:
                del self._by_level[old]
        self._level[text] = level
        self._by_level.setdefault(level, {})[text] = None

    def top(self) -> int:
        return max(self._by_level, default=NO_CALL)

    def take(self, level: int) -> list[str]:
        """Every text queued at ``level``, off the queue."""
        texts = list(self._by_level.pop(level, {}))
        for text in texts:
            del self._level[text]
        return texts


class CachedEmbedder:
    """An embedder shared by many threads: each distinct text is embedded once, texts asked for while the model is
    busy go into its next call together, and the most urgent callers' texts go first.

    - **Cache**: text -> unit vector, least recently used evicted beyond ``capacity`` texts (384 floats each:
      ~1.6 KB). A text asked for again (a query every agent asks, an identical post heard by ten friends, a record
      re-embedded on resume) costs a dict look-up.
    - **Batching across callers**: a caller finding work waiting and fewer than ``parallel`` model calls running
      runs the model on what is queued, and again until the queue is empty; callers arriving meanwhile queue their
      texts and wait for them. Agents' chains in their own threads thereby share a few model calls instead of
      making many small ones. The default is one call at a time: the texts arriving during a call then wait for the
      next one instead of starting a call of a few texts on the other core, which the simulation's own threads need
      (on 2 cores, 100 agents: 6-38 model calls per round instead of 10-58, and 5-18% less process CPU;
      ``docs/speed.md``). A MiniLM call of one text costs about four times a text's share of a call of 24.
    - **Urgent texts first**: a text waits at the priority of the most urgent context asking for it
      (:data:`~recagent_gym.llm.priority.REQUEST_PRIORITY`: in a simulator round an agent's retrieval query on
      its chain's page is 2, a chain's end 1, work done ahead 0). A model call embeds the texts of one level, the
      highest waiting; and a caller more urgent than every call in progress may run one more call beside them
      (``urgent_lane``), of the texts at its level or above, so a page's query waits for its own few texts, not
      behind a round's memory writes (on a CPU without bfloat16 kernels a call of 50 writes takes 0.65 s).

    Vectors come from the wrapped embedder unchanged (``inner``; :class:`~recagent_gym.llm.embedder.
    SentenceEmbedder` gives every text the vector it gets alone, so what is batched with what never shows). The
    cache is per process, never saved.
    """

    def __init__(
        self, inner: Embedder, *, capacity: int = 50_000, parallel: int | None = None, urgent_lane: bool = True
    ) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.inner = inner
        self.capacity = capacity
        self.parallel = parallel if parallel is not None else 1
        if self.parallel < 1:
            raise ValueError(f"parallel must be >= 1, got {self.parallel}")
        self.urgent_lane = urgent_lane
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._waiting: dict[str, Future[np.ndarray]] = {}
        self._queue = _Levels()
        self._running = 0
        self._calling: list[int] = []
        """The level of each model call in progress."""
        self._lane_busy = False
        self._lock = threading.Lock()
        self.texts = 0
        """Texts asked for (a repeat inside one call counts once)."""
        self.hits = 0
        """... of which were in the cache already."""
        self.model_calls = 0
        self.urgent_calls = 0
        """... of which ran in the urgent lane, beside a less urgent call."""
        self.embedded = 0
        """Texts the wrapped embedder computed."""

    @property
    def dim(self) -> int:
        return _dim_of(self.inner)

    @property
    def name(self) -> str:
        return embedder_name(self.inner)

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("pass a sequence of texts, not a single string")
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        level = REQUEST_PRIORITY.get()
        found: dict[str, np.ndarray] = {}
        pending: dict[str, Future[np.ndarray]] = {}
        with self._lock:
            for text in dict.fromkeys(texts):
                self.texts += 1
                vector = self._cache.get(text)
                if vector is not None:
                    self._cache.move_to_end(text)
                    self.hits += 1
                    found[text] = vector
                    continue
                future = self._waiting.get(text)
                if future is None:
                    future = self._waiting[text] = Future()
                if not future.running():  # a text in a call in progress is not queued again
                    self._queue.add(text, level)
                pending[text] = future
            floor = self._lead(level)
        if floor is not None:
            self._drain(floor)
        for text, future in pending.items():
            found[text] = future.result()
        return np.stack([found[t] for t in texts])

    def _lead(self, level: int) -> int | None:
        """Whether this caller runs model calls (under the lock): ``NO_CALL`` as one of the ``parallel`` callers
        (every level, the highest first), ``level`` in the urgent lane (levels >= its own), None if it waits."""
        if not len(self._queue):
            return None
        if self._running < self.parallel:
            self._running += 1
            return NO_CALL
        if self.urgent_lane and not self._lane_busy and self._calling and level > max(self._calling):
            self._lane_busy = True
            return level
        return None

    def _drain(self, floor: int) -> None:
        """Run the model on the queue's highest level until no level >= ``floor`` is left (see :meth:`_lead`)."""
        while True:
            with self._lock:
                level = self._queue.top()
                if level == NO_CALL or level < floor:
                    if floor == NO_CALL:
                        self._running -= 1
                    else:
                        self._lane_busy = False
                    return
                batch = self._queue.take(level)
                for text in batch:
                    self._waiting[text].set_running_or_notify_cancel()
                self._calling.append(level)
            try:
                vectors = np.asarray(self.inner(batch), dtype=np.float32)
                if vectors.shape[0] != len(batch):
                    raise ValueError(f"the embedder returned {vectors.shape[0]} rows for {len(batch)} texts")
            except BaseException as exc:  # every waiter of this batch gets the error; the queue goes on
                with self._lock:
                    self._calling.remove(level)
                    for text in batch:
                        self._waiting.pop(text).set_exception(exc)
                continue
            with self._lock:
                self._calling.remove(level)
                self.model_calls += 1
                self.urgent_calls += floor != NO_CALL
                self.embedded += len(batch)
                for text, vector in zip(batch, vectors, strict=True):
                    vector.flags.writeable = False  # shared by every caller: nobody may change it in place
                    self._cache[text] = vector
                    self._waiting.pop(text).set_result(vector)
                while len(self._cache) > self.capacity:
                    self._cache.popitem(last=False)

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"texts": self.texts, "hits": self.hits, "model_calls": self.model_calls,
                    "urgent_calls": self.urgent_calls, "embedded": self.embedded,
                    "cached": len(self._cache)}  # fmt: skip

    def close(self) -> None:
        """Close the wrapped embedder when it has anything to close (a :class:`~recagent_gym.llm.embedder_process.
        ProcessEmbedder`'s child); later calls fail with its reason, texts already cached still answer."""
        close = getattr(self.inner, "close", None)
        if close is not None:
            close()

    def __repr__(self) -> str:
        return f"CachedEmbedder({self.inner!r}, capacity={self.capacity})"


def shared_embedder(embedder: Embedder) -> Embedder:
    """``embedder`` behind a :class:`CachedEmbedder` (itself when it is one already)."""
    return embedder if isinstance(embedder, CachedEmbedder) else CachedEmbedder(embedder)
