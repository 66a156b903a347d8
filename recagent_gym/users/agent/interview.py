"""Interviewing an agent: its in-character answer to a question, from its profile and memory."""

from __future__ import annotations

import logging

import numpy as np

from recagent_gym.llm.seeding import SEED_HIGH
from recagent_gym.prompts import interview as interview_prompt
from recagent_gym.prompts.checked import generate_checked
from recagent_gym.users.agent.agents import Agents
from recagent_gym.users.agent.clock import clock_text

log = logging.getLogger(__name__)


def interview_answer(agents: Agents, user_id: int, question: str, rng: np.random.Generator, time_h: float = 0.0) -> str:
    """The agent's answer (fallback: a fixed "no answer" sentence, counted and logged). Its last session must be
    written first (the model does that)."""
    prompt = interview_prompt.build(
        profile=agents.profile_text(user_id, "interview"),
        memory=agents.memory_block(user_id, question, time_h),
        name=agents.profiles[user_id].name,
        clock=clock_text(time_h),
        question=" ".join(question.split()),
    )
    answer = generate_checked(
        agents.llm,
        [prompt],
        interview_prompt.validate,
        seed=int(rng.integers(0, SEED_HIGH)),
        max_tokens=agents.config.interview_max_tokens,
        stop=interview_prompt.STOP,
    )[0]
    agent = agents.agent(user_id)
    agent.usage = agent.usage + answer.usage
    agent.count("interview", reasked=answer.reasked, fallback=answer.value is None)
    if answer.value is None:
        log.warning("interview of user %d: no valid answer after a re-ask, using the fallback", user_id)
        return interview_prompt.FALLBACK
    return str(answer.value)
