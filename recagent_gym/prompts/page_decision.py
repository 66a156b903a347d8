"""Contract of ``templates/page_decision.txt``: the ``direct`` page decision, one ``choose`` over all actions.

Options: ``" watch <title (year)>"`` for each shown item (in the shuffled display order), then ``" go to the next
page"``, ``" search"``, ``" leave"``. Because the answer is an option index, an item not on the page cannot come out.
Validate: the index points into the options. Fallback (after one re-ask): ``next page`` (the neutral action; the
user's patience still applies); counted.
"""

from __future__ import annotations

from collections.abc import Sequence

from recagent_gym.actions import Action
from recagent_gym.llm.protocol import Choice
from recagent_gym.prompts.template import load_template

FIXED_OPTIONS: tuple[str, ...] = (" go to the next page", " search", " leave")
FIXED_ACTIONS: tuple[Action, ...] = (Action.NEXT, Action.SEARCH, Action.LEAVE)


def options(titles: Sequence[str]) -> list[str]:
    """One option per shown item (duplicates get ``#k`` so that options stay distinct), then the fixed ones."""
    seen: dict[str, int] = {}
    result = []
    for title in titles:
        seen[title] = seen.get(title, 0) + 1
        result.append(f" watch {title}" + (f" #{seen[title]}" if seen[title] > 1 else ""))
    return result + list(FIXED_OPTIONS)


def build(*, profile: str, memory: str, name: str, clock: str, session: str, page: Sequence[str]) -> str:
    listing = "\n".join(f"- {line}" for line in page)
    return load_template("page_decision").render(
        profile=profile, memory=memory, name=name, clock=clock, session=session, page=listing
    )


def session_line(*, name: str, watched: Sequence[str]) -> str:
    """What the agent watched earlier in this session (``templates/page_decision_session.txt``), or ""."""
    if not watched:
        return ""
    return load_template("page_decision_session").render(name=name, watched=", ".join(watched)).strip()


def parse(choice: Choice) -> int:
    """The option index (already checked to lie among the options)."""
    return choice.index


def action_of(index: int, n_items: int) -> tuple[Action, int | None]:
    """``(WATCH, position)`` for an item option, else the fixed action and ``None``."""
    if index < n_items:
        return Action.WATCH, index
    return FIXED_ACTIONS[index - n_items], None
