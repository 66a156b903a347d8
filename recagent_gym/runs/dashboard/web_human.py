"""Role play from the browser: the simulator's :class:`~recagent_gym.runs.simulator.human.HumanPlayer` with its terminal
replaced by a question slot and an answer queue.

The simulation's worker thread asks (``ask`` blocks on the queue); the web API answers with one command line in the
role-play syntax of ``simulator/human.py`` (``w 2 4``, ``n``, ``s alien``, ``l``, ``chat Bob: hi``, ``post: ...``),
so parsing, fallbacks and social delivery are the simulator's own. ``None`` means end of input (the human gives up:
``nothing`` / ``leave``), which is what a reset or ``stop`` sends to a waiting worker.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from recagent_gym.runs.simulator.events import Event
from recagent_gym.runs.simulator.human import HumanPlayer
from recagent_gym.users.protocol import Context, Page, Response

if TYPE_CHECKING:
    from recagent_gym.runs.simulator.runner import Simulation

TRANSCRIPT_LINES = 200
"""Lines of the role-play transcript kept for the page."""


class NotAsked(RuntimeError):
    """An answer arrived while no question was pending, or it does not fit the pending question."""


class WebHuman(HumanPlayer):
    """A human playing one agent through the dashboard; thread-safe between the worker and request threads."""

    def __init__(self) -> None:
        super().__init__(who="")
        self._answers: queue.Queue[str | None] = queue.Queue()
        self._guard = threading.Lock()
        self.transcript: deque[str] = deque(maxlen=TRANSCRIPT_LINES)
        self._kind = "action"
        self._page: list[dict[str, Any]] = []
        self._friends: list[dict[str, Any]] = []
        self.question: dict[str, Any] | None = None
        """The pending question (``kind``: action / page / social, with the page's items or the friends)."""
        self.asked = 0
        """Questions asked so far (the pending one's ``seq``): lets the page tell a new question from the last."""
        self.closed = False
        """Set when the dashboard shuts down: every later question is answered with end of input at once."""

    # -- the terminal, replaced ----------------------------------------------------------------------------------

    def say(self, text: str) -> None:
        with self._guard:
            self.transcript.extend(text.strip("\n").splitlines() or [""])

    def ask(self, prompt: str) -> str | None:
        with self._guard:
            if self.closed:
                return None
            self.asked += 1
            self.question = {
                "seq": self.asked,
                "kind": self._kind,
                "prompt": prompt.strip(" >"),
                "items": self._page,
                "friends": self._friends,
                "agent": self.user_id,
                "name": self.name,
            }
        line = self._answers.get()
        with self._guard:
            self.question = None
            self.transcript.append("> " + ("(gave up)" if line is None else line))
        return line

    def answer(self, line: str | None, kinds: Sequence[str] = ()) -> None:
        """Hand ``line`` to the waiting worker; ``kinds``: the question kinds this answer fits (any when empty)."""
        with self._guard:
            pending = self.question
            if pending is None:
                raise NotAsked("the human player is not being asked anything right now")
            if kinds and pending["kind"] not in kinds:
                raise NotAsked(f"this answer does not fit the pending question (a {pending['kind']!r} question)")
            self.question = None  # a second answer before the worker picks this one up is refused
        self._answers.put(line)

    def unbind(self) -> None:
        """Nobody is played any more (the simulation's ``human`` must be cleared by the caller)."""
        self.sim, self.user_id, self.who, self.name = None, -1, "", ""

    def close(self) -> None:
        self.closed = True
        self.give_up()

    def give_up(self) -> None:
        """End of input for a waiting worker (nothing happens when no question is pending)."""
        with contextlib.suppress(NotAsked):
            self.answer(None)

    # -- context for the page, then the simulator's own role play -------------------------------------------------

    def choose_action(self, clock: str) -> str:
        self._kind = "action"
        return super().choose_action(clock)

    def respond(self, page: Page, context: Context, rng: np.random.Generator) -> Response:
        assert self.sim is not None
        titles = self.sim.dataset.items["title"]
        self._kind = "page"
        self._page = [
            {"n": n, "item": int(item), "title": str(titles.iat[int(item)]), "text": self.sim.dataset.item_text(item)}
            for n, item in enumerate(page.items, start=1)
        ]
        try:
            return super().respond(page, context, rng)
        finally:
            self._page = []

    def social(self, sim: Simulation, round_index: int, time_h: float, rng: np.random.Generator) -> list[Event]:
        self._kind = "social"
        self._friends = [{"id": f, "name": sim.names[f]} for f in sim.model.friends(self.user_id)]
        try:
            return super().social(sim, round_index, time_h, rng)
        finally:
            self._friends = []

    def view(self) -> dict[str, Any]:
        """Plain data for the page: who is played, the pending question, the transcript's tail."""
        with self._guard:
            return {
                "agent": self.user_id if self.sim is not None else None,
                "name": self.name if self.sim is not None else "",
                "question": self.question,
                "transcript": list(self.transcript)[-60:],
                "fallbacks": self.fallbacks,
            }
