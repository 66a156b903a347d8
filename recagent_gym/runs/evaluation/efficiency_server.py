"""The efficiency test's local server: the built-in OpenAI-compatible server, answering the take-action question
'do nothing' only 1 time in 20 (as a real model keeps agents busy), so idle agent-rounds stay rare."""

from __future__ import annotations

import json
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
