"""The user-model protocol: the LLM agent and the classical baselines are interchangeable behind it.

One step of a session reads like RecSim's: the session kernel shows a :class:`Page`, the user model returns a
typed :class:`Response` (and updates its own state), and the env turns the response into reward and observation.

The life of a session, as the kernel (:mod:`recagent_gym.session`) drives it::

    social_round(rng, time_h, incoming)      # the world between sessions (classical users: none, returns [])
    start_session(user, rng)
    respond_batch([(page, context), ...])    # once per page (and once more on search results)
    end_sessions([user, ...])                # bookkeeping only: no LLM work
    write_ended(at_least=k)                  # THE batched end-of-session writes (feelings, ratings, memory)

``write_ended`` is the only place where ended sessions are written; a model may also call it itself at the
start of a protocol method that reads an agent's memory while that agent's last session is still unwritten
(``start_session``, ``social_round``, ``score_items``), never inside a getter.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from recagent_gym.actions import Action
from recagent_gym.llm.protocol import Usage

NO_USAGE = Usage()
"""The usage of a response without an LLM call (``Usage`` is frozen, so one instance serves every response)."""

# The three records below are made several times per page step, so they have their own ``__init__``: writing the
# instance ``__dict__`` once is about 3x cheaper than the frozen dataclass's per-field ``object.__setattr__``. They
# stay frozen dataclasses (fields, repr, eq, hash, ``dataclasses.replace``).


@dataclass(frozen=True, init=False)
class Page:
    """Items shown to a user, in display order (dense catalogue ids)."""

    items: tuple[int, ...]
    index: int = 0
    """Page number within the session, from 0."""
    source: str = "recommender"
    """``recommender`` for the policy's page, ``search`` for results of the user's own query."""
    query: str | None = None
    """The search query when ``source == 'search'``."""

    def __init__(
        self, items: tuple[int, ...], index: int = 0, source: str = "recommender", query: str | None = None
    ) -> None:
        self.__dict__.update(items=items, index=index, source=source, query=query)


@dataclass(frozen=True, init=False)
class Context:
    """What the user knows besides the page."""

    user_id: int
    step: int = 0
    """Step within the session."""
    time_h: float = 0.0
    """Simulated clock, in hours since the start of the simulation."""
    watched: tuple[int, ...] = ()
    """Items watched earlier in this session."""
    heard: tuple[int, ...] = ()
    """Items the user recently heard about from friends (chat or post)."""

    def __init__(
        self,
        user_id: int,
        step: int = 0,
        time_h: float = 0.0,
        watched: tuple[int, ...] = (),
        heard: tuple[int, ...] = (),
    ) -> None:
        self.__dict__.update(user_id=user_id, step=step, time_h=time_h, watched=watched, heard=heard)


@dataclass(frozen=True, init=False)
class Response:
    """A user's typed response to a page. ``item`` is a catalogue id on the page, set only for WATCH."""

    action: Action
    item: int | None = None
    rating: float | None = None
    """1..5 where the user model rates, else None."""
    feeling: str | None = None
    query: str | None = None
    """The search query, for SEARCH."""
    text: str = ""
    """Raw model text behind the decision, if any (for ``info``)."""
    usage: Usage = NO_USAGE
    parse_ok: bool = True
    """False when the model's first answer could not be used."""
    fallback: bool = False
    """True when the documented fallback produced this response (counted in ``info`` and logs)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Model-specific signals (scores, permutation shown, retries) for ``info``."""

    def __init__(
        self,
        action: Action,
        item: int | None = None,
        rating: float | None = None,
        feeling: str | None = None,
        query: str | None = None,
        text: str = "",
        usage: Usage = NO_USAGE,
        parse_ok: bool = True,
        fallback: bool = False,
        extra: dict[str, Any] | None = None,
    ) -> None:
        if (action == Action.WATCH) != (item is not None):
            raise ValueError("a WATCH response needs an item, and only a WATCH response has one")
        if action == Action.SEARCH and not query:
            raise ValueError("a SEARCH response needs a query")
        self.__dict__.update(
            action=action,
            item=item,
            rating=rating,
            feeling=feeling,
            query=query,
            text=text,
            usage=usage,
            parse_ok=parse_ok,
            fallback=fallback,
            extra={} if extra is None else extra,
        )


def forgets_sessions(model: object) -> bool:
    """Whether every session of ``model``'s users starts from the user as first drawn (RecSim's fresh user per
    episode: ``fresh_sessions``, e.g. ``user.recsim_fresh_sessions``). Such users keep nothing of earlier sessions,
    so an env must not tell a recommender what they were shown before: the held-out users are scored on first
    sessions, where nothing was."""
    return bool(getattr(model, "fresh_sessions", False))


@runtime_checkable
class UserModel(Protocol):
    """A simulated user population. All randomness comes from the ``rng`` passed in."""

    social: bool
    """Whether the users have a social life between sessions (the kernel runs :meth:`social_round` only then)."""

    def start_session(self, user_id: int, rng: np.random.Generator) -> None:
        """Called at ``reset`` for the user whose session begins."""
        ...

    def respond(self, page: Page, context: Context, rng: np.random.Generator) -> Response:
        """The user's response to one page; internal state (interest, memory) is updated."""
        ...

    def respond_batch(
        self, requests: Sequence[tuple[Page, Context]], rngs: Sequence[np.random.Generator]
    ) -> list[Response]:
        """Many users' responses at once (the LLM agent sends them to the backend as one batch)."""
        ...

    def end_sessions(self, user_ids: Sequence[int]) -> None:
        """These users' sessions are over (bookkeeping only; their writes wait for :meth:`write_ended`)."""
        ...

    def write_ended(self, *, at_least: int = 1) -> list[int]:
        """Write every session ended since the last call, in one batch, if at least ``at_least`` are pending;
        returns the users written."""
        ...

    def social_round(self, rng: np.random.Generator, time_h: float, incoming: Sequence[int]) -> list[dict[str, Any]]:
        """The social world once between sessions (``incoming``: users about to start a session sit it out);
        returns its events. Users without a social life return ``[]``."""
        ...

    def score_items(self, user_id: int, items: Sequence[int], rng: np.random.Generator) -> np.ndarray:
        """Preference score per candidate item (higher = more likely chosen); used by the discrimination test."""
        ...

    def get_state(self) -> dict[str, Any]:
        """Plain-data state (no clients, no open files)."""
        ...

    def set_state(self, state: dict[str, Any]) -> None: ...
