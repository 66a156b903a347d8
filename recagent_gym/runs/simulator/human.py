"""Role play: a human takes one agent's place and plays it from a terminal (or any text stream).

Each round the human's agent is active and the human chooses ``recommender``, ``social`` or ``nothing``. In the
recommender the human sees each page and types ``w <n> [rating]`` (watch item n, optionally rating it 1-5),
``n`` (next page), ``s <query>`` (search) or ``l`` (leave). In the social media the human types
``chat <friend>: <message>`` (the friend's agent answers in character) or ``post: <text>`` (every friend's memory
gets it), or ``skip``. End of input means ``nothing`` / ``leave``. The other agents act as usual.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from recagent_gym.prompts import chat as chat_prompt
from recagent_gym.prompts.checked import generate_checked
from recagent_gym.runs.simulator.errors import SimulationError
from recagent_gym.runs.simulator.events import Event
from recagent_gym.runs.simulator.social_step import deliver_message, deliver_post
from recagent_gym.users.agent.clock import clock_text
from recagent_gym.users.protocol import Action, Context, Page, Response

if TYPE_CHECKING:
    from recagent_gym.runs.simulator.runner import Simulation

MAX_TRIES = 5
"""Invalid commands accepted in a row before the documented fallback (next page / nothing), which is counted."""
ACTION_WORDS = {
    "r": "recommender",
    "recommender": "recommender",
    "s": "social",
    "social": "social",
    "n": "nothing",
    "nothing": "nothing",
}
PAGE_HELP = "type: w <n> [rating 1-5] | n (next page) | s <query> (search) | l (leave)"
_ASCII_INT = re.compile(r"[0-9]{1,6}")


def _ascii_int(word: str) -> int | None:
    """``word`` as a number when it is ASCII digits only (``str.isdigit`` accepts ``²`` and ``٣``, which ``int``
    then rejects or reads differently)."""
    return int(word) if _ASCII_INT.fullmatch(word) else None


class HumanPlayer:
    """A human playing agent ``who`` (a name or ``#id``); implements the user-model calls the env makes."""

    def __init__(self, who: str, stdin: IO[str] | None = None, stdout: IO[str] | None = None) -> None:
        self.who = who
        self.stdin = stdin if stdin is not None else sys.stdin
        self.stdout = stdout if stdout is not None else sys.stdout
        self.user_id = -1
        self.name = who
        self.sim: Simulation | None = None
        self.fallbacks = 0
        """Commands that stayed invalid after :data:`MAX_TRIES` attempts (the fallback was used)."""

    def bind(self, sim: Simulation) -> HumanPlayer:
        self.sim = sim
        self.user_id = sim.find_agent(self.who)
        self.name = sim.names[self.user_id]
        return self

    # -- terminal -------------------------------------------------------------------------------------------------

    def say(self, text: str) -> None:
        self.stdout.write(text + "\n")
        self.stdout.flush()

    def ask(self, prompt: str) -> str | None:
        self.stdout.write(prompt)
        self.stdout.flush()
        line = self.stdin.readline()
        return None if line == "" else line.strip()

    # -- what the human's agent does ------------------------------------------------------------------------------

    def choose_action(self, clock: str) -> str:
        self.say(f"\n[{clock}] You are {self.name}. What do you do?")
        for _ in range(MAX_TRIES):
            answer = self.ask("[r]ecommender, [s]ocial media or [n]othing > ")
            if answer is None:
                return "nothing"
            if answer.lower() in ACTION_WORDS:
                return ACTION_WORDS[answer.lower()]
            self.say("please answer r, s or n")
        self.fallbacks += 1
        return "nothing"

    def start_session(self, user_id: int, rng: np.random.Generator) -> None:
        self.say(f"{self.name} enters the recommender system.")

    def end_session(self, user_id: int) -> None:
        self.say(f"{self.name} leaves the recommender system.")

    def respond_batch(
        self, requests: Sequence[tuple[Page, Context]], rngs: Sequence[np.random.Generator]
    ) -> list[Response]:
        return [self.respond(page, ctx, rng) for (page, ctx), rng in zip(requests, rngs, strict=True)]

    def respond(self, page: Page, context: Context, rng: np.random.Generator) -> Response:
        assert self.sim is not None
        kind = f"search results for {page.query!r}" if page.source == "search" else f"page {page.index + 1}"
        self.say(f"{kind}:")
        for n, item in enumerate(page.items, start=1):
            self.say(f"  {n}. {self.sim.dataset.item_text(item)}")
        for _ in range(MAX_TRIES):
            line = self.ask(PAGE_HELP + " > ")
            if line is None:
                return Response(Action.LEAVE, text="(end of input)")
            response = self._parse(line, page)
            if response is not None:
                return response
            self.say("not understood; " + PAGE_HELP)
        self.fallbacks += 1
        return Response(Action.NEXT, text="(no valid command)", parse_ok=False, fallback=True)

    @staticmethod
    def _parse(line: str, page: Page) -> Response | None:
        word, _, rest = line.partition(" ")
        word = word.lower()
        if word in ("n", "next"):
            return Response(Action.NEXT, text=line)
        if word in ("l", "leave"):
            return Response(Action.LEAVE, text=line)
        if word in ("s", "search") and rest.strip():
            return Response(Action.SEARCH, query=rest.strip(), text=line)
        if word in ("w", "watch"):
            parts = rest.split()
            number = _ascii_int(parts[0]) if parts else None
            if number is None or not 1 <= number <= len(page.items):
                return None
            rating = None
            if len(parts) > 1:
                stars = _ascii_int(parts[1])
                if stars is None or not 1 <= stars <= 5:
                    return None
                rating = float(stars)
            return Response(Action.WATCH, item=int(page.items[number - 1]), rating=rating, text=line)
        return None

    def social(self, sim: Simulation, round_index: int, time_h: float, rng: np.random.Generator) -> list[Event]:
        model = sim.model
        friends = model.friends(self.user_id)
        if not friends:
            self.say("you have no friends in this simulation.")
            return [Event(round_index, time_h, "social_none", self.user_id, self.name)]
        self.say("friends: " + ", ".join(f"{sim.names[f]} (#{f})" for f in friends))
        for _ in range(MAX_TRIES):
            line = self.ask("chat <friend>: <message> | post: <text> | skip > ")
            if line is None or line.lower() == "skip":
                return [Event(round_index, time_h, "idle", self.user_id, self.name)]
            head, sep, text = line.partition(":")
            text = text.strip()
            if sep and head.strip().lower() == "post" and text:
                deliver_post(model, self.user_id, text, time_h)
                items = model.titles.find(text)
                return [
                    Event(
                        round_index,
                        time_h,
                        "post",
                        self.user_id,
                        self.name,
                        items=items,
                        titles=[model.title(i) for i in items],
                        text=text,
                        extra={"human": True},
                    )
                ]
            if sep and head.lower().startswith("chat ") and text:
                try:
                    friend = sim.find_agent(head[5:].strip())
                except SimulationError as exc:
                    self.say(str(exc))
                    continue
                if friend not in friends:
                    self.say(f"{sim.names[friend]} is not your friend")
                    continue
                reply = self._reply(sim, friend, text, time_h, rng)
                self.say(f"{sim.names[friend]}: {reply}")
                items = model.titles.find(text + " " + reply)
                return [
                    Event(
                        round_index,
                        time_h,
                        "chat",
                        self.user_id,
                        self.name,
                        items=items,
                        titles=[model.title(i) for i in items],
                        text=f"{self.name}: {text} | {sim.names[friend]}: {reply}",
                        extra={"with": friend, "with_name": sim.names[friend], "human": True},
                    )
                ]
            self.say("not understood")
        self.fallbacks += 1
        return [Event(round_index, time_h, "idle", self.user_id, self.name, extra={"fallback": True})]

    def _reply(self, sim: Simulation, friend: int, text: str, time_h: float, rng: np.random.Generator) -> str:
        """The friend's agent answers one line in character (contract: ``prompts/chat.py``)."""
        model = sim.model
        deliver_message(model, self.user_id, friend, text, time_h)
        recent = [model.title(i) for i in model.history(friend)[-3:]][::-1]
        prompt = chat_prompt.build(
            profile=model.profile_text(friend, "social"),
            memory=model.memory_block(friend, text, time_h),
            name=sim.names[friend],
            friend=self.name,
            recent=", ".join(recent) or "none",
            clock=clock_text(time_h),
            dialogue=[f"{self.name}: {text}"],
        )
        answer = generate_checked(
            model.llm,
            [prompt],
            chat_prompt.validate,
            seed=int(rng.integers(0, 2**31 - 1)),
            max_tokens=model.social_config.utterance_max_tokens,
            stop=chat_prompt.STOP,
        )[0]
        agent = model.agent(friend)
        agent.usage = agent.usage + answer.usage
        agent.count("chat", reasked=answer.reasked, fallback=answer.value is None)
        reply = answer.value if answer.value is not None else chat_prompt.fallback(recent_titles=recent, turn=0)
        deliver_message(model, friend, self.user_id, reply, time_h)
        return str(reply)

    def get_state(self) -> dict[str, Any]:
        return {"fallbacks": self.fallbacks}

    def set_state(self, state: dict[str, Any]) -> None:
        self.fallbacks = int(state.get("fallbacks", 0))
