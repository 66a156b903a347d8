"""What one page step did to one session: the pages shown, the user's responses, and the step's ``info`` record."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from recagent_gym.session.state import RESPONSE_CODES
from recagent_gym.users.protocol import Action, Page, Response

_ACTION_NAMES = {action: action.name.lower() for action in Action}


@dataclass(frozen=True, slots=True)
class StepOutcome:
    """What happened in one step: the response to the page, and to the search results if the user searched.

    ``search_response`` is normalised: an empty search becomes NEXT (``search_empty``), a second search on the
    results page becomes NEXT (``search_repeat``: one search per step).
    """

    response: Response
    search_response: Response | None = None

    @property
    def final(self) -> Response:
        """The response that decides the step (the one to the search results, if the user searched)."""
        return self.search_response if self.response.action == Action.SEARCH and self.search_response else self.response


@dataclass(slots=True)
class StepResult:
    """One session's page step, as the faces (env, vector env, simulator, evaluations) see it."""

    user: int
    page: Page
    outcome: StepOutcome
    code: int
    """Index into :data:`~recagent_gym.session.state.RESPONSE_CODES`."""
    duplicates: int
    watched_replaced: int
    search_page: Page | None
    search_empty: bool
    search_repeat: bool
    terminated: bool
    truncated: bool
    time_h: float

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated

    def info(self) -> dict[str, Any]:
        """The step's record: env ``info`` and the simulator's page events are built from these keys."""
        response = self.outcome.response
        search = self.outcome.search_response if response.action == Action.SEARCH else None
        if search is None:
            final = response
            text, usage, parse_ok, fallbacks, extra = (
                response.text,
                response.usage,
                response.parse_ok,
                int(response.fallback),
                response.extra,
            )
        else:
            final = search
            text, usage = f"{response.text}\n{search.text}", response.usage + search.usage
            parse_ok = response.parse_ok and search.parse_ok
            fallbacks = int(response.fallback) + int(search.fallback)
            extra = {**response.extra, "search": search.extra}
        watch = final.action == Action.WATCH
        return {
            "user_id": self.user,
            "page_index": self.page.index,
            "page": self.page.items,
            "duplicates_replaced": self.duplicates,
            "watched_replaced": self.watched_replaced,
            "response": RESPONSE_CODES[self.code],
            "action": _ACTION_NAMES[response.action],
            "item": final.item if watch else None,
            "rating": final.rating if watch else None,
            "from_search": search is not None and watch,
            "query": response.query,
            "search_page": None if self.search_page is None else self.search_page.items,
            "search_empty": self.search_empty,
            "search_repeat": self.search_repeat,
            "text": text,
            "feeling": final.feeling,
            "usage": usage,
            "parse_ok": parse_ok,
            "fallbacks": fallbacks,
            "extra": extra,
            "time_h": self.time_h,
        }
