"""Issue 14, "the agent without back-references": the page decider holds only shared pieces (language model,
settings, item texts, vectors, score cache) and reads each request's own agent state; it decides a page for an agent
state built by hand, with no population at all; the prompt fragments it adds come from templates."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

import recagent_gym.users.agent.page as page_module
from recagent_gym.prompts import page_decision, search_query
from recagent_gym.prompts.template import TEMPLATE_DIR
from recagent_gym.users.agent.agents import Agents
from recagent_gym.users.agent.items import ItemTexts, ItemVectors
from recagent_gym.users.agent.page import AgentInput, PageDecider, Prepared
from recagent_gym.users.agent.state import AgentState, SessionState
from recagent_gym.users.protocol import Action, Context, Page
from tests._agent_fixtures import make_model, taste_llm, tiny_dataset


def test_the_page_decider_holds_no_reference_to_the_population() -> None:
    model = make_model()
    decider = model._pages
    assert not any(isinstance(value, Agents) for value in vars(decider).values())
    tree = ast.parse(Path(page_module.__file__).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "recagent_gym.users.agent.agents" not in imported and "recagent_gym.users.agent.model" not in imported


def test_a_page_is_decided_from_an_agent_state_built_by_hand() -> None:
    model = make_model(llm=taste_llm(), overrides={"user": {"watch_threshold": -20.0}})
    dataset = tiny_dataset()
    decider = PageDecider(
        llm=model.llm,
        config=model.config,
        strategy="few_shot",
        items=ItemTexts(dataset),
        vectors=ItemVectors(dataset, model.embedder),
        score_cache=None,
    )

    class Notes:
        def __init__(self) -> None:
            self.notes: list[str] = []

        def observe(self, texts: list[str], time_h: float, *, kind: str) -> None:
            self.notes += texts

    rng = np.random.default_rng(0)
    session = SessionState(0, rng, 3, [0, 1], [5, 6], shots=model.shots([0, 1], [5, 6], rng))
    memory = Notes()
    agent = AgentInput(session, AgentState(0), memory, model.profiles[0], "Ann, 30, likes films.", heard_title=None)
    shown = [2, 3, 4]
    request = Prepared(Page((2, 3, 4)), Context(user_id=0), rng, np.arange(3), shown, 7, "", agent)
    [response] = decider.decide([request])
    assert response.action == Action.WATCH and response.item in shown
    assert session.watched == [response.item] and agent.state.watched == [response.item]
    # the watch reaches memory once, by its feeling note when the session ends
    assert memory.notes == [] and [p.item for p in session.pending] == [response.item]


def test_the_deciders_prompt_fragments_come_from_templates() -> None:
    assert (TEMPLATE_DIR / "page_decision_session.txt").read_text().strip() == (
        "Earlier in this session {name} watched {watched}."
    )
    assert (
        page_decision.session_line(name="Ann", watched=["Heat", "Up"])
        == "Earlier in this session Ann watched Heat, Up."
    )
    assert page_decision.session_line(name="Ann", watched=[]) == ""
    assert (TEMPLATE_DIR / "search_query_hint.txt").read_text().strip() == "{name} recently heard about {title}."
    assert search_query.hint(name="Ann", heard_title="Heat") == " Ann recently heard about Heat."
    assert search_query.hint(name="Ann", heard_title=None) == ""


def test_prefetched_feelings_and_notes_leave_nothing_for_the_session_end() -> None:
    """Issue 17: a pipeline prepares a watch's feeling and the compression of the queued notes beside its next page;
    the session's end then stores them without asking the model again, with the same records as without."""
    from recagent_gym.llm.testing import HashingEmbedder, ScriptedLLM
    from recagent_gym.users.agent.model import LLMUserModel
    from tests._agent_fixtures import make_config
    from tests._memory_fixtures import memory_llm
    from tests.test_agent import run_session

    def build() -> tuple[LLMUserModel, ScriptedLLM]:
        llm = taste_llm()
        llm._rules = memory_llm()._rules + llm._rules  # memory prompts answered validly
        config = make_config({"user": {"watch_threshold": -20.0}, "memory": {"sensory": True, "sensory_min_chars": 5}})
        model = LLMUserModel(
            tiny_dataset(), config.user, llm, HashingEmbedder(32), social=config.social, memory=config.memory
        )
        return model, llm

    ahead, llm = build()
    run_session(ahead, 0, seed=0, pages=2)
    ahead.end_sessions([0])
    jobs = ahead.prefetch(0)
    assert len(jobs) >= 2  # a feeling (at least one watch) and the queued notes
    for job in jobs:
        job()
    asked = len(llm.history)
    ahead.write_sessions_of([0])
    late = [h["prompt"] for h in llm.history[asked:]]
    assert not any(p.rstrip().endswith("Sentence:") for p in late)  # every note was compressed ahead
    assert not any("felt" in p or "feel" in p for p in late)  # the feeling too

    plain, plain_llm = build()
    run_session(plain, 0, seed=0, pages=2)
    plain.end_sessions([0])
    asked = len(plain_llm.history)
    plain.write_sessions_of([0])
    assert any(h["prompt"].rstrip().endswith("Sentence:") for h in plain_llm.history[asked:])  # there was work
    assert [r.content for r in ahead.memory(0).records()] == [r.content for r in plain.memory(0).records()]
    assert ahead.agent(0).feelings.keys() == plain.agent(0).feelings.keys()
