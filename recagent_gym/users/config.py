"""Configuration of the user model (the LLM agent and the classical baselines)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from recagent_gym.settings_section import Section

DecisionStrategy = Literal["auto", "few_shot", "direct"]


class UserConfig(Section):
    model: Literal["llm", "recsim", "embedding", "distilled"] = "llm"
    """Which user model responds to pages; all are interchangeable in the same env."""

    distilled_path: str | None = None
    """Folder of the ``distilled`` user model (``recagent-gym users distill``); None: the one shipped for the bundled
    dataset."""

    patience: float = Field(3.0, gt=0.0)
    """Mean number of unrewarding pages a user tolerates before leaving."""

    full_sessions: bool = False
    """Users never leave before the session's pages run out: patience, the RecSim-style time budget and a leave the
    LLM agent chooses end nothing (that page is a miss and the next page follows). Every other draw is the same as
    with leaving. The agreement test sets it (``evaluation.agreement_full_sessions``), so the simulated users see
    every page, as the replayed real users do; the envs leave it off."""

    history_shots: int = Field(10, ge=0)
    """Watched titles shown to the LLM agent as positive examples when it scores items (few-shot)."""

    negative_shots: int = Field(10, ge=0)
    """Unseen titles shown as negative examples when the LLM agent scores items."""

    write_feelings: bool = True
    """After watching, the agent writes one line about the item (stored in memory)."""

    recsim_choice_temperature: float = Field(0.25, gt=0.0)
    """Temperature of the RecSim-style multinomial-logit choice (utilities lie in about [-1.5, 1.5])."""

    recsim_no_click_mass: float = Field(55.0, ge=0.0)
    """Weight of the no-click option in the RecSim-style choice, against ``exp(utility / temperature)`` per item;
    55 ~ exp(1 / 0.25): not clicking is as attractive as an item of utility 1, so random pages are mostly skipped."""

    recsim_time_budget: float = Field(60.0, gt=0.0)
    """Session time budget (minutes) of the RecSim-style user."""

    recsim_interest_drift: float = Field(0.05, ge=0.0, le=1.0)
    """Step size of the RecSim-style user's interest drift towards consumed items."""

    recsim_fresh_sessions: bool = False
    """Every session of a RecSim-style user starts from the user's initial hidden state (interest and latent taste as
    drawn), as RecSim's environment samples a fresh user per episode; the drift then acts within the session only.
    False: the drift of a user's earlier sessions carries over, so an RL learner trains on users its own pages
    reshaped over hundreds of sessions while the held-out users are scored on first sessions."""

    # -- LLM agent (``recagent_gym.users.agent``) ---------------------------------------------------------------

    decision_strategy: DecisionStrategy = "auto"
    """How the LLM agent decides on a page. ``few_shot``: one batched ``choose`` scoring every page item Yes/No after
    a few-shot prefix built from the user's own history, combined with embedding relevance, then the documented
    rule (threshold, patience). ``direct``: one ``choose`` over ``watch <title>`` / ``next page`` / ``search`` /
    ``leave`` (for capable remote models). ``auto``: ``direct`` for ``llm.backend: openai`` (``few_shot`` when
    ``prior_weights`` is set), else ``few_shot``."""

    score_llm_weight: float = Field(1.0, ge=0.0)
    """Weight of the calibrated LLM score ``logp(Yes) - logp(No) - baseline`` in the few-shot item score."""

    score_embedding_weight: float = Field(1.0, ge=0.0)
    """Weight of the embedding relevance (cosine to the user's taste vector, minus that of the unseen examples)."""

    embedding_scale: float = Field(0.1, gt=0.0)
    """Cosine difference that counts as one unit of embedding relevance (puts it on the LLM score's scale)."""

    scoring_genres: bool = False
    """Show genres in the few-shot scoring lines (``Title (year) [genres]``). Off by default: measured on the bundled
    data, (1,5) discrimination with 30 users, the 270M model's score alone hit .20 with genres and .33 without."""

    calibrate: bool = True
    """Subtract the score of a content-free candidate (same prefix, same call) from every item's LLM score; with
    ``llm_item_score: continuation`` the mean score of the session's negative examples."""

    llm_item_score: Literal["yes_no", "continuation", "continuation_pmi"] = "continuation"
    """What the LLM's item score reads (few-shot strategy); the same on every dataset. ``continuation`` (default):
    the log-likelihood of the candidate's title as the next line of the user's own watch list
    (``templates/title_continuation.txt``), read through the backend's ``choose`` (exact with the embedded model);
    ``yes_no``: ``logp(Yes) - logp(No)`` after Yes/No examples (``templates/item_scoring.txt``), whose own signal
    was at chance on a held-out MovieLens-100K (.195/.572/.343/.160 against real choices, below the embedding
    relevance); ``continuation_pmi``: the same minus the title's log-likelihood after an
    empty list (what the user's list adds to the model's prior for the title); see
    ``prompts/title_continuation.py``."""

    watch_threshold: float = Field(1.5, ge=-20.0, le=20.0)
    """Item score at which the best item on the page is watched with probability 1/2 (before behaviour offsets).
    The default puts it near the median best-of-page score on the bundled data (pages of 5 popular unseen items),
    so about half the pages get a watch."""

    watch_temperature: float = Field(1.0, gt=0.0)
    """Softness of the watch decision: ``p(watch) = sigmoid((best - threshold) / temperature)``."""

    behaviour_offset: float = Field(0.5, ge=0.0, le=10.0)
    """Threshold shift per behaviour feature: Watcher lowers it, Critic raises it (activity lowers it up to this)."""

    search_heard_probability: float = Field(0.3, ge=0.0, le=1.0)
    """Chance that a user who does not watch searches for an item recently heard from friends (if any)."""

    search_interest_probability: float = Field(0.05, ge=0.0, le=1.0)
    """Chance that a user who does not watch searches for their interests (doubled for Explorers)."""

    search_query_source: Literal["template", "llm"] = "template"
    """``template``: the query is a heard title or the user's interests (no LLM call); ``llm``: one ``generate``."""

    memory_in_prompt: int = Field(3, ge=0, le=20)
    """Memory records (retrieved for the page) quoted in the decision prompt."""

    feeling_timing: Literal["deferred", "inline"] = "deferred"
    """``deferred``: feelings and ratings of watched items are written in one batch at ``end_session``;
    ``inline``: at once, so the WATCH response carries them (two extra LLM calls on the critical path)."""

    score_cache: bool = False
    """Cache the LLM item scores per (user, item) while the user's scoring context (memory block, Yes/No examples)
    is unchanged (``users/agent/scoring.py``): an evaluation that restarts each user from the same state per
    recommender scores each item once. Off by default: a cached step's ``info`` reports no LLM usage for the items
    it reused, so the same seed and action no longer give the same ``info`` (Gymnasium's determinism check)."""

    item_vector_store: bool = True
    """Keep the LLM agents' item embeddings on disk (``<cache dir>/text-vectors``, ``$RECAGENT_GYM_CACHE`` or
    ``~/.cache/recagent-gym``; ``llm/vector_store.py``), so each item text is embedded once per machine, not once per
    run. The vectors read back are bitwise the ones a new embedding gives. Only model embedders are stored (not the
    tests' hashing embedder)."""

    rate_after_watch: bool = True
    """With feelings, also ask for a 1..5 rating (see ``combined_replies``)."""

    combined_replies: Literal["auto", "on", "off"] = "auto"
    """One structured reply where one prompt can carry several answers: the feeling with its rating, and (when the
    paper's memory scores importance) how memorable the movie was, so the feeling's memory note is stored as written
    (``prompts/feeling_rating.py``); the memory's sensory summary with its importance
    (``prompts/memory_sensory_importance.py``); ``off``: a ``generate`` and a ``choose`` each, as the embedded
    model (whose ``choose`` scores options by likelihood) prefers. ``auto``: ``on`` for ``llm.backend: openai``."""

    heard_capacity: int = Field(20, ge=0)
    """Recently heard items remembered per agent (oldest dropped first)."""

    feeling_max_tokens: int = Field(32, ge=4, le=512)
    """Token cap of one feeling line."""

    interview_max_tokens: int = Field(96, ge=4, le=1024)
    """Token cap of one interview answer."""

    recsim_quality_weight: float = Field(0.5, ge=-10.0, le=10.0)
    """Weight of item quality (shrunk mean rating, in [-1, 1]) in the RecSim-style utility, beside genre affinity."""

    recsim_interest_weight: float = Field(1.0, ge=-10.0, le=10.0)
    """Weight of the genre interest term ``interest . topic_i`` in the RecSim-style utility."""

    recsim_popularity_weight: float = Field(0.0, ge=-10.0, le=10.0)
    """Weight of the item's popularity (log interaction count in [-1, 1], ``users/recsim_features.py``)."""

    recsim_item_latents: Literal["random", "collaborative"] = "random"
    """Item vectors of the latent taste: ``random`` unit vectors (an invented taste), or ``collaborative``: a
    truncated SVD of the dataset's user x item matrix, so that a taste built from the history scores items the way
    collaborative filtering does."""

    recsim_fitted: str | None = "auto"
    """A fit of the RecSim-style user on real choices (``recagent-gym users fit-recsim``): ``auto`` (the default: the
    shipped fit on the bundled dataset; on any other dataset a fit on its real choices, made once per process, about
    10 s), ``bundled`` (the shipped fit, bundled dataset only), the path of a ``recsim_fit.json``, or None
    (``--set user.recsim_fitted=null``: the hand-set weights below). Its values (weights, no-click mass, the latent
    settings it assumes) replace the defaults of those fields; a field the config sets explicitly wins. Hand-set
    users rank recommenders backwards on a dataset nobody tuned them on (issue 49: Kendall tau -0.71 on
    MovieLens-100K, 0.50 once fitted), so they are no longer the default."""

    recsim_page_minutes: float = Field(1.0, ge=0.0)
    """Time budget (minutes) a RecSim-style user spends browsing one page."""

    recsim_watch_minutes: float = Field(5.0, ge=0.0)
    """Time budget (minutes) one watch consumes."""

    recsim_search_prob: float = Field(0.0, ge=0.0, le=1.0)
    """Probability that a classical user who clicks nothing searches for its favourite genre instead."""

    recsim_hidden_dims: int = Field(8, ge=0)
    """Latent dimensions of the RecSim-style user's hidden taste (0: none). Each user draws a hidden vector, each
    item a unit vector (``RecSimUser.item_latents``); their dot product enters the utility. Only the user's
    responses reveal it: no feature of the observation derives it."""

    recsim_hidden_weight: float = Field(1.0, ge=-10.0, le=10.0)
    """Weight of the hidden affinity in the utility (0: the interest is fully observable from the dataset)."""

    recsim_interest_noise: float = Field(0.3, ge=0.0)
    """SD of the hidden Gaussian noise added to the genre interest derived from the dataset's genre shares."""

    recsim_fatigue: float = Field(0.3, ge=0.0)
    """Utility lost per earlier showing of the same item in the session (re-shown and skipped items bore)."""

    recsim_seed: int = 0
    """Seed of the hidden state (latent vectors, interest noise): fixed per population, not per episode."""

    recsim_budget_restore: float = Field(0.0, ge=0.0, le=1.0)
    """RecSim's ``user_update_alpha``: a watch of item ``i`` costs ``recsim_watch_minutes * (1 - restore *
    nutrition_i)`` of the time budget, so nutritious items ("kale") give time back and junk ("chocolate") drains it
    (0: every watch costs the same)."""

    recsim_personal_nutrition: float = Field(0.0, ge=0.0, le=1.0)
    """Share of a watch's nutrition (what :attr:`recsim_budget_restore` gives back) that is personal: ``(1 - p) *
    nutrition_i + p * personal_ui``, ``personal_ui`` the user's latent affinity to the item beyond the population's
    (``erf`` of its z-score, in ``(-1, 1)``). 0: every user finds the same items nutritious (RecSim's document
    quality); above 0 what keeps a user watching depends on who the user is, so planning needs personalisation."""

    recsim_allure: float = Field(0.0, ge=0.0)
    """Appeal of junk: ``- allure * nutrition_i`` enters the choice utility, so the most clickable items end sessions
    early and a myopic click maximiser loses to a planner (RecSim's chocolate vs kale; 0: appeal ignores it)."""

    recsim_latent_from_history: float = Field(0.0, ge=0.0, le=1.0)
    """Share of the hidden taste that is the (normalised) mean latent vector of the user's dataset history; the
    rest is seeded noise. Above 0 the history in the observation lets a policy infer part of the hidden taste."""

    embedding_temperature: float = Field(0.1, gt=0.0)
    """Softmax temperature over cosine similarities of the embedding user (hand-set; ``embedding_fitted`` replaces
    it unless set)."""

    embedding_no_click_threshold: float = Field(0.5, ge=-1.0, le=1.0)
    """Cosine similarity of the embedding user's no-click option (higher = pickier; hand-set, as above)."""

    embedding_half_life: float | None = Field(None, gt=0.0)
    """Recency of the Embedding user's history vector: an item ``k`` items older than the user's newest weighs
    ``0.5 ** (k / half_life)``. None: every history item weighs the same (the paper's mean embedding; hand-set,
    ``embedding_fitted`` chooses it unless set)."""

    embedding_fitted: Literal["auto"] | None = "auto"
    """``auto`` (default): the Embedding users' history half-life, temperature and no-click cosine fitted on the
    dataset's real choices before the period any evaluation holds out (the half-life and temperature that make them
    respond most to a real choice, the likelihood's no-click cosine at them), once per process and dataset (under a
    minute on MovieLens-1M; ``users/embedding_fit.py``); a value set above wins, and a config that sets both the
    temperature and the no-click cosine is not fitted. None: the hand-set values, with which the users barely
    respond to a real next item."""

    session_end_batch: int = Field(1, ge=1)
    """Ended sessions whose feelings and memory writes are batched together (1: written as each session ends), per
    sub-env in a vector env (N sub-envs hold back N x as many, as N separate envs do). Larger values make RL training
    with LLM users faster; an agent's pending writes always land before its memory is used again."""

    prior_weights: str | None = "auto"
    """JSON file of the LLM agent's page-decision weights: a fit of ``recagent-gym users fit-agreement`` or a
    calibration of ``recagent-gym calibrate`` on train users' real choices (``users/agent/prior.py``). The decision
    then scores items ``w_llm * score + prior`` (the embedding relevance, and the prior terms the file weighs: the
    collaborative affinity, popularity weighted by conformity, trend, recency, the user's rating scale), with any
    backend: it needs item scores, so ``decision_strategy: auto`` then means ``few_shot`` for remote backends too. The
    whole file is checked when the configuration is loaded (``users/prior_file.py``). ``auto`` (default): the fit
    shipped for the bundled data (``users/fit_bundled.json``, with its item score and the ``parts`` fit unless set)
    with the embedded model, on the bundled data and on any dataset where the fit weighs only portable terms (it does:
    the affinity), else none, and the log says why (``users/prior_default.py``); ``bundled``: that file, an error
    where it does not apply; None (``--set user.prior_weights=null``): the LLM's judgement alone."""

    prior_fit: Literal["both", "parts"] = "both"
    """Which fit of ``prior_weights`` the agents use. ``both``: ``w_llm * (the agent's score) + prior``, the agent's
    score being its LLM score and embedding term at ``score_llm_weight`` / ``score_embedding_weight``. ``parts``: the
    LLM's own score and the embedding term each at its own weight fitted on real choices (``calibrate``'s ``parts``
    fit), which then replace those two config weights in the page decision. The evaluations name the fit by row
    instead: ``--user-model llm+prior`` (``both``) and ``llm+prior-parts`` (``parts``), side by side in one run."""

    @model_validator(mode="after")
    def _prior_has_scores_to_adjust(self) -> UserConfig:
        if self.prior_weights not in (None, "auto") and self.decision_strategy == "direct":
            raise ValueError(
                "user.prior_weights adjusts item scores, which user.decision_strategy=direct does not produce "
                "(the LLM picks an action): set user.decision_strategy to few_shot or auto"
            )
        return self
