"""The LLM agent on the real embedded Gemma 3 270M and MiniLM, bundled data: small, for CI."""

from __future__ import annotations

import numpy as np
import pytest

from recagent_gym.data.load import load_dataset
from recagent_gym.runs.config import Config
from recagent_gym.users.agent import LLMUserModel
from recagent_gym.users.protocol import Action, Context, Page

pytestmark = [pytest.mark.embedded_llm, pytest.mark.slow]


@pytest.fixture(scope="module")
def dataset():  # type: ignore[no-untyped-def]
    return load_dataset("bundled")


def make(dataset, llm, embedder, **user):  # type: ignore[no-untyped-def]
    config = Config.model_validate(
        {
            "user": {"history_shots": 6, "negative_shots": 6, **user},
            "social": {"activation_rate": 1.0, "max_active_agents": 2, "max_chat_turns": 2},
            "memory": {"sensory": False},
        }
    )
    return LLMUserModel(dataset, config.user, llm, embedder, social=config.social, memory=config.memory)


def genre_items(dataset, genre: str, avoid: set[str], n: int) -> list[int]:  # type: ignore[no-untyped-def]
    pop = dataset.item_popularity()
    ok = [
        i
        for i in np.argsort(-pop)
        if genre in dataset.items["genres"].iat[i] and not avoid & set(dataset.items["genres"].iat[i])
    ]
    return [int(i) for i in ok[:n]]


def test_scores_depend_on_the_user(dataset, embedded_llm, sentence_embedder) -> None:
    """Two users with disjoint top genres rank the same candidates differently, each towards their own genres."""
    model = make(dataset, embedded_llm, sentence_embedder)
    interests = dataset.users["interests"]
    a = next(u for u in range(dataset.n_users) if "Children" in interests[u] and "Horror" not in interests[u])
    b = next(u for u in range(dataset.n_users) if "Horror" in interests[u] and "Children" not in interests[u])
    kids = genre_items(dataset, "Children", {"Horror", "Thriller"}, 3)
    horror = genre_items(dataset, "Horror", {"Children", "Animation", "Comedy"}, 3)
    items = kids + horror
    gap = {}
    for u in (a, b):
        scores = model.score_items(u, items, np.random.default_rng(0))
        assert scores.shape == (6,) and np.all(np.isfinite(scores))
        gap[u] = scores[:3].mean() - scores[3:].mean()
    assert gap[a] > gap[b]
    assert model.fallbacks == 0


def test_session_feelings_and_chat_with_memory(dataset, embedded_llm, sentence_embedder) -> None:
    # the Yes/No score without the prior (``user.prior_weights: null``); the default agents are the next test's
    model = make(
        dataset, embedded_llm, sentence_embedder, watch_threshold=-10.0, prior_weights=None, llm_item_score="yes_no"
    )  # the Yes/No score: one prompt per item (the count below)
    rng = np.random.default_rng(1)
    user = 0
    model.start_session(user, rng)
    page = Page(items=tuple(genre_items(dataset, "Action", set(), 20)[-4:]))
    response = model.respond(page, Context(user_id=user, time_h=1.0), rng)
    assert response.action == Action.WATCH and response.item in page.items
    assert sorted(response.extra["permutation"]) == list(range(4))
    assert response.usage.calls == 5  # 4 items + the content-free calibration prompt, one batched call
    model.end_sessions([user])
    model.write_ended()
    assert model.agent(user).feelings[response.item]
    assert 1 <= model.agent(user).ratings[response.item] <= 5
    memory = [r.content for r in model.memory(user).records()]
    assert any(model.title(response.item) in text for text in memory)
    # two friends chat; both memories receive the dialogue
    model.graph = type("Pair", (), {"friends": staticmethod(lambda u: [1] if u == 0 else [0] if u == 1 else [])})()
    rng2 = np.random.default_rng(0)
    events = []
    for _ in range(5):
        events = [e for e in model.social_round(rng2, 5.0, users=[0, 1]) if e["type"] in ("chat", "post")]
        if events:
            break
    assert events, "no agent entered the social media in 5 rounds"
    for event in events:
        people = event["users"] if event["type"] == "chat" else [event["user"], *event["recipients"]]
        for u in people:
            assert any(r.kind == "dialogue" for r in model.memory(u).records())


def test_the_default_agents_score_title_continuation_with_the_shipped_prior(
    dataset, embedded_llm, sentence_embedder
) -> None:
    from recagent_gym.users.prior_default import BUNDLED_PRIOR

    model = make(dataset, embedded_llm, sentence_embedder)
    assert model.config.prior_weights == str(BUNDLED_PRIOR) and model._pages.prior is not None
    assert (model.config.llm_item_score, model.config.prior_fit) == ("continuation", "parts")
    rng = np.random.default_rng(3)
    model.start_session(2, rng)
    page = Page(items=tuple(genre_items(dataset, "Comedy", set(), 20)[-5:]))
    response = model.respond(page, Context(user_id=2, time_h=1.0), rng)
    assert response.action in (Action.WATCH, Action.NEXT, Action.SEARCH, Action.LEAVE)
    assert response.action != Action.WATCH or response.item in page.items
    assert response.extra["fallbacks"] == 0 and response.usage.calls >= 1  # the model scored the titles
