"""Non-learning recommenders and the oracle on RecAgent-v1 (score actions): random, popularity, quality-greedy, MF,
item-kNN, any history-fitted scorer (:mod:`recagent_gym.recommenders.history_scorers`), oracle.

Each answers SB3's ``predict`` with a score per candidate; items already shown this session go to the bottom
(the issue's re-shown skipped items: 73% of popularity's slots on v0). The oracle reads the user model's full
utility (:meth:`RecSimUser.oracle_utilities`, hidden state included; the embedding users' cosine; the distilled
users' noise-free score, ``DistilledUser.mean_scores``): a reference row, not a recommender.
"""

from __future__ import annotations

from typing import Any

import numpy as np

SHOWN_COLUMN = -2
"""Column of ``candidates`` flagging an item shown earlier this session (see :mod:`recagent_gym.envs.encoding`)."""


def rank_action(scores: np.ndarray, shown: np.ndarray | None = None, tie: np.ndarray | None = None) -> np.ndarray:
    """Scores in ``[-1, 1]`` that keep the order of ``scores`` (shown items last): the env takes the top-k.
    ``tie``: keys that order equal scores (a seeded random key per candidate, :meth:`_CandidateRecommender.predict`);
    without them ties keep the retrieval order, which is itself a ranking (MF's top first)."""
    scores = np.asarray(scores, dtype=np.float64).copy()
    if shown is not None:
        scores[shown > 0] = -np.inf
    order = np.argsort(-scores, kind="stable") if tie is None else np.lexsort((np.asarray(tie), -scores))
    action = np.empty(len(scores), dtype=np.float32)
    action[order] = 1.0 - 2.0 * np.arange(len(scores)) / max(len(scores), 1)
    return action


