"""The LLM user agent with scripted models: valid, user-dependent decisions, fallbacks, feelings, state, batching."""

from __future__ import annotations

import numpy as np
import pytest

from recagent_gym.llm.protocol import Choice, Usage
from recagent_gym.llm.testing import ScriptedLLM
from recagent_gym.users.protocol import Action, Context, Page, UserModel
from tests._agent_fixtures import make_model, rngs, taste_llm

ACTION_PAGE = Page(items=(0, 1, 2, 3, 4))
MIXED_PAGES = [Page(items=(6 * g + k for g in range(5)), index=k) for k in range(6)]


def mixed_page(k: int) -> Page:
    return Page(items=tuple(6 * g + (k % 6) for g in range(5)), index=k)


def run_session(model, user: int, seed: int, pages: int = 6) -> list:
    rng = np.random.default_rng(seed)
    model.start_session(user, rng)
    out = []
    for k in range(pages):
        response = model.respond(mixed_page(k), Context(user_id=user, step=k, time_h=float(k)), rng)
        out.append(response)
        if response.action == Action.LEAVE:
            break
    return out


def test_protocol_and_valid_responses() -> None:
    model = make_model()
    assert isinstance(model, UserModel)
    for response in run_session(model, 0, seed=1):
        page_items = set(response.extra["shown"])
        assert response.action in Action
        if response.action == Action.WATCH:
            assert response.item in page_items
        perm = response.extra["permutation"]
        assert sorted(perm) == list(range(5))
        assert response.usage.calls >= 5  # every eligible item scored (plus the calibration prompt)
        assert response.parse_ok and not response.fallback


def test_decisions_depend_on_the_user() -> None:
    """Action fans (users 0-2) watch Action items, Romance fans (3-5) Romance items, with the same pages."""
    model = make_model(overrides={"user": {"watch_threshold": 0.0, "watch_temperature": 0.2}})
    genre_of = model.dataset.items["genres"]
    watched = {u: [genre_of[r.item][0] for r in run_session(model, u, seed=u) if r.item is not None] for u in range(6)}
    assert all(watched[u] for u in range(6))
    assert all(g == "Action" for u in range(3) for g in watched[u])
    assert all(g == "Romance" for u in range(3, 6) for g in watched[u])


def test_page_order_is_shuffled_and_recorded() -> None:
    model = make_model()
    model.start_session(0, np.random.default_rng(0))
    perms = set()
    for k in range(8):
        page = mixed_page(k)
        r = model.respond(page, Context(user_id=0), np.random.default_rng(k))
        assert r.extra["shown"] == [page.items[j] for j in r.extra["permutation"]]
        perms.add(tuple(r.extra["permutation"]))
        model.start_session(0, np.random.default_rng(k))
    assert len(perms) > 1


def test_batched_equals_sequential_on_a_deterministic_model() -> None:
    pages = [(mixed_page(u), Context(user_id=u, time_h=1.0)) for u in range(4)]
    seq_model, batch_model = make_model(), make_model()
    for model in (seq_model, batch_model):
        for u, rng in enumerate(rngs(5, 4)):
            model.start_session(u, rng)
    seq = [seq_model.respond(p, c, r) for (p, c), r in zip(pages, rngs(9, 4), strict=True)]
    llm = batch_model.llm
    batches_before = llm.batches
    batch = batch_model.respond_batch(pages, rngs(9, 4))
    assert llm.batches - batches_before == 1  # all four users' decisions in one backend call
    for a, b in zip(seq, batch, strict=True):
        assert (a.action, a.item, a.query, a.extra["permutation"]) == (
            b.action,
            b.item,
            b.query,
            b.extra["permutation"],
        )
        assert a.extra["scores"] == pytest.approx(b.extra["scores"])
    assert seq_model.get_state() == batch_model.get_state()


def test_patience_ends_the_session_with_leave() -> None:
    model = make_model(overrides={"user": {"watch_threshold": 20.0, "search_interest_probability": 0.0}})
    responses = run_session(model, 0, seed=3, pages=50)
    assert responses[-1].action == Action.LEAVE
    assert all(r.action == Action.NEXT for r in responses[:-1])


