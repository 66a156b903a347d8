"""Chat, post, recently heard items and the social round of the LLM agents (scripted model, fake memory)."""

from __future__ import annotations

import numpy as np

from recagent_gym.llm.testing import ScriptedLLM
from recagent_gym.social.titles import TitleMatcher
from tests._agent_fixtures import make_model, taste_chooser

SOCIAL = {"social": {"activation_rate": 1.0, "max_active_agents": 10, "max_chat_turns": 2}}


def social_chooser(prompt, options):
    if len(options) == 3 and "enter the social media" in options[1]:
        if prompt.startswith("N/A"):  # the content-free calibration prompt: no preference
            return [-1.0, -1.0, -1.0]
        return [-50.0, 0.0, -50.0]
    return taste_chooser(prompt, options)


class RingGraph:
    def __init__(self, n: int) -> None:
        self.n = n

    def friends(self, u: int) -> list[int]:
        return [(u - 1) % self.n, (u + 1) % self.n]


def test_title_matcher_finds_titles_and_ignores_ordinary_words() -> None:
    titles = ["Matrix, The", "Heat", "Alien", "Blood Moon", "Alien", "Up"]
    matcher = TitleMatcher(titles, popularity=[5, 1, 1, 1, 9, 1])
    assert matcher.find("Have you seen The Matrix? And Blood Moon!") == [0, 3]
    assert matcher.find("matrix is fine") == []  # one-word form must be capitalised in the text
    assert matcher.find("I loved Alien") == [4]  # same title twice: the more popular item
    assert matcher.find("the heat was up, what an alien feeling") == []  # short or lowercase single words
    assert matcher.find("BLOOD moon at night") == [3]


def test_chats_and_posts_reach_memories_and_heard_items() -> None:
    llm = ScriptedLLM(
        chooser=social_chooser,
        rules=[
            (r"Post by", "Go watch Ghost Ward now!"),
            (r"is chatting with", "Have you seen Blood Moon? It is great."),
        ],
    )
    model = make_model(llm, overrides=SOCIAL)
    events = model.social_round(np.random.default_rng(0), 10.0, [5])
    kinds = [e["type"] for e in events]
    assert all(e["user"] != 5 for e in events if "user" in e)
    assert kinds.count("take_action") >= 1 and all(e["choice"] == "social" for e in events if "choice" in e)
    chats = [e for e in events if e["type"] == "chat"]
    posts = [e for e in events if e["type"] == "post"]
    assert chats or posts
    for chat in chats:
        a, b = chat["users"]
        assert b in model.friends(a)
        assert len(chat["lines"]) == 2
        for u in (a, b):
            assert any(n.kind == "dialogue" and "Blood Moon" in n.content for n in model.memory(u).notes)
            assert 19 in [h["item"] for h in model.agent(u).heard]  # "Blood Moon" is item 19
    for post in posts:
        assert post["recipients"] == [f for f in model.friends(post["user"]) if f != 5]
        assert post["items"] == [21]  # Ghost Ward
        for f in post["recipients"]:
            assert any("posted: Go watch Ghost Ward now!" in n.content for n in model.memory(f).notes)
            assert model.agent(f).heard[-1]["item"] == 21
    # users without friends are reported, never silently dropped
    assert {e["user"] for e in events if e["type"] == "no_friends"} <= {2, 4}


def test_chat_turns_are_batched_and_fallbacks_name_recent_movies() -> None:
    llm = ScriptedLLM(chooser=social_chooser, default="")  # every utterance invalid: re-ask, then fallback
    model = make_model(llm, overrides=SOCIAL, graph=RingGraph(6))
    events = model.social_round(np.random.default_rng(3), 1.0)
    chats = [e for e in events if e["type"] == "chat"]
    assert chats
    assert len(chats) >= 2
    # 2 turns x (one batch for all chats + one re-ask batch) + at most 2 post batches, not one per chat
    generate_batches = {h["seed"] for h in llm.history if h["kind"] == "generate"}  # one seed per batch
    assert len(generate_batches) <= 2 * 2 + 2
    for chat in chats:
        assert chat["fallbacks"] == 2
        speaker, line = chat["lines"][0]
        recent = model.title(model.history(speaker)[-1])
        assert recent in line
        listener = chat["users"][1]
        assert model.history(speaker)[-1] in [h["item"] for h in model.agent(listener).heard]
        assert model.counters(chat["users"][0])["counts"]["chat"]["fallback"] == 1


def test_heard_capacity_and_recent_heard_item() -> None:
    model = make_model(overrides={"user": {"heard_capacity": 2}})
    model.hear(0, [24, 25, 26], 1.0, source=3, kind="post")
    assert [h["item"] for h in model.agent(0).heard] == [25, 26]
    assert model.heard_item(0) == 26
    assert model.heard_item(0, extra=[1]) == 26  # item 1 is in user 0's history: not a search target


def test_take_action_uses_priors_when_the_model_has_no_scores() -> None:
    model = make_model(ScriptedLLM(choices=[2] * 400, default="x"))
    counts = {"recommender": 0, "social": 0, "nothing": 0}
    rng = np.random.default_rng(0)
    for _ in range(100):
        for choice in model.take_action([0, 4], rng, 0.0):
            counts[choice] += 1
    assert counts["nothing"] > counts["recommender"] > 0 and counts["social"] > 0


def test_social_disabled_returns_no_events() -> None:
    model = make_model(overrides={"social": {"enabled": False}})
    assert model.social_round(np.random.default_rng(0), 1.0) == []
