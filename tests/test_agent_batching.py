"""Issue 17: fewer calls per agent-round. Memory retrieval embeds the queries of many agents in one embedder call;
a feeling and its rating come in one structured reply (remote models), with the counted fallbacks intact."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from recagent_gym.config import Config
from recagent_gym.llm.testing import HashingEmbedder, ScriptedLLM
from recagent_gym.memory.agent_memory import AgentMemory
from recagent_gym.users.agent.feelings import FeelingJob, write_feelings
from recagent_gym.users.agent.model import LLMUserModel
from tests._agent_fixtures import tiny_dataset


class CountingEmbedder(HashingEmbedder):
    def __init__(self) -> None:
        super().__init__(32)
        self.calls = 0

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        return super().__call__(texts)


def test_memory_blocks_embed_all_queries_in_one_call() -> None:
    embedder = CountingEmbedder()
    config = Config.model_validate({"memory": {"implementation": "long_term_only", "sensory": False}})
    model = LLMUserModel(
        tiny_dataset(), config.user, ScriptedLLM(), embedder, social=config.social, memory=config.memory
    )
    users = list(range(3))
    for u in users:
        model.memory(u).observe([f"user {u} watched a film about space"], 0.0)
    model.memory_backend.flush([model.memory(u) for u in users], 0.0)
    assert all(isinstance(model.memory(u), AgentMemory) and len(model.memory(u).long_term) for u in users)
    singles = [model.memory_block(u, "space films", 1.0) for u in users]
    embedder.calls = 0
    batched = model.memory_blocks([(u, "space films", 1.0) for u in users])
    assert embedder.calls == 1
    assert batched == singles and all(batched)


def _jobs(n: int) -> list[FeelingJob]:
    return [FeelingJob(profile="Ann, 30", name="Ann", item_text="Heat (1995)", title="Heat", score=2.0)] * n


def test_feeling_and_rating_in_one_reply() -> None:
    llm = ScriptedLLM(default=lambda prompt: "4 | I loved the tense heist scenes.")
    results = write_feelings(llm, _jobs(3), rate=True, max_tokens=32, seed=0, combined=True)
    assert [r.rating for r in results] == [4.0] * 3
    assert results[0].feeling == "I loved the tense heist scenes."
    assert llm.calls == 3  # one prompt per watched item: no separate rating prompt
    assert not any(r.feeling_fallback or r.rating_fallback for r in results)


def test_unusable_combined_reply_falls_back_on_both_counted() -> None:
    llm = ScriptedLLM(default=lambda prompt: "no idea")  # no rating: invalid, re-asked once, then both fallbacks
    (result,) = write_feelings(llm, _jobs(1), rate=True, max_tokens=32, seed=0, combined=True)
    assert result.feeling_fallback and result.rating_fallback and result.feeling_reasked
    assert result.rating == 4.0 and result.feeling == "I really liked Heat."


def test_sensory_summary_carries_its_importance_in_one_reply() -> None:
    from recagent_gym.memory.config import MemoryConfig
    from recagent_gym.memory.writer import flush_memories

    llm = ScriptedLLM(default=lambda prompt: "Ann watched Heat and loved it. | Importance: 5")
    config = MemoryConfig(importance_with_summary=True)
    memory = AgentMemory(config, llm, HashingEmbedder(32), "Ann")
    memory.observe(["Ann browsed the page and watched Heat (1995), and she loved the long heist scene."], 1.0)
    report = flush_memories([memory], 1.0)
    assert report.llm_calls == 1  # no separate importance choose
    (record,) = memory.records()
    assert record.content == "Ann watched Heat and loved it." and record.importance == 1.0
    # a reply without a usable level keeps its sentence; the importance choose decides (counted)
    llm2 = ScriptedLLM(default=lambda prompt: "Ann watched Heat and loved it.")
    memory2 = AgentMemory(config, llm2, HashingEmbedder(32), "Ann")
    memory2.observe(["Ann browsed the page and watched Heat (1995), and she loved the long heist scene."], 1.0)
    report2 = flush_memories([memory2], 1.0)
    assert report2.llm_calls == 2 and memory2.stats["importance_fallbacks"] == 1
    assert memory2.records()[0].content == "Ann watched Heat and loved it."


def test_a_whole_chat_in_one_reply() -> None:
    from recagent_gym.social.chat import Speaker, run_chats

    reply = "Have you seen Heat yet?\nBob: Yes, the heist scene is great.\nAnn: I should watch it again.\nZed: hi"
    llm = ScriptedLLM(default=lambda prompt: reply)
    ann = Speaker(0, "Ann", "Ann, 30", "", ("Heat",))
    bob = Speaker(1, "Bob", "Bob, 40", "", ())
    (result,) = run_chats(llm, [(ann, bob)], turns=4, max_tokens=30, clock="Monday", seed=0, one_call=True)
    assert llm.calls == 1 and result.fallbacks == 0
    assert result.lines == [
        (0, "Have you seen Heat yet?"),
        (1, "Yes, the heist scene is great."),
        (0, "I should watch it again."),
    ]  # fmt: skip  (the line by someone else ends the dialogue)
    bad = ScriptedLLM(default=lambda prompt: "")
    (fallback,) = run_chats(bad, [(ann, bob)], turns=2, max_tokens=30, clock="Monday", seed=0, one_call=True)
    assert fallback.fallbacks == 1 and fallback.reasked == 1 and len(fallback.lines) == 2
