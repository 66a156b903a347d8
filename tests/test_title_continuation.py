"""The LLM item score as the likelihood of a title continuing the user's own list (``llm_item_score``)."""

from __future__ import annotations

import numpy as np

from recagent_gym.llm.testing import ScriptedLLM
from recagent_gym.prompts import title_continuation
from recagent_gym.users.agent.scoring import ScoreCache, ScoringRequest, cached_score_requests, score_requests

LIKED = {" Alien (": -8.0, " Aliens (": -6.0, " Heat (": -20.0, " Ref A\n": -16.0,
         " Ref B\n": -12.0}  # fmt: skip


def _chooser(prompt: str, options: list[str]) -> list[float]:
    assert prompt.endswith("\n-") and "- Alien (1979)" in prompt
    return [LIKED[o] for o in options]


def _request() -> ScoringRequest:
    return ScoringRequest(profile="p", memory="", name="Ann", shots=title_continuation.build_shots(["Alien (1979)"]),
                          candidates=("Aliens (1986)", "Heat (1995)"), references=("Ref A", "Ref B"))  # fmt: skip


def test_scores_are_log_likelihoods_against_the_references_mean():
    llm = ScriptedLLM(chooser=_chooser)
    [result] = score_requests(llm, [_request()], calibrate=True, seed=0, mode="continuation")
    scale = title_continuation.SCALE
    assert np.allclose(result.raw, np.array([-6.0, -20.0]) / scale)
    assert result.baseline == -14.0 / scale
    assert np.allclose(result.scores, np.array([8.0, -6.0]) / scale) and result.fallbacks == 0
    assert llm.calls == 1  # one prompt: the list once, every candidate and reference an option of it
    [raw] = score_requests(llm, [_request()], calibrate=False, seed=0, mode="continuation")
    assert raw.baseline == 0.0 and np.allclose(raw.scores, raw.raw)


def test_a_dated_title_is_scored_up_to_its_year():
    assert title_continuation.option("Aliens (1986)") == " Aliens ("  # the year's digits are not scored
    assert title_continuation.option("Heat") == " Heat\n"  # no year: the line and its end
    assert title_continuation.option("Alien (Director's Cut) (1979)") == " Alien (Director's Cut) ("
    assert title_continuation.option("Love (in bloom)") == " Love (in bloom)\n"


def test_a_backend_without_option_scores_falls_back_and_counts_it():
    llm = ScriptedLLM(chooser=lambda prompt, options: 0)  # picks an option, gives no scores
    [result] = score_requests(llm, [_request()], calibrate=True, seed=0, mode="continuation")
    assert result.fallbacks == 2 and np.all(result.scores == title_continuation.FALLBACK_SCORE)


def test_scores_that_do_not_match_the_options_fall_back():
    llm = ScriptedLLM(chooser=lambda prompt, options: [-1.0] * len(options))
    llm.choose = _short_scores(llm.choose)
    [result] = score_requests(llm, [_request()], calibrate=True, seed=0, mode="continuation")
    assert result.fallbacks == 2 and np.all(result.scores == title_continuation.FALLBACK_SCORE)


def _short_scores(choose):
    """A backend answering one score too few per prompt."""
    from dataclasses import replace

    def wrapped(prompts, options, *, seed=None):
        return [replace(c, scores=c.scores[:-1]) for c in choose(prompts, options, seed=seed)]

    return wrapped


def test_the_cache_keeps_candidates_and_references():
    llm = ScriptedLLM(chooser=_chooser)
    cache = ScoreCache()
    first = cached_score_requests(cache, llm, [_request()], calibrate=True, seed=0, mode="continuation")[0]
    calls = llm.calls
    again = cached_score_requests(cache, llm, [_request()], calibrate=True, seed=0, mode="continuation")[0]
    assert llm.calls == calls and np.allclose(first.scores, again.scores) and again.cache_hits == 4
    direct = score_requests(llm, [_request()], calibrate=True, seed=0, mode="continuation")[0]
    assert np.allclose(first.scores, direct.scores)


PRIOR = {" Aliens (": -9.0, " Heat (": -7.0, " Ref A\n": -15.0, " Ref B\n": -10.0}


def _with_prior(prompt: str, options: list[str]) -> list[float]:
    if "- Alien (1979)" in prompt:
        return [LIKED[o] for o in options]
    assert prompt == "Movies Ann loved, one per line, oldest first:\n-"  # the same header, an empty list
    return [PRIOR[o] for o in options]


def test_pmi_scores_subtract_each_titles_log_likelihood_after_an_empty_list():
    llm = ScriptedLLM(chooser=_with_prior)
    [result] = score_requests(llm, [_request()], calibrate=True, seed=0, mode="continuation_pmi")
    scale = title_continuation.SCALE
    # what the list adds: Aliens -6 - (-9) = +3, Heat -20 - (-7) = -13; references -16 + 15 = -1, -12 + 10 = -2
    assert np.allclose(result.raw, np.array([3.0, -13.0]) / scale)
    assert result.baseline == -1.5 / scale and np.allclose(result.scores, np.array([4.5, -11.5]) / scale)
    assert result.fallbacks == 0 and result.prompts == 2 and llm.calls == 2  # the list and the empty list
    cached = cached_score_requests(ScoreCache(), llm, [_request()], calibrate=True, seed=0, mode="continuation_pmi")
    assert np.allclose(cached[0].scores, result.scores)
    # the plain continuation score of the same request ranks by the list alone
    [plain] = score_requests(llm, [_request()], calibrate=True, seed=0, mode="continuation")
    assert np.allclose(plain.raw, np.array([-6.0, -20.0]) / scale)


def test_pmi_falls_back_when_either_prompt_has_no_scores():
    def no_prior(prompt: str, options: list[str]):
        return [LIKED[o] for o in options] if "- Alien (1979)" in prompt else 0  # the empty list: no scores

    [result] = score_requests(ScriptedLLM(chooser=no_prior), [_request()], calibrate=True, seed=0,
                              mode="continuation_pmi")  # fmt: skip
    assert result.fallbacks == 2 and np.all(result.scores == title_continuation.FALLBACK_SCORE)


def test_llm_users_in_continuation_mode_score_their_list(tiny_ml):  # noqa: F811
    from recagent_gym.llm.testing import HashingEmbedder
    from recagent_gym.runs.config import load_config
    from recagent_gym.users.factory import build_user_model

    prompts: list[str] = []

    def chooser(prompt: str, options: list[str]) -> list[float]:
        prompts.append(prompt)
        return [-float(len(o)) for o in options]

    config = load_config(overrides=["user.llm_item_score=continuation", "memory.implementation=none",
                                    "social.enabled=false"])  # fmt: skip
    model = build_user_model("llm", tiny_ml, **config.user_model_sections(), llm=ScriptedLLM(chooser=chooser),
                             embedder=HashingEmbedder())  # fmt: skip
    llm_scores, _ = model.score_components(0, [1, 2, 3], np.random.default_rng(0))
    assert len(llm_scores) == 3 and np.all(np.isfinite(llm_scores))
    assert prompts and prompts[-1].startswith("Movies ") and prompts[-1].endswith("\n-")
    assert "Watched:" not in prompts[-1]


from tests._eval_fixtures import movielens_dir, tiny_ml  # noqa: E402, F401
