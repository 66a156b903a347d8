"""The session kernel: N open sessions stepped by one page each, and the next sessions started, for every face.

One page step (:meth:`SessionKernel.step_sessions`) is, for N sessions at once:

1. check each page and apply the duplicate rule;
2. ``respond_batch`` of the user model (one batched LLM call for the LLM agents);
3. the catalogue search for the users who searched, and ``respond_batch`` on the results pages;
4. apply: watches recorded, response codes, page counts, termination (leave) and truncation (``max_pages``);
5. the finished sessions end (``end_sessions``: bookkeeping) and their writes (feelings, ratings, memory) run as
   one explicit batch (``write_ended``) once ``end_batch`` are pending.

:meth:`SessionKernel.restart` ends what is still open in the given streams (:class:`SessionStream`: the
sessions of one env or sub-env, one after another), draws their next users (the one
activation module), runs ONE social round for all of them (the incoming users sit it out) and starts their
sessions. The single env is N=1 of it, the vector env N, and the simulator and the sequence evaluation step it
with a recommender's pages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

import numpy as np

from recagent_gym.llm.seeding import SEED_HIGH
from recagent_gym.recommenders.search import CatalogueSearch
from recagent_gym.session.activation import draw_user
from recagent_gym.session.events import social_events
from recagent_gym.session.outcome import StepOutcome, StepResult
from recagent_gym.session.state import LEAVE, NEXT, SEARCH_NEXT, SEARCH_WATCH, WATCH, RecommenderSession, SessionStream
from recagent_gym.session.tables import SessionTables
from recagent_gym.users.protocol import Action, Page, Response, UserModel


@dataclass(frozen=True)
class SessionRules:
    """The fixed rules of the sessions (from ``EnvConfig`` or ``SimulationConfig``)."""

    page_size: int
    max_pages: int
    history_length: int = 10
    duplicate_rule: str = "replace"
    session_hours: float = 1.0
    """Clock advance between two sessions of a stream (unless the caller sets the time)."""
    social: bool = True
    """Run the user model's social round before a stream's sessions (not before the world's first)."""
    end_batch: int = 1
    """Ended sessions written together (``user.session_end_batch``): fewer, larger LLM batches."""


@dataclass(frozen=True)
class StartedSession:
    """A session started by :meth:`SessionKernel.restart`, with what its face reports in the reset ``info``."""

    stream: int
    """Its index in the streams given to :meth:`SessionKernel.restart` (the sub-env)."""
    info: dict[str, Any]


Users = UserModel | list[UserModel] | tuple[UserModel, ...]
"""One user model for every session, or a list of one per session (e.g. a human player for one of them)."""


class SessionKernel:
    """The shared tables, search and rules; the sessions live in the faces' streams (:class:`SessionStream`)."""

    def __init__(self, tables: SessionTables, search: CatalogueSearch | None, rules: SessionRules) -> None:
        """``search=None``: no catalogue search (a search finds nothing: the user is taken to ask for the next
        page, ``search_empty``)."""
        if rules.page_size < 1 or rules.max_pages < 1:
            raise ValueError(f"page_size and max_pages must be >= 1, got {rules.page_size} and {rules.max_pages}")
        self.tables = tables
        self.search = search
        self.rules = rules

    # --------------------------------------------------------------------------------------------------- one step
    def step_sessions(
        self, sessions: Sequence[RecommenderSession], pages: Sequence[Any], users: Users
    ) -> list[StepResult]:
        """One page for each open session (see the module docstring); ``pages`` is one page per session, or an
        ``(N, page_size)`` array."""
        n = len(sessions)
        models = _per_session(users, n)
        shown = self._check_pages(sessions, pages)
        requests = [(page, s.context()) for s, (page, _, _) in zip(sessions, shown, strict=True)]
        responses = _respond(models, sessions, requests, range(n))
        search_pages: dict[int, Page] = {}
        if self.search is not None:
            for k, r in enumerate(responses):
                if r.action == Action.SEARCH and r.query is not None:
                    found = self.search.search(r.query, self.rules.page_size, exclude=sessions[k].seen)
                    if found:
                        search_pages[k] = Page(
                            tuple(found), index=sessions[k].page_index, source="search", query=r.query
                        )
        search_answers: dict[int, Response] = {}
        if search_pages:
            asked = sorted(search_pages)
            answers = _respond(models, sessions, [(search_pages[k], sessions[k].context()) for k in asked], asked)
            search_answers = dict(zip(asked, answers, strict=True))
        results = [
            self._apply(s, page, dup, rep, responses[k], search_pages.get(k), search_answers.get(k))
            for k, (s, (page, dup, rep)) in enumerate(zip(sessions, shown, strict=True))
        ]
        done = [k for k, s in enumerate(sessions) if not s.open]  # they finished in this step
        if done:
            self.end([sessions[k] for k in done], models=[models[k] for k in done])
        return results

    def _check_pages(self, sessions: Sequence[RecommenderSession], pages: Sequence[Any]) -> list[tuple[Page, int, int]]:
        """Each page checked (open session, ``page_size`` ids in the catalogue) and put through the duplicate rule:
        ``(page, duplicates, watched)`` per session. The ids are checked and converted for all pages at once."""
        size, n_items = self.rules.page_size, self.tables.n_items
        for s in sessions:
            if not s.open:
                raise RuntimeError(f"the session of user {s.user} is over; start the next one first")
        if isinstance(pages, np.ndarray):
            batch = pages
        else:
            try:
                batch = np.asarray(pages)
            except ValueError:  # pages of different lengths
                batch = np.zeros(0)
        if batch.dtype.kind in "iu" and batch.shape == (len(sessions), size):
            rows: list[list[int]] = batch.tolist()
        else:  # any other shape or dtype: page by page, as the error messages name the action
            rows = [self._page_items(p) for p in pages]
        if len(rows) != len(sessions):
            raise ValueError(f"{len(sessions)} sessions but {len(rows)} pages")
        rule, tables = self.rules.duplicate_rule, self.tables
        out = []
        for s, items in zip(sessions, rows, strict=True):
            if min(items) < 0 or max(items) >= n_items:
                raise ValueError(f"action holds item ids outside 0..{n_items - 1}: {items}")
            items, duplicates, watched = s.apply_duplicate_rule(items, rule, tables)
            out.append((Page(tuple(items), index=s.page_index), duplicates, watched))
        return out

    def _page_items(self, action: Any) -> list[int]:
        items = np.asarray(action).reshape(-1)
        if items.shape[0] != self.rules.page_size:
            raise ValueError(f"action must hold {self.rules.page_size} item ids, got shape {np.shape(action)}")
        return [int(i) for i in items]

    def _apply(
        self,
        session: RecommenderSession,
        page: Page,
        duplicates: int,
        watched: int,
        response: Response,
        search_page: Page | None,
        search_response: Response | None,
    ) -> StepResult:
        searched = response.action == Action.SEARCH
        search_empty = search_repeat = False
        if searched:
            if search_response is None:
                search_empty = True
                search_response = Response(Action.NEXT, extra={"search_empty": True})
            elif search_response.action == Action.SEARCH:
                search_repeat = True  # one search per step: searching again on the results page asks for the next
                search_response = Response(Action.NEXT, text=search_response.text, usage=search_response.usage)
            final = search_response
            outcome = StepOutcome(response, search_response)
        else:
            final = response
            outcome = StepOutcome(response)
        action = final.action
        if action == Action.WATCH and final.item is not None:
            session.record_watch(final.item, self.tables)
            rating = final.rating
            session.last_rating = 0.0 if rating is None else (min(max(rating, 1.0), 5.0) - 1.0) / 4.0
            session.last_code = SEARCH_WATCH if searched else WATCH
        elif action == Action.LEAVE:
            session.last_code = LEAVE
        else:
            session.last_code = SEARCH_NEXT if searched else NEXT
        session.page_index += 1
        terminated = action == Action.LEAVE
        truncated = not terminated and session.page_index >= self.rules.max_pages
        if terminated or truncated:
            session.open = False
        return StepResult(
            session.user,
            page,
            outcome,
            session.last_code,
            duplicates,
            watched,
            search_page,
            search_empty,
            search_repeat,
            terminated,
            truncated,
            session.time_h,
        )

    def end(self, sessions: Sequence[RecommenderSession], *, models: Sequence[UserModel]) -> list[int]:
        """End ``sessions`` (bookkeeping) and write the ended sessions once ``end_batch`` are pending; returns the
        users whose sessions were written now."""
        for s in sessions:
            s.open = False
        written: list[int] = []
        for model, group in _groups(models, sessions):
            model.end_sessions([s.user for s in group])
            written += model.write_ended(at_least=self.rules.end_batch)
        return written

    # ------------------------------------------------------------------------------------------ the next sessions
    def restart(
        self,
        streams: Sequence[SessionStream],
        finished: Sequence[int],
        users: Users,
        *,
        user_ids: Sequence[int | None] | None = None,
        time_h: float | None = None,
    ) -> list[StartedSession]:
        """Start the next session in each stream of ``finished`` (indices into ``streams``; see the module docstring).

        Users are drawn in stream order, never one in an open session or just drawn (``activation_redraws`` counts
        the redraws); ``user_ids`` picks them instead. ``time_h`` sets the streams' clocks (an outer simulator's
        time); otherwise each session advances its stream's clock by ``session_hours``. The social round runs at the
        latest of the due streams' clocks with the first due stream's seed; its events go into that stream's info
        (``social_events``), the others name it (``social_round_env``). ``streams`` are one world: it runs at most
        one round per clock time, so a stream that reaches a time the world's round already ran at (another sub-env
        got there first) starts its session without one (``social_round_env`` is then absent).
        """
        models = dict(zip(finished, _per_session(users, len(finished)), strict=True))
        left = [i for i in finished if streams[i].busy_user is not None]
        if left:
            self.end([streams[i].session for i in left], models=[models[i] for i in left])  # type: ignore[misc]
        taken = {s.busy_user for j, s in enumerate(streams) if j not in finished and s.busy_user is not None}
        social = self.rules.social and models[finished[0]].social if finished else False
        drawn: dict[int, _NextSession] = {}
        for k, i in enumerate(finished):
            drawn[i] = self._draw_next(streams[i], None if user_ids is None else user_ids[k], taken, time_h, social)
            taken.add(drawn[i].user)
        due = [i for i in finished if drawn[i].social_due]
        last_round = max((s.social_h for s in streams), default=-np.inf)
        if due and max(streams[i].clock for i in due) <= last_round:
            due = []  # the world ran its round at this time already (another stream got there first)
        events = self._social_round(streams, finished, drawn, models[due[0]], due[0]) if due else []
        started = []
        for i in finished:
            nxt, stream = drawn[i], streams[i]
            rng = np.random.default_rng(nxt.session_seed)
            stream.session = RecommenderSession.start(
                nxt.user, rng, stream.clock, self.tables, self.rules.history_length
            )
            stream.started += 1
            models[i].start_session(nxt.user, rng)
            info: dict[str, Any] = {
                "user_id": nxt.user,
                "time_h": stream.clock,
                "activation_redraws": nxt.redraws,
                "social_events": events if due and i == due[0] else [],
            }
            if due and i != due[0]:
                info["social_round_env"] = due[0]
            started.append(StartedSession(i, info))
        return started

    def _draw_next(
        self, stream: SessionStream, wanted: int | None, taken: set[int], time_h: float | None, social: bool
    ) -> _NextSession:
        """Advance ``stream``'s clock, pick its next user (``wanted``, or drawn by activation outside ``taken``) and
        draw the session's two child seeds."""
        if time_h is not None:
            stream.clock = float(time_h)
        elif stream.started > 0:
            stream.clock += self.rules.session_hours
        redraws = 0
        if wanted is None:
            if stream.cumulative is None:
                raise RuntimeError("call reset() before starting a session")
            user, redraws = draw_user(stream.cumulative, stream.rng, frozenset(taken))
        elif not 0 <= int(wanted) < self.tables.n_users:
            raise ValueError(f"user_id={wanted} is outside 0..{self.tables.n_users - 1}")
        else:
            user = int(wanted)
        # Both child seeds are drawn every session so the streams do not depend on the social switch.
        # Two scalar draws: the same numbers and generator state as one draw of size 2 (both take next_uint32
        # per value), at half the cost.
        social_seed, session_seed = int(stream.rng.integers(0, SEED_HIGH)), int(stream.rng.integers(0, SEED_HIGH))
        return _NextSession(user, redraws, social_seed, session_seed, social and stream.started > 0)

    def _social_round(
        self,
        streams: Sequence[SessionStream],
        finished: Sequence[int],
        drawn: dict[int, _NextSession],
        model: UserModel,
        first_due: int,
    ) -> list[dict[str, Any]]:
        """ONE social round for every due stream (the incoming users sit it out), as event records."""
        due = [i for i in finished if drawn[i].social_due]
        clock = max(streams[i].clock for i in due)
        incoming = [drawn[i].user for i in finished]
        raw = model.social_round(np.random.default_rng(drawn[first_due].social_seed), clock, incoming)
        for stream in streams:
            stream.social_h = clock
        title = self.tables.titles.__getitem__
        return [asdict(e) for e in social_events(raw, streams[first_due].started, clock, lambda u: "", title)]


class _NextSession(NamedTuple):
    """What :meth:`SessionKernel.restart` drew for one stream's next session."""

    user: int
    redraws: int
    social_seed: int
    session_seed: int
    social_due: bool
    """The social round runs before this session (social on, and not the stream's first session)."""


def _per_session(users: Users, n: int) -> list[UserModel]:
    if isinstance(users, (list, tuple)):
        if len(users) != n:
            raise ValueError(f"{n} sessions but {len(users)} user models")
        return list(users)
    return [users] * n


def _groups(models: Sequence[UserModel], items: Sequence[Any]) -> list[tuple[UserModel, list[Any]]]:
    """``items`` grouped by their user model (in order of first appearance): one batch per model."""
    groups: dict[int, tuple[UserModel, list[Any]]] = {}
    for model, item in zip(models, items, strict=True):
        groups.setdefault(id(model), (model, []))[1].append(item)
    return list(groups.values())


def _respond(
    models: Sequence[UserModel],
    sessions: Sequence[RecommenderSession],
    requests: Sequence[tuple[Page, Any]],
    indices: Sequence[int],
) -> list[Response]:
    """One ``respond_batch`` per user model (the LLM agents together; a human player alone)."""
    if not indices:
        return []
    first = models[indices[0]]
    if len(indices) == 1 or all(models[k] is first for k in indices):
        return first.respond_batch(requests, [sessions[k].rng for k in indices])
    out: dict[int, Response] = {}
    for model, group in _groups([models[k] for k in indices], list(zip(indices, requests, strict=True))):
        answers = model.respond_batch([req for _, req in group], [sessions[k].rng for k, _ in group])
        out.update({k: a for (k, _), a in zip(group, answers, strict=True)})
    return [out[k] for k in indices]
