"""The social round's LLM calls batched: turn k of every chat in one call, the posts in the first turn's call, in
the single env and across the vector env's sub-envs; each chat and post reads as it would alone."""

from __future__ import annotations

import numpy as np
import pytest

from recagent_gym.llm.seeding import derive_seed
from recagent_gym.llm.testing import HashingEmbedder, ScriptedLLM
from recagent_gym.runs.config import Config
from recagent_gym.runs.make_env import candidates_vector_env
from recagent_gym.social.chat import Speaker, run_chats
from recagent_gym.social.post import chats_and_posts, write_posts
from recagent_gym.users.agent import social_round

from ._env_fixtures import make_dataset


def echo_llm(**kwargs) -> ScriptedLLM:
    """Every reply depends on its prompt (a chat reads its own dialogue), so a mixed-up batch would show."""
    return ScriptedLLM(default=lambda prompt: f"I keep thinking about movie {derive_seed(prompt) % 997} these days.")


def people(n: int) -> list[Speaker]:
    return [
        Speaker(u, f"Agent{u}", f"likes genre {u % 3}", f"Agent{u} remembers: movie {u}", (f"Movie {u}",))
        for u in range(n)
    ]


def test_turn_k_of_every_chat_is_one_call_and_each_chat_reads_as_alone() -> None:
    who = people(6)
    pairs = [(who[0], who[1]), (who[2], who[3]), (who[4], who[5])]
    llm = echo_llm()
    together = run_chats(llm, pairs, turns=4, max_tokens=30, clock="Monday", seed=7)
    assert llm.batches == 4  # one call per turn for the three chats
    for pair, chat in zip(pairs, together, strict=True):
        (alone,) = run_chats(echo_llm(), [pair], turns=4, max_tokens=30, clock="Monday", seed=7)
        assert chat.lines == alone.lines and len(chat.lines) == 4
    assert len({tuple(c.lines) for c in together}) == 3


def test_posts_ride_with_the_first_chat_turn() -> None:
    who = people(6)
    pairs, authors = [(who[0], who[1]), (who[2], who[3])], [who[4], who[5]]
    llm = echo_llm()
    chats, posts = chats_and_posts(
        llm, pairs, authors, turns=3, max_tokens=30, clock="Monday", chat_seed=11, post_seed=99
    )
    assert llm.batches == 3  # the posts cost no call of their own
    first = [h for h in llm.history if h["seed"] == 11]
    assert len(first) == 4 and sum("Agent4" in h["prompt"] or "Agent5" in h["prompt"] for h in first) == 2
    # the chats' prompts and seeds are run_chats' own; the posts' prompts are write_posts' (the scripted model
    # answers a prompt whatever the seed, so the texts match too)
    seq = echo_llm()
    assert [c.lines for c in chats] == [
        c.lines for c in run_chats(seq, pairs, turns=3, max_tokens=30, clock="Monday", seed=11)
    ]
    alone = write_posts(seq, authors, max_tokens=30, clock="Monday", seed=99)
    assert [(p.user_id, p.text, p.fallback) for p in posts] == [(p.user_id, p.text, p.fallback) for p in alone]
    assert seq.batches == 4
    assert [h["prompt"] for h in llm.history] == [h["prompt"] for h in seq.history[:2]] + [
        h["prompt"] for h in seq.history[6:]
    ] + [h["prompt"] for h in seq.history[2:6]]


def test_a_bad_post_is_reasked_with_the_chat_turn_and_falls_back_counted() -> None:
    who = people(4)
    llm = ScriptedLLM(rules=[(r"post", "ok")], default="Seen anything good lately, friend?")
    chats, posts = chats_and_posts(
        llm, [(who[0], who[1])], [who[2], who[3]], turns=2, max_tokens=30, clock="Monday", chat_seed=5, post_seed=6
    )
    assert llm.batches == 3  # turn 0 (chat + posts), its re-ask (the posts), turn 1
    assert [h["seed"] for h in llm.history] == [5, 5, 5, 6, 6, 15]
    assert all(p.fallback and p.reasked for p in posts) and posts[0].text == "Just watched Movie 2. Worth a look!"
    assert chats[0].fallbacks == 0 and len(chats[0].lines) == 2


