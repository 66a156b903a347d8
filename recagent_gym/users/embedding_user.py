"""The paper's Embedding baseline: a user is the mean embedding of its history (recent items weighing more with
``embedding_half_life``, fitted by default), items are scored by cosine.

Choice is a softmax over the page's cosine similarities plus a no-click option whose similarity is
``embedding_no_click_threshold`` (both fitted on the dataset's real choices by default: ``user.embedding_fitted``,
``users/embedding_fit.py``); a watch is rated from the similarity; no click is NEXT, a SEARCH for the user's
favourite genre (``recsim_search_prob``), or LEAVE with probability ``1 / patience`` (never under
``user.full_sessions``). Watches move the user vector
towards the item (``recsim_interest_drift``), so the baseline also evolves within a run.

Item embeddings come from the caller (e.g. ``recagent_gym.llm.embed_items`` with the sentence embedder), from an
``embedder`` callable over item texts, or, when neither is given, from the genre vectors (documented fallback,
``info`` shows ``extra['embedding'] == 'genres'``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from recagent_gym.data.schema import Dataset
from recagent_gym.users.config import UserConfig
from recagent_gym.users.embedding_fit import fitted_config
from recagent_gym.users.protocol import Action, Context, Page, Response
from recagent_gym.users.recsim import item_topics, mnl_choice, user_config, user_genre_shares


def _normalise(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    return matrix / np.where(norms > 0, norms, 1.0)


def item_embedding_matrix(
    dataset: Dataset, embedder: Callable[[list[str]], Any] | None = None
) -> tuple[np.ndarray, str]:
    """``(n_items, dim)`` unit vectors and their source name (``embedder`` or ``genres``)."""
    if embedder is None:
        return _normalise(dataset.genre_matrix().astype(np.float64)), "genres"
    texts = [dataset.item_text(i) for i in range(dataset.n_items)]
    vectors = embedder.embed(texts) if hasattr(embedder, "embed") else embedder(texts)
    return _normalise(np.asarray(vectors, dtype=np.float64)), "embedder"


class EmbeddingUser:
    """Users as the mean embedding of their history (implements :class:`UserModel`)."""

    def __init__(
        self,
        dataset: Dataset,
        config: UserConfig | None = None,
        *,
        item_embeddings: np.ndarray | None = None,
        embedder: Callable[[list[str]], Any] | None = None,
    ) -> None:
        self.config = user_config(config)
        self.genres = dataset.genres
        self._genre_shares = user_genre_shares(dataset, item_topics(dataset))
        if item_embeddings is not None:
            if item_embeddings.shape[0] != dataset.n_items:
                raise ValueError(
                    f"item_embeddings has {item_embeddings.shape[0]} rows, dataset {dataset.n_items} items"
                )
            self._items, self.embedding_source = _normalise(np.asarray(item_embeddings, np.float64)), "given"
        else:
            self._items, self.embedding_source = item_embedding_matrix(dataset, embedder)
        self._misses: dict[int, int] = {}
        self.config = fitted_config(self.config, dataset, self._items, self._similarities_on)
        self.fitted = self.config.embedding_fitted == "auto"
        """Whether the half-life, temperature and no-click cosine were fitted on real choices
        (``user.embedding_fitted``)."""
        self._users = self._user_vectors(dataset, self.config.embedding_half_life)

    def _user_vectors(self, dataset: Dataset, half_life: float | None) -> np.ndarray:
        """``(n_users, dim)`` unit vectors of each user's history in ``dataset``: the mean of its items' vectors,
        or with ``half_life`` each weighted by ``0.5 ** (age / half_life)``, age in items from the newest."""
        inter = dataset.interactions
        users = inter["user_id"].to_numpy()
        weights = np.ones(len(inter))
        if half_life is not None:
            order = np.lexsort((inter["timestamp"].to_numpy(), users))  # by user, then time (stable on ties)
            counts = np.bincount(users, minlength=dataset.n_users)
            ranked = users[order]
            rank = np.arange(len(order)) - (np.cumsum(counts) - counts)[ranked]
            weights[order] = 0.5 ** ((counts[ranked] - 1 - rank) / half_life)
        sums = np.zeros((dataset.n_users, self._items.shape[1]), dtype=np.float64)
        np.add.at(sums, users, self._items[inter["item_id"].to_numpy()] * weights[:, None])
        return _normalise(sums)

    def _similarities_on(self, history: Dataset, half_life: float | None) -> Callable[[int, np.ndarray], np.ndarray]:
        """``cos(user, items)`` of users built on ``history`` with these item vectors and ``half_life`` (what the
        fit weighs)."""
        users = self._user_vectors(history, half_life)
        return lambda user_id, items: self._items[items] @ users[user_id]

    def similarities(self, user_id: int, items: np.ndarray) -> np.ndarray:
        return self._items[items] @ self._users[user_id]

    @property
    def item_embeddings(self) -> np.ndarray:
        """``(n_items, dim)`` unit item vectors the users score with (read-only view; public item features)."""
        view = self._items.view()
        view.flags.writeable = False
        return view

    def oracle_utilities(self, user_id: int, items: np.ndarray) -> np.ndarray:
        """What the user's choice ranks by (cosine to the user's current vector), for an oracle reference."""
        return self.similarities(user_id, np.asarray(items, dtype=np.int64))

    def start_session(self, user_id: int, rng: np.random.Generator) -> None:
        self._misses[user_id] = 0

    def end_sessions(self, user_ids: Sequence[int]) -> None:
        for user_id in user_ids:
            self._misses.pop(user_id, None)

    def write_ended(self, *, at_least: int = 1) -> list[int]:
        return []  # nothing is written at the end of a session

    social = False
    """The classical users have no social life: :meth:`social_round` is empty and never run by the kernel."""

    def social_round(self, rng: np.random.Generator, time_h: float, incoming: Sequence[int]) -> list[dict[str, Any]]:
        return []

    def respond(self, page: Page, context: Context, rng: np.random.Generator) -> Response:
        cfg = self.config
        user = context.user_id
        if not page.items:
            return Response(Action.LEAVE)
        items = np.fromiter(page.items, dtype=np.int64, count=len(page.items))
        sims = self.similarities(user, items).tolist()
        # exp(threshold / T) is the no-click weight of the softmax over similarities.
        chosen = mnl_choice(
            sims,
            cfg.embedding_temperature,
            float(np.exp(cfg.embedding_no_click_threshold / cfg.embedding_temperature)),
            rng.random(),
        )
        extra = {"embedding": self.embedding_source}
        if chosen >= 0:
            item = page.items[chosen]
            sim = sims[chosen]
            rating = float(min(5.0, max(1.0, round(1.0 + 4.0 * max(sim, 0.0)))))
            self._misses[user] = 0
            self._users[user] = _normalise(self._users[user] + cfg.recsim_interest_drift * self._items[item])
            return Response(Action.WATCH, item=item, rating=rating, extra={**extra, "similarity": sim})
        self._misses[user] = self._misses.get(user, 0) + 1
        if page.source != "search" and rng.random() < cfg.recsim_search_prob:
            query = self.genres[int(np.argmax(self._genre_shares[user]))]
            return Response(Action.SEARCH, query=query, extra=extra)
        if rng.random() < 1.0 / cfg.patience and not cfg.full_sessions:
            return Response(Action.LEAVE, extra=extra)
        return Response(Action.NEXT, extra=extra)

    def respond_batch(
        self, requests: Sequence[tuple[Page, Context]], rngs: Sequence[np.random.Generator]
    ) -> list[Response]:
        return [self.respond(page, context, rng) for (page, context), rng in zip(requests, rngs, strict=True)]

    def score_items(self, user_id: int, items: Sequence[int], rng: np.random.Generator) -> np.ndarray:
        return self.similarities(user_id, np.asarray(items, dtype=np.int64))

    def get_state(self) -> dict[str, Any]:
        return {"users": self._users.tolist(), "misses": {str(u): m for u, m in self._misses.items()}}

    def set_state(self, state: dict[str, Any]) -> None:
        users = np.asarray(state["users"], dtype=np.float64)
        if users.shape != self._users.shape:
            raise ValueError(f"EmbeddingUser.set_state: users shape {users.shape} != {self._users.shape}")
        self._users = users
        self._misses = {int(u): int(m) for u, m in state["misses"].items()}
