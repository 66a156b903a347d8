"""The per-(user, item) LLM score cache: an item scored for a user in an unchanged context is not scored again."""

from __future__ import annotations

import numpy as np

from recagent_gym.users.agent.scoring import ScoreCache, ScoringRequest, cached_score_requests, score_requests
from recagent_gym.users.protocol import Context, Page
from tests._agent_fixtures import make_model, rngs, taste_llm

CACHE_ON = {"user": {"score_cache": True}}


def test_off_by_default():
    assert make_model().score_cache is None  # same seed and action, same info (Gymnasium's check)


def _scored(model, items, seed=0):
    calls = model.llm.calls
    scores = model.score_components(0, items, np.random.default_rng(seed))[0]
    return scores, model.llm.calls - calls


def test_same_user_same_context_is_not_scored_again():
    model = make_model(overrides=CACHE_ON)
    first, asked = _scored(model, [0, 1, 2, 3, 4])
    assert asked == 6  # five candidates and the content-free baseline
    again, asked = _scored(model, [0, 1, 2, 3, 4])  # same seed: same Yes/No examples, same (empty) memory
    assert asked == 0 and np.array_equal(again, first)
    more, asked = _scored(model, [3, 4, 5, 6])  # only the two new items go to the LLM; the baseline is cached
    assert asked == 2 and np.array_equal(more[:2], first[3:])
    assert model.score_cache.stats() == {"hits": 6 + 3, "misses": 6 + 2, "invalidations": 0}


def test_a_changed_memory_or_new_examples_invalidate():
    model = make_model(overrides=CACHE_ON)
    _scored(model, [0, 1, 2])
    model.memory(0).observe(["Ann watched Heat."], 1.0)  # the memory block in the prompt changes
    _, asked = _scored(model, [0, 1, 2])
    assert asked == 4 and model.score_cache.invalidations == 1
    _, asked = _scored(model, [0, 1, 2], seed=1)  # other Yes/No examples: another context
    assert asked == 4 and model.score_cache.invalidations == 2


def test_cached_results_equal_the_uncached_ones():
    llm = taste_llm()
    requests = [
        ScoringRequest(
            "profile A", "", "Ann", "shots A", ("Movie: Heat [Action]\nWatched:", "Movie: Up [Comedy]\nWatched:")
        ),
        ScoringRequest("profile B", "mem", "Bob", "shots B", ("Movie: Up [Comedy]\nWatched:",)),
    ]
    plain = score_requests(llm, requests, calibrate=True, seed=0)
    cache = ScoreCache()
    for _ in range(2):  # cold, then all from the cache
        cached = cached_score_requests(cache, llm, requests, calibrate=True, seed=0)
        for a, b in zip(plain, cached, strict=True):
            assert np.allclose(a.scores, b.scores) and a.baseline == b.baseline
    assert [r.cache_hits for r in cached] == [3, 2] and cache.hits == 5 and cache.misses == 5


def test_page_decisions_report_cache_hits():
    model = make_model(overrides=CACHE_ON)
    page = Page((0, 1, 2, 3, 4), 0)
    for user in (0, 3):
        model.start_session(user, np.random.default_rng(user))
    responses = model.respond_batch(
        [(page, Context(user_id=0, step=0)), (page, Context(user_id=3, step=0))], rngs(0, 2)
    )
    assert all(r.extra["score_cache_hits"] == 0 for r in responses)
    assert model.score_cache.misses == 12