@pytest.mark.parametrize("case", ["no chats", "no posts", "whole chats"])
def test_posts_keep_their_own_call_otherwise(case) -> None:
    who = people(4)
    pairs = [] if case == "no chats" else [(who[0], who[1])]
    authors = [] if case == "no posts" else [who[2]]
    llm = echo_llm()
    chats, posts = chats_and_posts(
        llm, pairs, authors, turns=2, max_tokens=30, clock="Monday", chat_seed=5, post_seed=6,
        one_call=case == "whole chats",
    )  # fmt: skip
    assert len(chats) == len(pairs) and len(posts) == len(authors)
    # (a one-line reply is no whole chat: re-asked, then the template lines)
    assert llm.batches == {"no chats": 1, "no posts": 2, "whole chats": 3}[case]
    if authors:
        assert [h["seed"] for h in llm.history if "Agent2" in h["prompt"]] == [6]  # the posts' own call and seed


# ---------------------------------------------------------------------------------------------- the vector env
SOCIAL = {
    "user": {"model": "llm", "session_end_batch": 4, "score_cache": False, "llm_item_score": "yes_no"},
    "memory": {"implementation": "recagent", "sensory": False, "reflection": False},
    "social": {"activation_rate": 0.6, "max_active_agents": 8, "max_chat_turns": 2, "utterance_max_tokens": 24},
    "env": {"page_size": 3, "max_pages": 2},
}


def unbatched(llm, pairs, authors, *, turns, max_tokens, clock, chat_seed, post_seed, one_call=False):
    """The round's calls before the posts rode with the chats: the chats, then the posts in a call of their own."""
    chats = run_chats(llm, pairs, turns=turns, max_tokens=max_tokens, clock=clock, seed=chat_seed) if pairs else []
    posts = write_posts(llm, authors, max_tokens=max_tokens, clock=clock, seed=post_seed) if authors else []
    return chats, posts


def social_run(dataset, steps: int = 32):
    """The vector env's social events and step records over ``steps`` steps, and the LLM's call count."""
    llm = echo_llm()
    config = Config.model_validate(SOCIAL)
    venv = candidates_vector_env(
        4, dataset, "llm", config=config, llm=llm, embedder=HashingEmbedder(16), n_candidates=8
    )
    venv.reset(seed=3)
    actions = np.random.default_rng(0).uniform(-1, 1, size=(steps, 4, 8))
    events, records = [], []
    for step_actions in actions:
        _, rewards, _, _, infos = venv.step(step_actions)
        records.append((rewards.tolist(), [(i["user_id"], i["page"], i["item"]) for i in infos["env_infos"]]))
        events += [e for i in infos["env_infos"] for e in i.get("reset", {}).get("social_events", [])]
    venv.close()
    talk = [(e["round"], e["kind"], e["agent"], e["text"], e["titles"]) for e in events if e["kind"] != "take_action"]
    return talk, records, llm.batches


@pytest.fixture(scope="module")
def social_dataset():
    return make_dataset(n_users=40, n_items=60)


@pytest.mark.slow
def test_vector_env_social_round_reads_as_the_unbatched_calls_with_fewer_calls(social_dataset, monkeypatch) -> None:
    talk, records, batches = social_run(social_dataset)
    again = social_run(social_dataset)
    assert (talk, records, batches) == again  # deterministic: a run is its own recording
    rounds = {(r, kind) for r, kind, *_ in talk}
    both = {r for r, kind in rounds if kind == "chat"} & {r for r, kind in rounds if kind == "post"}
    assert len(both) >= 2, "the settings should give rounds with chats and posts"
    monkeypatch.setattr(social_round, "chats_and_posts", unbatched)
    old_talk, old_records, old_batches = social_run(social_dataset)
    assert talk == old_talk and records == old_records  # every chat line and post as before
    assert batches == old_batches - len(both)  # one call fewer per round with chats and posts
