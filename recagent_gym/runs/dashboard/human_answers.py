"""A human player's answer checked against the question pending in the play panel (its page's items, its friends)."""

from __future__ import annotations

from typing import Any

from recagent_gym.runs.dashboard.refusals import Busy, DashboardError
from recagent_gym.runs.dashboard.requests import HumanAction


def fit_to_question(action: HumanAction, question: dict[str, Any] | None, player: str) -> HumanAction:
    """``action`` as the pending ``question`` takes it (a chat names the friend by ``#id``: names may hold ':' or
    be ambiguous); refused when nothing is asked, or it does not fit. ``player``: the played agent's name."""
    if question is None:
        raise Busy("the human player is not being asked anything right now")
    fits = action.question_kinds()
    if fits and question["kind"] not in fits:
        raise Busy(f"a {action.kind!r} answer does not fit the pending {question['kind']!r} question")
    if action.kind == "watch" and action.n is not None and not 1 <= action.n <= len(question["items"]):
        raise DashboardError(f"item {action.n} is not on the page (1..{len(question['items'])})")
    if action.kind == "chat" and question["kind"] == "social":
        wanted = str(action.friend).strip().lower()
        found = [f["id"] for f in question["friends"] if wanted in (f["name"].lower(), f"#{f['id']}", str(f["id"]))]
        if not found:
            friends = ", ".join(f["name"] for f in question["friends"]) or "none"
            raise DashboardError(f"{action.friend!r} is not a friend of {player} (friends: {friends})")
        action = action.model_copy(update={"friend": f"#{found[0]}"})
    return action
