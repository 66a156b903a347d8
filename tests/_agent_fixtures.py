"""Shared pieces of the agent tests: a tiny dataset, a light memory, and a deterministic taste-aware model."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from recagent_gym.data.schema import Dataset
from recagent_gym.llm.testing import HashingEmbedder, ScriptedLLM
from recagent_gym.runs.config import Config
from recagent_gym.users.agent import LLMUserModel

GENRES = ("Action", "Comedy", "Drama", "Horror", "Romance")
TITLES = [
    "Iron Fist",
    "Steel Rain",
    "Fast Roads",
    "Last Stand",
    "Blade Runner Redux",
    "Night Raid",  # Action
    "Happy Days",
    "Silly Walks",
    "Big Laughs",
    "Funny Bones",
    "Crazy Uncle",
    "Giggle Town",  # Comedy
    "Quiet River",
    "Long Winter",
    "Broken Home",
    "Sad Letters",
    "Matrix, The",
    "Grey Morning",  # Drama
    "Dark Cellar",
    "Blood Moon",
    "Scream House",
    "Ghost Ward",
    "Creeping Fog",
    "Hollow Eyes",  # Horror
    "Paris Kiss",
    "Summer Love",
    "Sweet Hearts",
    "First Date",
    "Rose Garden",
    "Moonlight Waltz",  # Romance
]


def tiny_dataset() -> Dataset:
    """30 items in 5 genres; users 0-2 like Action, users 3-5 like Romance; users 0-1-3 are friends."""
    items = pd.DataFrame(
        {
            "item_id": range(30),
            "raw_id": [str(i) for i in range(30)],
            "title": TITLES,
            "genres": [(GENRES[i // 6],) for i in range(30)],
            "year": [1990 + i for i in range(30)],
            "description": ["" for _ in range(30)],
            "tags": ["" for _ in range(30)],
        }
    )
    liked = {0: 0, 1: 0, 2: 0, 3: 4, 4: 4, 5: 4}
    users = pd.DataFrame(
        {
            "user_id": range(6),
            "raw_id": [str(u) for u in range(6)],
            "name": ["Ann", "Bob", "Cid", "Dee", "Eve", "Fay"],
            "gender": ["F", "M", "M", "F", "F", "F"],
            "age": [30, 40, 25, 35, 50, 22],
            "traits": ["curious"] * 6,
            "career": ["engineer"] * 6,
            "interests": [(GENRES[liked[u]],) for u in range(6)],
            "features": [("Watcher", "Chatter"), ("Critic",), ("Explorer",), ("Poster",), ("Watcher",), ()],
            "activity": [0.5] * 6,
            "diversity": [0.5] * 6,
            "conformity": [0.5] * 6,
        }
    )
    rows = [(u, liked[u] * 6 + k, 4.0, 1000 * u + k) for u in range(6) for k in range(3)]
    interactions = pd.DataFrame(rows, columns=["user_id", "item_id", "rating", "timestamp"])
    social = pd.DataFrame({"user_1": [0, 0], "user_2": [1, 3], "relationship": ["friend", "friend"]})
    dataset = Dataset("tiny", items, users, interactions, social)
    dataset.validate()
    return dataset


@dataclass
class Note:
    content: str
    kind: str
    time_h: float


class FakeMemory:
    """Keeps every observation; ``retrieve`` returns the newest; ``flushes`` counts batched flushes."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.notes: list[Note] = []
        self.flushes = 0

    def observe(self, texts: Sequence[str], time_h: float, *, kind: str = "observation") -> None:
        self.notes += [Note(t, kind, time_h) for t in texts]

    def retrieve(self, query: str | None, time_h: float, top_n: int | None = None) -> list[Note]:
        return self.notes[::-1][: top_n or 5]

    def get_state(self) -> dict[str, Any]:
        return {"notes": [[n.content, n.kind, n.time_h] for n in self.notes], "flushes": self.flushes}

    def set_state(self, state: dict[str, Any]) -> None:
        self.notes = [Note(*n) for n in state["notes"]]
        self.flushes = state["flushes"]


class FakeMemoryBackend:
    def __init__(self) -> None:
        self.flush_batches: list[int] = []

    def create(self, agent_name: str, seed: int) -> FakeMemory:
        return FakeMemory(agent_name)

    def flush(self, memories: Sequence[FakeMemory], time_h: float) -> None:
        self.flush_batches.append(len(memories))
        for m in memories:
            m.flushes += 1


_CANDIDATE = re.compile(r"Movie: [^\n]*\[(?P<genres>[^\]]*)\]\nWatched:$")
_YES_SHOT = re.compile(r"\[(?P<genres>[^\]]*)\]\nWatched: Yes")


def taste_chooser(prompt: str, options: Sequence[str]) -> Sequence[float]:
    """Yes/No scoring that prefers candidates sharing a genre with the Yes examples; other choices: first option."""
    if tuple(options) == (" Yes", " No"):
        match = _CANDIDATE.search(prompt)
        if match is None:  # the content-free candidate
            return [-1.0, -1.0]
        liked = {g for m in _YES_SHOT.finditer(prompt) for g in m["genres"].split(", ")}
        overlap = len(set(match["genres"].split(", ")) & liked)
        return [-0.5 + 2.0 * overlap, -1.0]
    return [0.0] + [-1.0] * (len(options) - 1)


def taste_llm(**kwargs: Any) -> ScriptedLLM:
    return ScriptedLLM(chooser=taste_chooser, default="I liked it a lot, great story.", **kwargs)


def make_config(overrides: dict[str, Any] | None = None) -> Config:
    """The root config :func:`make_model` builds its agents from."""
    # genres in the scoring lines: the taste-aware fake model reads them
    # the Yes/No item score: the scripted models answer its options (the default, title continuation, reads the list)
    data: dict[str, Any] = {
        "user": {
            "patience": 3.0,
            "history_shots": 3,
            "negative_shots": 3,
            "scoring_genres": True,
            "llm_item_score": "yes_no",
        }
    }
    for section, values in (overrides or {}).items():
        data.setdefault(section, {}).update(values)
    return Config.model_validate(data)


def make_model(llm: Any = None, overrides: dict[str, Any] | None = None, **kwargs: Any) -> LLMUserModel:
    config = make_config(overrides)
    return LLMUserModel(
        tiny_dataset(),
        config.user,
        llm or taste_llm(),
        HashingEmbedder(32),
        social=config.social,
        memory_backend=FakeMemoryBackend(),
        llm_backend=config.llm.backend,
        **kwargs,
    )


def rngs(seed: int, n: int) -> list[np.random.Generator]:
    return [np.random.default_rng([seed, k]) for k in range(n)]