def keys_by_item(ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One uniform draw per candidate, handed out in item-id order: the same item gets the same key wherever the
    retriever put it (a seeded shuffle of the candidates that forgets their retrieval order)."""
    keys = np.empty(len(ids), dtype=np.float64)
    keys[np.argsort(np.asarray(ids), kind="stable")] = rng.random(len(ids))
    return keys


class _CandidateRecommender:
    """Base of the score rankers. Equal scores are ordered by a seeded random key per candidate
    (:func:`keys_by_item`, from ``seed``): the retrieval order (MF's top first, then genre, popular, friends,
    random blocks) never decides, so a ranker that cannot tell candidates apart shows a random page."""

    def __init__(self, env: Any, seed: int = 0) -> None:
        self.env = env.unwrapped
        self.tie_rng = np.random.default_rng([seed, 7411])

    def scores(self, observation: dict[str, np.ndarray]) -> np.ndarray:
        raise NotImplementedError

    def predict(
        self, observation: Any, state: Any = None, episode_start: Any = None, deterministic: bool = True
    ) -> tuple[np.ndarray, None]:
        mask = observation["candidate_mask"]
        shown = observation["candidates"][:, SHOWN_COLUMN] * mask
        scores = np.full(len(mask), -np.inf)  # fewer candidates than K (a short pool): the padding ranks last
        found = np.asarray(self.scores(observation), dtype=np.float64)[: len(mask)]
        scores[: len(found)] = found
        ids = np.asarray(self.env.candidate_ids)[: len(mask)]
        tie = np.zeros(len(mask))
        tie[: len(ids)] = keys_by_item(ids, self.tie_rng)
        return rank_action(scores, shown, tie), None

    def get_state(self) -> dict[str, Any]:
        return {"tie_rng": self.tie_rng.bit_generator.state}

    def set_state(self, state: dict[str, Any]) -> None:
        self.tie_rng.bit_generator.state = state["tie_rng"]


class RandomCandidates(_CandidateRecommender):
    """A uniformly random page (drawn per item id, so the retrieval order does not matter)."""

    def __init__(self, env: Any, seed: int = 0) -> None:
        super().__init__(env, seed)
        self.rng = np.random.default_rng(seed)

    def scores(self, observation: dict[str, np.ndarray]) -> np.ndarray:
        return keys_by_item(np.asarray(self.env.candidate_ids), self.rng)

    def get_state(self) -> dict[str, Any]:
        return {**super().get_state(), "rng": self.rng.bit_generator.state}

    def set_state(self, state: dict[str, Any]) -> None:
        super().set_state(state)
        self.rng.bit_generator.state = state["rng"]


class PopularCandidates(_CandidateRecommender):
    """The most popular candidates (the same ranking for everyone)."""

    def scores(self, observation: dict[str, np.ndarray]) -> np.ndarray:
        return self.env.tables.popularity[self.env.candidate_ids]


class QualityCandidates(_CandidateRecommender):
    """The candidates by their observed quality column (the item feature ``quality``, the shrunk mean rating's
    quantile): no user information at all, the strongest simple baseline that reads the same features. Where the env
    hides quality (``env.hide_quality``: the column is constant) every candidate ties and the page is a seeded
    random one, not the retrieval order."""

    def scores(self, observation: dict[str, np.ndarray]) -> np.ndarray:
        return np.asarray(observation["candidates"][:, quality_column(self.env)], dtype=np.float64)


def quality_column(env: Any) -> int:
    """Column of the quality feature in RecAgent-v1's ``candidates`` (topics, year, popularity, quality, ...)."""
    return int(env.unwrapped.tables.n_genres) + 2


class ScoredCandidates(_CandidateRecommender):
    """Candidates by a history-fitted scorer's ``scores(user, items)`` for the env's current user."""

    def __init__(self, env: Any, scorer: Any) -> None:
        super().__init__(env)
        self.scorer = scorer

    def scores(self, observation: dict[str, np.ndarray]) -> np.ndarray:
        return np.asarray(self.scorer.scores(self.env.current_user, np.asarray(self.env.candidate_ids)), np.float64)


class FutureOracleCandidates(_CandidateRecommender):
    """Knows each user's real future (``future[u]``, in the order the user watched the items): every page leads with
    the earliest future item not shown yet and holds back the others, so that each page of the session has one (a
    user watches at most one item per page: stacking them on the first pages would waste them); the page's other
    slots go to the most popular candidates, as the popularity row's (with random filler the oracle's pages would
    be four fifths random: the best only by a metric blind to everything but the future item). The best a
    recommender can do for the real users replayed (``evaluate agreement``); a reference row, not a recommender."""

    def __init__(self, env: Any, future: Any) -> None:
        super().__init__(env)
        self.future = {int(u): tuple(int(i) for i in items) for u, items in future.items()}

    def scores(self, observation: dict[str, np.ndarray]) -> np.ndarray:
        ids = np.asarray(self.env.candidate_ids)
        shown = observation["candidates"][: len(ids), SHOWN_COLUMN] > 0
        order = {item: k for k, item in enumerate(self.future.get(int(self.env.current_user), ()))}
        waiting = [(order[int(i)], k) for k, i in enumerate(ids) if int(i) in order and not shown[k]]
        popularity = np.asarray(self.env.tables.popularity, dtype=np.float64)[ids]
        filler = 0.5 * popularity / max(float(np.abs(popularity).max(initial=0.0)), 1e-12)  # in [-0.5, 0.5]
        scores = np.where([int(i) in order for i in ids], -1.0, filler)  # future items held back
        if waiting:
            scores[min(waiting)[1]] = 1.0
        return scores


class EncodedUserCandidates(_CandidateRecommender):
    """Candidates by a history-fitted scorer (``scorer.scores(user, items)``; default the retrieval stage's MF) for
    the user in the observation. ``user_id`` is not observed: the user is identified by matching the observed
    encoding to the dataset's, so a swapped encoding misleads it, as it would any recommender reading the
    observation."""

    def __init__(self, env: Any, scorer: Any = None) -> None:
        super().__init__(env)
        self._features = self.env.tables.user_features
        self.scorer = scorer

    def scores(self, observation: dict[str, np.ndarray]) -> np.ndarray:
        distance = np.abs(self._features - observation["user"]).sum(axis=1)
        user = int(np.argmin(distance))
        if self.scorer is None:
            return self.env.retriever.mf_scores(user, self.env.candidate_ids)
        return np.asarray(self.scorer.scores(user, np.asarray(self.env.candidate_ids)), dtype=np.float64)


class MFCandidates(EncodedUserCandidates):
    """Candidates by the retrieval stage's MF score for the user in the observation (see the base class)."""

    def __init__(self, env: Any) -> None:
        super().__init__(env)


class ItemKNNCandidates(EncodedUserCandidates):
    """Candidates by item-kNN (the summed co-watch cosine to the user's history,
    :class:`~recagent_gym.recommenders.history_scorers.ItemKNN` on the env's dataset) for the user in the
    observation (see the base class)."""

    def __init__(self, env: Any) -> None:
        from recagent_gym.recommenders.history_scorers import ItemKNN

        super().__init__(env, ItemKNN(env.unwrapped.dataset))


def latent_block(observation: dict[str, np.ndarray]) -> slice:
    """Columns of the item vector in an item-feature row (after the genres, year, popularity and quality;
    :mod:`recagent_gym.envs.encoding`), read off the observation's shapes."""
    from recagent_gym.envs.encoding import latent_columns

    return latent_columns(observation["user"].shape[-1] - 3, observation["history"].shape[-1] - 1)


def history_latent_scores(observation: dict[str, np.ndarray]) -> np.ndarray:
    """Each candidate's item vector dotted with the mean item vector of the observed history (0 without one)."""
    block = latent_block(observation)
    history = observation["history"]
    valid = history[:, -1] > 0
    if not valid.any():
        return np.zeros(observation["candidates"].shape[0])
    mean = history[valid, block].astype(np.float64).mean(axis=0)
    return observation["candidates"][:, block].astype(np.float64) @ mean


class HistoryLatentCandidates:
    """Candidates by :func:`history_latent_scores`: the item vector (the user model's collaborative latents, PCA-
    projected) against the mean of the last items the user watched, MF's score with the user's factor read off the
    observed history. Reads the observation only (no env, no user id), so it plays on the replayed real users as a
    trained policy does, and the personalisation check's swapped encoding misleads it. Continuous scores rarely
    tie; a tie keeps the candidates' order."""

    def predict(
        self, observation: Any, state: Any = None, episode_start: Any = None, deterministic: bool = True
    ) -> tuple[np.ndarray, None]:
        mask = observation["candidate_mask"]
        scores = np.where(mask > 0, history_latent_scores(observation), -np.inf)
        return rank_action(scores, observation["candidates"][:, SHOWN_COLUMN] * mask), None


class OracleCandidates(_CandidateRecommender):
    """Knows the hidden state: candidates by the user model's planning-aware value (``oracle_values``: appeal and
    the time budget a watch costs, priced at ``minute_value``) where it has one, else by its true utility. A
    heuristic: it prices the budget, it does not plan (:class:`~recagent_gym.policies.rollout_oracle.RolloutOracle`
    improves on it by rollouts)."""

    def __init__(self, env: Any, *, minute_value: float = 0.2) -> None:
        super().__init__(env)
        self.minute_value = minute_value

    def scores(self, observation: dict[str, np.ndarray]) -> np.ndarray:
        model, user = self.env.user_model, self.env.current_user
        return oracle_scores(model, user, np.asarray(self.env.candidate_ids), self.minute_value)


def oracle_scores(model: Any, user: int, items: np.ndarray, minute_value: float) -> np.ndarray:
    """The heuristic oracle's score of ``items`` for ``user`` now: ``oracle_values`` at ``minute_value`` where the
    user model has it (and the price is positive), else the true utility (``oracle_utilities``, or the distilled
    users' noise-free ``mean_scores``)."""
    values = getattr(model, "oracle_values", None)
    if values is not None and minute_value > 0:
        return values(user, items, minute_value=minute_value)
    # Distilled users expose their noise-free score (what their decision rule reads) as ``mean_scores``.
    utilities = getattr(model, "oracle_utilities", None) or getattr(model, "mean_scores", None)
    if utilities is None:
        raise TypeError(f"{type(model).__name__} has no oracle_utilities: no oracle for these users")
    return utilities(user, items)
