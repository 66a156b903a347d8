"""Real users as a user model: each user watches its own real future items when a page shows them.

The agreement test (:mod:`recagent_gym.runs.evaluation.agreement`) scores recommenders against what people actually did
after a temporal cut. Replaying that behaviour through the same env (the session kernel's rules) lets an adaptive
recommender see the feedback a real user would have given: on a page holding one of the user's held-out items
the user watches the one it watched first (with its real rating); otherwise it asks for the next page. It never
searches and never leaves, so every recommender is scored on the same number of pages.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from recagent_gym.users.protocol import Action, Context, Page, Response


class ReplayUser:
    """Implements :class:`~recagent_gym.users.protocol.UserModel` from each user's real future items."""

    social = False

    def __init__(
        self, future: Mapping[int, Sequence[int]], ratings: Mapping[tuple[int, int], float] | None = None
    ) -> None:
        """``future[u]``: user u's held-out items in the order u watched them; ``ratings[(u, i)]``: u's rating."""
        self.future = {int(u): tuple(int(i) for i in items) for u, items in future.items()}
        self.ratings = dict(ratings or {})

    def start_session(self, user_id: int, rng: np.random.Generator) -> None:
        return None

    def respond(self, page: Page, context: Context, rng: np.random.Generator) -> Response:
        future = self.future.get(int(context.user_id), ())
        shown = set(page.items) - set(context.watched)
        for item in future:
            if item in shown:
                rating = self.ratings.get((int(context.user_id), item))
                return Response(Action.WATCH, item=item, rating=rating, extra={"replay": True})
        return Response(Action.NEXT, extra={"replay": True})

    def respond_batch(
        self, requests: Sequence[tuple[Page, Context]], rngs: Sequence[np.random.Generator]
    ) -> list[Response]:
        return [self.respond(page, context, rng) for (page, context), rng in zip(requests, rngs, strict=True)]

    def end_sessions(self, user_ids: Sequence[int]) -> None:
        return None

    def write_ended(self, *, at_least: int = 1) -> list[int]:
        return []

    def social_round(self, rng: np.random.Generator, time_h: float, incoming: Sequence[int]) -> list[dict[str, Any]]:
        return []

    def score_items(self, user_id: int, items: Sequence[int], rng: np.random.Generator) -> np.ndarray:
        """1 for a real future item (earlier ones higher), 0 otherwise."""
        future = self.future.get(int(user_id), ())
        rank = {item: len(future) - k for k, item in enumerate(future)}
        return np.array([rank.get(int(i), 0) for i in items], dtype=np.float64)

    def get_state(self) -> dict[str, Any]:
        return {}  # stateless: the future is data, not state

    def set_state(self, state: dict[str, Any]) -> None:
        return None
