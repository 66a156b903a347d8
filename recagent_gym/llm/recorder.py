"""A JSONL log of every request and response (or error) through any :class:`LanguageModel`, secrets redacted."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from recagent_gym.llm.protocol import Choice, Generation, LanguageModel, prefix_hint
from recagent_gym.llm.secrets import redact
from recagent_gym.llm.serialize import choice_to_dict, generation_to_dict
from recagent_gym.llm.wrapping import close_model, set_state_of, state_of


class RecordingLLM:
    """Appends one JSON line per call: ``time``, ``model``, ``kind``, ``params``, ``prompts`` (and ``options``),
    then ``responses`` or ``error``. Every line passes through :func:`~recagent_gym.llm.secrets.redact`."""

    def __init__(self, inner: LanguageModel, path: str | Path) -> None:
        self.inner = inner
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self.records = 0

    @property
    def name(self) -> str:
        return self.inner.name

    def _write(self, record: dict[str, Any]) -> None:
        line = redact(json.dumps(record, ensure_ascii=False))
        with self._lock, self.path.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")
            self.records += 1

    def generate(
        self,
        prompts: Sequence[str],
        *,
        max_tokens: int = 64,
        temperature: float = 0.0,
        stop: Sequence[str] = (),
        seed: int | None = None,
    ) -> list[Generation]:
        record: dict[str, Any] = {
            "time": time.time(),
            "model": self.inner.name,
            "kind": "generate",
            "params": {"max_tokens": max_tokens, "temperature": temperature, "stop": list(stop), "seed": seed},
            "prompts": list(prompts),
        }
        try:
            results = self.inner.generate(prompts, max_tokens=max_tokens, temperature=temperature, stop=stop, seed=seed)
        except Exception as exc:
            self._write({**record, "error": f"{type(exc).__name__}: {exc}"})
            raise
        self._write({**record, "responses": [generation_to_dict(r) for r in results]})
        return results

    def choose(
        self, prompts: Sequence[str], options: Sequence[Sequence[str]], *, seed: int | None = None
    ) -> list[Choice]:
        record: dict[str, Any] = {
            "time": time.time(),
            "model": self.inner.name,
            "kind": "choose",
            "params": {"seed": seed},
            "prompts": list(prompts),
            "options": [list(o) for o in options],
        }
        try:
            results = self.inner.choose(prompts, options, seed=seed)
        except Exception as exc:
            self._write({**record, "error": f"{type(exc).__name__}: {exc}"})
            raise
        self._write({**record, "responses": [choice_to_dict(r) for r in results]})
        return results

    def prefix_priority(self, priority: int) -> AbstractContextManager[None]:
        return prefix_hint(self.inner, priority)

    def get_state(self) -> dict[str, Any]:
        return {"records": self.records, "inner": state_of(self.inner)}

    def set_state(self, state: dict[str, Any]) -> None:
        self.records = int(state["records"])
        set_state_of(self.inner, state.get("inner"))

    def close(self) -> None:
        close_model(self.inner)
