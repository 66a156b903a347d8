"""Issue 17: fewer calls per agent-round. Memory retrieval embeds the queries of many agents in one embedder call;
a feeling and its rating come in one structured reply (remote models), with the counted fallbacks intact."""

from __future__ import annotations

from recagent_gym.llm.testing import HashingEmbedder, ScriptedLLM
from recagent_gym.memory.agent_memory import AgentMemory
from recagent_gym.runs.config import Config
from recagent_gym.users.agent.feelings import FeelingJob, write_feelings
from recagent_gym.users.agent.model import LLMUserModel
from tests._agent_fixtures import tiny_dataset


def test_memory_blocks_embed_all_queries_in_one_call() -> None:
    embedder = HashingEmbedder(32)
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


def test_the_feeling_reply_also_says_how_memorable_so_its_note_needs_no_compression() -> None:
    """Issue 17: with the memory scoring importance, the combined feeling reply carries the level too
    (``<rating> | <feeling> | <level>``); a reply without a usable level keeps rating and feeling, counted."""
    llm = ScriptedLLM(default=lambda prompt: "4 | I loved the tense heist scenes. | 5")
    (result,) = write_feelings(llm, _jobs(1), rate=True, max_tokens=32, seed=0, combined=True, importance_levels=5)
    assert "how memorable" in llm.history[0]["prompt"]
    assert (result.rating, result.feeling, result.importance) == (4.0, "I loved the tense heist scenes.", 1.0)
    assert not result.importance_fallback
    for reply in ("4 | I loved the tense heist scenes.", "4 | I loved the tense heist scenes. | 9"):
        (result,) = write_feelings(
            ScriptedLLM(default=lambda prompt, r=reply: r), _jobs(1), rate=True, max_tokens=32, seed=0,
            combined=True, importance_levels=5,
        )  # fmt: skip
        assert (result.rating, result.feeling) == (4.0, "I loved the tense heist scenes.")
        assert result.importance is None and result.importance_fallback and not result.feeling_fallback
    (plain,) = write_feelings(llm, _jobs(1), rate=True, max_tokens=32, seed=0, combined=True)
    assert plain.importance is None and not plain.importance_fallback  # not asked: nothing to count


def test_an_agents_scored_feeling_is_stored_as_written() -> None:
    from tests._agent_fixtures import make_config, taste_llm
    from tests._memory_fixtures import memory_llm
    from tests.test_agent import run_session

    llm = taste_llm()
    llm._rules = [*memory_llm(rules=[(r"how memorable", "4 | I loved every minute of it. | 5")])._rules, *llm._rules]
    config = make_config(
        {"user": {"watch_threshold": -20.0, "combined_replies": "on", "decision_strategy": "few_shot"}}
    )
    model = LLMUserModel(tiny_dataset(), config.user, llm, HashingEmbedder(32), social=config.social)
    run_session(model, 0, seed=0, pages=2)
    model.end_sessions([0])
    asked = len(llm.history)
    model.write_ended()
    late = [h["prompt"] for h in llm.history[asked:]]
    assert any("how memorable" in p for p in late)
    assert not any("felt" in p and p.rstrip().endswith("Sentence:") for p in late)  # no compression of the note
    feelings = [r for r in model.memory(0).records() if r.kind == "feeling"]
    assert feelings and all("I loved every minute of it." in r.content and r.importance == 1.0 for r in feelings)
    counts = model.counters(0)["counts"]["feeling_importance"]
    assert counts["asked"] == len(feelings) and counts["fallback"] == 0
