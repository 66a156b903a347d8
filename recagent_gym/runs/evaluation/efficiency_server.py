"""The efficiency test's local server: the built-in OpenAI-compatible server, answering the take-action question
'do nothing' only 1 time in 20 (as a real model keeps agents busy), so idle agent-rounds stay rare."""

from __future__ import annotations

import json
import multiprocessing
import time
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from recagent_gym.llm.local_server import PICK, LocalServer, trailing_options
from recagent_gym.prompts.take_action import ACTIONS
from recagent_gym.prompts.take_action import OPTIONS as TAKE_ACTION_OPTIONS

IDLE_ODDS = 0.05
"""How often the built-in server answers "do nothing" when asked what an agent does with its free time (a real
model asked by an active agent mostly picks an activity; the plain random server's third made a third of the
agent-rounds idle, which lowered the requests per agent-round)."""


IDLE_LABEL = TAKE_ACTION_OPTIONS[ACTIONS.index("nothing")].strip()


class ActiveAgentServer(LocalServer):
    """:class:`~recagent_gym.llm.local_server.LocalServer` whose answer to the take-action question is "do nothing"
    with probability :data:`IDLE_ODDS` (the other options share the rest), drawn from the request's own seed like
    every random answer; every other request is answered as the plain server does."""

    def answer(self, body: dict[str, Any]) -> str:
        prompt = str(body["messages"][-1]["content"])
        wants_schema = body.get("response_format", {}).get("type") == "json_schema"
        if wants_schema:
            labels = body["response_format"]["json_schema"]["schema"]["properties"]["choice"]["enum"]
        else:
            labels = trailing_options(prompt)
        seed = body.get("seed")
        if IDLE_LABEL not in labels or PICK.search(prompt) or not isinstance(seed, int) or self.choice != "random":
            return super().answer(body)
        odds = [IDLE_ODDS if label == IDLE_LABEL else (1 - IDLE_ODDS) / (len(labels) - 1) for label in labels]
        label = labels[int(np.random.default_rng([self.seed, seed]).choice(len(labels), p=odds))]
        return json.dumps({"choice": label}) if wants_schema else label


class ServerProcess:
    """An :class:`ActiveAgentServer` in a process of its own (``evaluation.efficiency_server_process``), with the
    same ``base_url``, ``request_count`` and ``key_counts``: a real LLM server never shares the simulator's
    interpreter, where the loopback server's request handling (under a tenth of a zero-latency round's CPU) takes
    the simulator's GIL. :meth:`cpu_s` is the server process's CPU time."""

    def __init__(self, **kwargs: Any) -> None:
        context = multiprocessing.get_context("spawn")  # no fork of a process that holds torch's and our threads
        self._conn, child = context.Pipe()
        self._process = context.Process(target=_serve_in_child, args=(child, kwargs), daemon=True)
        self.base_url = ""

    def __enter__(self) -> ServerProcess:
        self._process.start()
        reply = self._conn.recv()
        if isinstance(reply, BaseException):
            self._process.join()
            raise reply
        self.base_url = reply
        return self

    def __exit__(self, *exc: object) -> None:
        self._conn.send("stop")
        self._process.join(timeout=30)
        if self._process.is_alive():
            self._process.kill()

    def _counters(self) -> tuple[int, list[int], float]:
        self._conn.send("counters")
        return self._conn.recv()

    @property
    def request_count(self) -> int:
        return self._counters()[0]

    @property
    def key_counts(self) -> list[int]:
        return self._counters()[1]

    def cpu_s(self) -> float:
        """CPU seconds the server process has used so far (every thread)."""
        return self._counters()[2]


def _serve_in_child(conn: Connection, kwargs: dict[str, Any]) -> None:
    try:
        server = ActiveAgentServer(**kwargs)
    except Exception as exc:  # e.g. a bad argument: the parent raises it
        conn.send(exc)
        return
    with server:
        conn.send(server.base_url)
        while (message := conn.recv()) != "stop":
            if message == "counters":
                conn.send((server.request_count, server.key_counts, time.process_time()))