def test_search_for_recently_heard_item() -> None:
    model = make_model(overrides={"user": {"watch_threshold": 20.0, "search_heard_probability": 1.0, "patience": 50}})
    model.hear(0, [25], 0.0, source=3, kind="post")
    rng = np.random.default_rng(0)
    model.start_session(0, rng)
    response = model.respond(ACTION_PAGE, Context(user_id=0), rng)
    assert response.action == Action.SEARCH  # patience (mean 50) is not spent after one page with this seed
    assert response.query == model.title(25) == "Summer Love"
    assert any("searched for Summer Love" in n.content for n in model.memory(0).notes)


class BrokenChooser(ScriptedLLM):
    """Answers ``choose`` with an option that is not among those given (``bad`` times), then like its parent."""

    def __init__(self, bad: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.bad = bad

    def choose(self, prompts, options, *, seed=None):
        answers = super().choose(prompts, options, seed=seed)
        out = []
        for answer in answers:
            if self.bad > 0:
                self.bad -= 1
                answer = Choice(index=len(options[0]) + 3, option="watch Something Else", usage=Usage(calls=1))
            out.append(answer)
        return out


def test_invalid_choice_is_reasked_once_then_falls_back_and_is_counted() -> None:
    from tests._agent_fixtures import taste_chooser

    # 6 prompts (5 items + calibration): all 6 invalid on the first ask, 1 still invalid on the re-ask.
    model = make_model(BrokenChooser(bad=7, chooser=taste_chooser, default="fine"))
    rng = np.random.default_rng(0)
    model.start_session(0, rng)
    response = model.respond(mixed_page(0), Context(user_id=0), rng)
    assert not response.parse_ok and response.fallback
    assert response.extra["reasked"] == 6 and response.extra["fallbacks"] == 1
    assert model.counters(0)["counts"]["item_scoring"] == {"asked": 1, "reasked": 1, "fallback": 1}
    assert response.action in Action  # still a valid decision
    if response.action == Action.WATCH:
        assert response.item in mixed_page(0).items


def test_direct_strategy_never_coerces_and_falls_back_to_next() -> None:
    # A model that names an item as free text is impossible here: choose returns an option index. An invalid
    # index twice gives the documented fallback (next page), counted.
    model = make_model(BrokenChooser(bad=2, default="x"), overrides={"user": {"decision_strategy": "direct"}})
    assert model.strategy == "direct"
    rng = np.random.default_rng(0)
    model.start_session(0, rng)
    response = model.respond(ACTION_PAGE, Context(user_id=0), rng)
    assert response.action in (Action.NEXT, Action.LEAVE) and response.item is None
    assert response.fallback and model.counters(0)["counts"]["page_decision"]["fallback"] == 1
    # a valid pick of the first shown item
    model2 = make_model(ScriptedLLM(choices=[0], default="x"), overrides={"user": {"decision_strategy": "direct"}})
    model2.start_session(0, rng)
    r2 = model2.respond(ACTION_PAGE, Context(user_id=0), rng)
    assert r2.action == Action.WATCH and r2.item == r2.extra["shown"][0]


def test_auto_strategy_per_backend() -> None:
    from recagent_gym.users.agent import resolve_strategy

    assert resolve_strategy("auto", "openai") == "direct"
    assert resolve_strategy("auto", "embedded") == "few_shot"
    assert resolve_strategy("direct", "embedded") == "direct"


def test_deferred_feelings_reach_memory_at_end_of_session() -> None:
    model = make_model(overrides={"user": {"watch_threshold": -20.0}})
    responses = run_session(model, 0, seed=0, pages=2)
    watched = [r.item for r in responses if r.item is not None]
    assert watched and all(r.feeling is None for r in responses)
    assert not [n for n in model.memory(0).notes if n.kind == "feeling"]
    model.end_sessions([0])
    assert not [n for n in model.memory(0).notes if n.kind == "feeling"]  # ending is bookkeeping only
    assert model.write_ended() == [0]
    feelings = [n for n in model.memory(0).notes if n.kind == "feeling"]
    assert len(feelings) == len(watched)
    assert "I liked it a lot" in feelings[0].content
    assert set(model.agent(0).ratings) == set(watched)
    assert model.memory_backend.flush_batches[-1] == 1


def test_inline_feelings_fall_back_after_reask_and_count() -> None:
    llm = taste_llm(rules=[(r"how Ann felt", "")])  # always empty: invalid twice
    model = make_model(llm, overrides={"user": {"watch_threshold": -20.0, "feeling_timing": "inline"}})
    rng = np.random.default_rng(0)
    model.start_session(0, rng)
    response = model.respond(mixed_page(0), Context(user_id=0), rng)
    assert response.action == Action.WATCH
    assert response.feeling is not None and response.rating is not None and 1 <= response.rating <= 5
    title = model.title(response.item)
    assert title in response.feeling  # the template fallback names the item
    assert response.fallback and response.extra["feeling_fallback"]
    assert model.counters(0)["counts"]["feeling"] == {"asked": 1, "reasked": 1, "fallback": 1}


def test_state_round_trip_gives_identical_futures() -> None:
    model = make_model()
    run_session(model, 0, seed=2, pages=2)
    model.social_round(np.random.default_rng(1), 3.0)
    state = model.get_state()
    twin = make_model()
    twin.set_state(state)
    assert twin.get_state() == state
    a = run_session(model, 1, seed=4)
    b = run_session(twin, 1, seed=4)
    assert [(r.action, r.item) for r in a] == [(r.action, r.item) for r in b]


def test_state_round_trip_with_open_session() -> None:
    model = make_model()
    rng = np.random.default_rng(0)
    model.start_session(3, rng)
    model.respond(mixed_page(0), Context(user_id=3), rng)
    twin = make_model()
    twin.set_state(model.get_state())
    r1 = model.respond(mixed_page(1), Context(user_id=3), np.random.default_rng(7))
    r2 = twin.respond(mixed_page(1), Context(user_id=3), np.random.default_rng(7))
    assert (r1.action, r1.item, r1.extra["patience_left"]) == (r2.action, r2.item, r2.extra["patience_left"])


def test_score_items_prefers_the_users_taste() -> None:
    model = make_model()
    scores = model.score_items(0, [0, 24, 12], np.random.default_rng(0))
    assert scores.shape == (3,) and scores[0] > scores[1] and scores[0] > scores[2]
    scores_romance = model.score_items(3, [0, 24, 12], np.random.default_rng(0))
    assert scores_romance[1] > scores_romance[0]


def test_bad_requests_are_rejected_clearly() -> None:
    model = make_model()
    with pytest.raises(ValueError, match="no open session"):
        model.respond(ACTION_PAGE, Context(user_id=0), np.random.default_rng(0))
    model.start_session(0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="not in the catalogue"):
        model.respond(Page(items=(0, 99)), Context(user_id=0), np.random.default_rng(0))
    with pytest.raises(ValueError, match="outside"):
        model.start_session(42, np.random.default_rng(0))


def test_interview_answers_in_character_or_falls_back() -> None:
    model = make_model(taste_llm(rules=[(r"Interviewer: Why", "Because I love action movies.")]))
    assert model.interview(0, "Why do you watch movies?", np.random.default_rng(0)) == "Because I love action movies."
    model = make_model(taste_llm(rules=[(r"Interviewer:", "\n")]))
    from recagent_gym.prompts.interview import FALLBACK

    assert model.interview(0, "Anything?", np.random.default_rng(0)) == FALLBACK
    assert model.counters(0)["counts"]["interview"]["fallback"] == 1


def test_relevant_profile_is_filtered_per_behaviour() -> None:
    model = make_model()
    rec = model.profile_text(0, "recommender")
    social = model.profile_text(0, "social")
    assert "Ann" in rec and "watches and rates" in rec and "chatting" not in rec
    assert "chatting" in social and "watches and rates" not in social and "engineer" in social


def test_prompt_contracts_parse_validate_and_fall_back() -> None:
    from recagent_gym.prompts import feeling, item_scoring, rating, search_query
    from recagent_gym.prompts.free_text import clean_answer

    assert item_scoring.parse(Choice(index=0, option=" Yes", scores=(-1.0, -3.0))) == pytest.approx(2.0)
    assert item_scoring.parse(Choice(index=1, option=" No")) == -1.0  # backend without scores
    assert item_scoring.parse(Choice(index=0, option=" Yes", scores=(float("nan"), -1.0))) is None
    prompt = "Ann just watched X.\nAnn:"
    assert clean_answer("  \n\n", prompt, max_chars=50) is None
    assert clean_answer("Ann just watched X.", prompt, max_chars=50) is None  # echo of a prompt line
    assert clean_answer('"Great fun!"\nmore text', prompt, max_chars=50) == "Great fun!"
    assert clean_answer("word " * 40, prompt, max_chars=20) == "word word word word"
    assert feeling.validate("ok", prompt) is None  # one word is not a feeling
    assert "Heat" in feeling.fallback(title="Heat", score=-3.0)
    assert rating.fallback(10.0) == 5.0 and rating.fallback(-10.0) == 1.0 and rating.fallback(0.0) == 3.0
    assert search_query.validate("a b c d e f g h i j k l", "p") is None
    assert search_query.template_query(heard_title=None, interests=("Drama", "War")) == "drama war movies"


def test_take_action_is_calibrated_against_a_content_free_prompt() -> None:
    """Scores that favour one option for every prompt alike (length or frequency bias) carry no information:
    after calibration the behaviour priors decide."""
    from recagent_gym.llm.protocol import Choice
    from recagent_gym.prompts import take_action as contract
    from recagent_gym.users.agent import take_action

    biased = Choice(index=2, option=contract.OPTIONS[2], scores=(-9.0, -8.0, -2.0))
    prior = take_action.priors(("Watcher",), 0.5)
    calibrated = take_action.model_probabilities(biased, baseline=biased)
    np.testing.assert_allclose(calibrated, np.full(3, 1 / 3))
    assert take_action.model_probabilities(biased)[2] > 0.99
    rng = np.random.default_rng(0)
    picks = [take_action.sample_action(biased, prior, rng, baseline=biased) for _ in range(2000)]
    share = picks.count("recommender") / len(picks)
    assert abs(share - prior[0]) < 0.04


def test_ended_sessions_are_written_in_one_explicit_batch() -> None:
    model = make_model()
    backend = model.memory_backend
    for user in (0, 1):
        run_session(model, user, seed=user, pages=1)
        model.end_sessions([user])
    assert backend.flush_batches == []  # ending is bookkeeping: nothing written yet
    assert model.write_ended(at_least=3) == []  # two of three pending: still nothing
    state = model.get_state()
    assert [s["user_id"] for s in state["ended"]] == [0, 1]
    twin = make_model()
    twin.set_state(state)
    assert twin.memory_backend.flush_batches == []  # restoring pending sessions writes nothing
    twin.memory(1)
    assert twin.memory_backend.flush_batches == []  # reading a memory is a plain getter: no hidden writes
    run_session(model, 2, seed=2, pages=1)
    model.end_sessions([2])
    assert model.write_ended(at_least=3) == [0, 1, 2]
    assert backend.flush_batches == [3]  # one flush for the three sessions
    twin.start_session(1, np.random.default_rng(5))  # a pending agent's session starts: its last one goes first
    assert twin.memory_backend.flush_batches == [2]


def test_memory_notes_come_from_their_templates() -> None:
    from recagent_gym.prompts import memory_notes
    from recagent_gym.prompts.template import TEMPLATE_DIR

    assert (TEMPLATE_DIR / "memory_note_watched.txt").read_text().strip() == "{name} watched {title}."
    model = make_model(overrides={"user": {"watch_threshold": -20.0}})
    responses = run_session(model, 0, seed=0, pages=1)
    item = next(r.item for r in responses if r.item is not None)
    notes = [n.content for n in model.memory(0).notes]
    assert memory_notes.watched(name="Ann", title=model.title(item)) not in notes, "the feeling note records a watch"
    assert (
        memory_notes.feeling(name="Ann", title="X", feeling="fine", rating=4.0)
        == "Ann watched X and felt: fine (rated 4/5)"
    )
