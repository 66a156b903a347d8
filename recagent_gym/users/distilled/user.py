"""Distilled LLM users behind the :class:`~recagent_gym.users.protocol.UserModel` protocol (``user_model="distilled"``).

A page costs one gather and a dot product per shown item: ``score = user_table[u] @ item_table[i] +
item_offset[i] + noise``; the decision is the LLM agent's own rule (:func:`~recagent_gym.users.agent.page.
decide_page`: best eligible item watched with ``sigmoid((best - threshold) / temperature)``, else patience drops,
leave when spent, else search for the user's interests or next). Patience is drawn per session as the LLM agent
draws it. Memory-free: nothing carries over between sessions, there is no social life and nothing is heard.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from recagent_gym.data.schema import Dataset
from recagent_gym.users.agent.page import Decision, RuleParams, decide_page, session_patience
from recagent_gym.users.distilled.errors import DistillError
from recagent_gym.users.distilled.saved_model import Artefact
from recagent_gym.users.protocol import Action, Context, Page, Response

BUNDLED_DIR = Path(__file__).parent / "bundled"
"""The distilled model shipped for the bundled dataset (``recagent-gym users distill`` on embedded-LLM logs)."""


@dataclass
class DistilledSession:
    patience: int
    watched: set[int] = field(default_factory=set)


class DistilledUser:
    """Users distilled from the LLM agents (implements :class:`UserModel`); see the module docstring."""

    def __init__(
        self,
        dataset: Dataset,
        artefact: Artefact | str | Path | None = None,
        *,
        rating_timing: str = "deferred",
        full_sessions: bool = False,
    ) -> None:
        """``rating_timing`` mirrors the LLM agent's ``user.feeling_timing``: ``deferred`` (its default) rates after
        the session, so a watch's response carries no rating (the env's reward has no rating bonus) and the rating
        is in ``extra["rating"]``; ``inline`` puts it in the response, as the LLM agent then does.
        ``full_sessions`` mirrors ``user.full_sessions``: the saved rule's patience never runs out."""
        if rating_timing not in ("deferred", "inline"):
            raise ValueError(f"rating_timing must be 'deferred' or 'inline', not {rating_timing!r}")
        self.rating_inline = rating_timing == "inline"
        self.full_sessions = full_sessions
        if artefact is None:
            if not (BUNDLED_DIR / "model.json").is_file():
                raise DistillError(
                    "this installation ships no distilled user model: set user.distilled_path to a folder written "
                    "by 'recagent-gym users distill'"
                )
            artefact = BUNDLED_DIR
        if not isinstance(artefact, Artefact):
            artefact = Artefact.load(artefact)
        meta = artefact.meta
        rows = _user_rows(meta, dataset)
        self.meta = meta
        a = artefact.arrays
        # every (user, item) mean score precomputed (610 x 9742 float32 = 24 MB on the bundled data; the tables it
        # comes from are not kept): a page then costs one gather instead of a (page, 424) x (424,) product per step
        users = a["user_table"].astype(np.float64)[rows]
        scores = users @ a["item_table"].astype(np.float64).T + a["item_offset"].astype(np.float64)
        self.score_table = scores.astype(np.float32)
        self._item_vectors = np.hstack([a["item_table"], a["item_offset"].reshape(-1, 1)]).astype(np.float32)
        rule = meta["rule"]
        self.noise = float(rule["noise_std"])
        self.rating_a, self.rating_b = float(rule["rating_intercept"]), float(rule["rating_slope"])
        self.patience_p = min(1.0, 1.0 / float(rule["patience"]))
        self.params = [
            RuleParams(
                threshold=float(a["threshold"][r]),
                temperature=float(rule["temperature"]),
                search_heard_probability=float(rule["search_heard_probability"]),
                search_interest_probability=float(a["search_interest"][r]),
            )
            for r in rows
        ]
        self.queries: list[str] = [meta["interest_queries"][r] for r in rows]
        self.thresholds = np.array([p.threshold for p in self.params], dtype=np.float64)
        self.temperature = float(rule["temperature"])
        self._sessions: dict[int, DistilledSession] = {}

    item_embeddings_source = "distilled_items"

    @property
    def item_embeddings(self) -> np.ndarray:
        """``(n_items, D + 1)``: the item vectors the scores are a linear function of (the item table the model
        learned from the training users' logged decisions, and its offset column). RecAgent-v1 projects them into
        its item features, as it does RecSim's item latents."""
        view = self._item_vectors.view()
        view.flags.writeable = False
        return view

    # -- scores ---------------------------------------------------------------------------------------------------

    def mean_scores(self, user_id: int, items: Sequence[int] | np.ndarray) -> np.ndarray:
        """The distilled per-item score (no noise): what the LLM agent's score is expected to be."""
        return self.score_table[user_id, np.asarray(items, dtype=np.int64)].astype(np.float64)

    def score_items(self, user_id: int, items: Sequence[int], rng: np.random.Generator) -> np.ndarray:
        return self.mean_scores(user_id, items)

    def rating(self, score: float) -> float:
        return float(min(5.0, max(1.0, round(self.rating_a + self.rating_b * score))))

    # -- UserModel protocol ---------------------------------------------------------------------------------------

    def session(self, user_id: int) -> DistilledSession:
        return self._sessions[user_id]

    def start_session(self, user_id: int, rng: np.random.Generator) -> None:
        if not 0 <= user_id < len(self.params):
            raise ValueError(f"user {user_id} is not in the distilled population ({len(self.params)} users)")
        drawn = int(rng.geometric(self.patience_p))
        self._sessions[user_id] = DistilledSession(session_patience(drawn, self.full_sessions))

    def respond(self, page: Page, context: Context, rng: np.random.Generator) -> Response:
        """One lane: the LLM agent's own :func:`~recagent_gym.users.agent.page.decide_page` on the distilled scores
        (scalar code: cheaper than the array path for a single page)."""
        user = context.user_id
        session = self._sessions.get(user)
        if session is None:
            raise RuntimeError(f"DistilledUser.respond: no session started for user {user}")
        items = page.items
        scores = self.score_table[user, list(items)].astype(np.float64)
        if self.noise > 0:
            scores += self.noise * rng.standard_normal(len(items))
        watched = session.watched
        eligible = np.array([i not in watched for i in items], dtype=bool) if watched else np.ones(len(items), bool)
        decision, session.patience = decide_page(
            scores, eligible, params=self.params[user], patience=session.patience, heard_query=None,
            interest_query=self.queries[user], on_search_page=page.source == "search", rng=rng,
        )  # fmt: skip
        return self._response(page, session, scores, decision)

    def respond_batch(
        self, requests: Sequence[tuple[Page, Context]], rngs: Sequence[np.random.Generator]
    ) -> list[Response]:
        """Every lane's page scored by one gather and the rule's arithmetic done across lanes in numpy; each lane
        then draws from its own rng in the order of :func:`~recagent_gym.users.agent.page.decide_page` (noise,
        watch, search), so a lane decides as it would alone and as the LLM agent's rule does."""
        if len(requests) != len(rngs):
            raise ValueError(f"{len(requests)} requests but {len(rngs)} rngs")
        if not requests:
            return []
        if len(requests) == 1 or len({len(page.items) for page, _ in requests}) != 1:  # one by one
            return [self.respond(page, context, rng) for (page, context), rng in zip(requests, rngs, strict=True)]
        sessions = []
        for _, context in requests:
            session = self._sessions.get(context.user_id)
            if session is None:
                raise RuntimeError(f"DistilledUser.respond: no session started for user {context.user_id}")
            sessions.append(session)
        items = np.array([page.items for page, _ in requests], dtype=np.int64)
        users = np.array([context.user_id for _, context in requests], dtype=np.int64)
        scores = self.score_table[users[:, None], items].astype(np.float64)
        if self.noise > 0:
            scores += self.noise * np.stack([rng.standard_normal(items.shape[1]) for rng in rngs])
        eligible = np.ones(items.shape, dtype=bool)
        for lane, session in enumerate(sessions):
            if session.watched:
                eligible[lane] = [i not in session.watched for i in requests[lane][0].items]
        masked = np.where(eligible, scores, -np.inf)
        position = masked.argmax(axis=1)
        best = masked[np.arange(len(requests)), position]
        with np.errstate(over="ignore"):
            p_watch = 1.0 / (1.0 + np.exp(-(best - self.thresholds[users]) / self.temperature))
        watchable = eligible.any(axis=1)
        p_watch = np.where(watchable, p_watch, 0.0).tolist()
        lanes = zip(requests, rngs, sessions, scores, position.tolist(), p_watch, watchable.tolist(), strict=True)
        return [
            self._response(page, session, row, self._draw(page, context.user_id, rng, session, pos, p, ok))
            for (page, context), rng, session, row, pos, p, ok in lanes
        ]

    def _draw(
        self, page: Page, user: int, rng: np.random.Generator, session: DistilledSession, position: int,
        p_watch: float, watchable: bool,
    ) -> Decision:  # fmt: skip
        """``decide_page``'s draws for one lane whose best eligible item and ``p_watch`` are known (no heard item)."""
        if watchable and rng.random() < p_watch:
            return Decision(Action.WATCH, position=position, p_watch=p_watch)
        session.patience -= 1
        if session.patience <= 0:
            return Decision(Action.LEAVE, p_watch=p_watch)
        if page.source != "search" and rng.random() < self.params[user].search_interest_probability:
            return Decision(Action.SEARCH, query=self.queries[user], p_watch=p_watch)
        return Decision(Action.NEXT, p_watch=p_watch)

    def _response(self, page: Page, session: DistilledSession, scores: np.ndarray, decision: Decision) -> Response:
        extra: dict[str, Any] = {
            "scores": scores.tolist(),
            "p_watch": decision.p_watch,
            "patience_left": session.patience,
        }
        if decision.action == Action.WATCH:
            assert decision.position is not None
            item = int(page.items[decision.position])
            session.watched.add(item)
            extra["rating"] = rating = self.rating(float(scores[decision.position]))
            return Response(Action.WATCH, item=item, rating=rating if self.rating_inline else None, extra=extra)
        return Response(decision.action, query=decision.query, extra=extra)

    def end_sessions(self, user_ids: Sequence[int]) -> None:
        for user_id in user_ids:
            self._sessions.pop(user_id, None)

    def write_ended(self, *, at_least: int = 1) -> list[int]:
        return []  # memory-free: nothing is written at the end of a session

    social = False
    """The distilled users have no social life: :meth:`social_round` is empty and never run by the kernel."""

    def social_round(self, rng: np.random.Generator, time_h: float, incoming: Sequence[int]) -> list[dict[str, Any]]:
        return []  # the distilled users have no social life

    def get_state(self) -> dict[str, Any]:
        return {
            "sessions": {str(u): [s.patience, sorted(s.watched)] for u, s in self._sessions.items()},
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self._sessions = {
            int(u): DistilledSession(int(p), {int(i) for i in watched}) for u, (p, watched) in state["sessions"].items()
        }


def _user_rows(meta: dict[str, Any], dataset: Dataset) -> np.ndarray:
    """Row of the artefact's tables for each user of ``dataset``, matched by the dataset's own user ids
    (``raw_id``), so a subset of the distilled dataset (the training users of a policy) reuses the model."""
    if meta["n_items"] != dataset.n_items:
        raise DistillError(
            f"distilled model of dataset {meta['dataset']!r} ({meta['n_items']} items) does not fit dataset "
            f"{dataset.name!r} ({dataset.n_items} items); distil one for it with 'recagent-gym users distill'"
        )
    raw_ids = [str(r) for r in dataset.users["raw_id"]]
    known = meta.get("user_raw_ids")
    if known is None:  # an artefact without raw ids: only the very dataset it was distilled on
        if meta["n_users"] != dataset.n_users:
            raise DistillError(
                f"distilled model of dataset {meta['dataset']!r} ({meta['n_users']} users) does not fit dataset "
                f"{dataset.name!r} ({dataset.n_users} users); distil one for it with 'recagent-gym users distill'"
            )
        return np.arange(dataset.n_users)
    index = {str(r): k for k, r in enumerate(known)}
    missing = [r for r in raw_ids if r not in index]
    if missing:
        raise DistillError(
            f"dataset {dataset.name!r} has {len(missing)} users the distilled model of {meta['dataset']!r} does not "
            f"know (first: raw id {missing[0]!r}); distil one for it with 'recagent-gym users distill'"
        )
    return np.array([index[r] for r in raw_ids], dtype=np.int64)
