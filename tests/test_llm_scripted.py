from __future__ import annotations

import pytest

from recagent_gym.llm.protocol import LanguageModel, LLMError
from recagent_gym.llm.testing import ScriptedLLM


def test_rules_then_queue_then_default_and_counts() -> None:
    llm = ScriptedLLM(rules=[(r"importance", "7")], replies=["first", lambda p: p.upper()], default="dflt")
    assert isinstance(llm, LanguageModel)
    out = llm.generate(["rate importance", "a", "b", "c"])
    assert [g.text for g in out] == ["7", "first", "B", "dflt"]
    assert llm.calls == 4 and llm.batches == 1
    assert out[1].usage.prompt_tokens == 1 and out[0].usage.completion_tokens == 1


def test_stop_and_max_tokens_applied() -> None:
    llm = ScriptedLLM(default="one two three\nfour")
    (g,) = llm.generate(["x"], stop=["\n"])
    assert g.text == "one two three" and g.finish_reason == "stop"
    (g,) = llm.generate(["x"], max_tokens=2)
    assert g.text == "one two" and g.finish_reason == "length"


def test_no_reply_is_an_error_not_an_empty_string() -> None:
    with pytest.raises(LLMError):
        ScriptedLLM().generate(["anything"])


def test_choose_rules_queue_chooser_and_stable_default() -> None:
    llm = ScriptedLLM(choice_rules=[(r"Alien", " Yes")], choices=[1], chooser=lambda p, o: [0.0, 5.0, 1.0][: len(o)])
    out = llm.choose(["Alien?", "q", "r"], [[" Yes", " No"], ["a", "b"], ["a", "b", "c"]])
    assert [c.index for c in out] == [0, 1, 1]
    assert out[2].scores == (0.0, 5.0, 1.0)
    plain = ScriptedLLM()
    first = plain.choose(["p1", "p2"], [["a", "b", "c"]] * 2, seed=3)
    again = ScriptedLLM().choose(["p1", "p2"], [["a", "b", "c"]] * 2, seed=3)
    assert [c.index for c in first] == [c.index for c in again]
    assert first[0].scores is not None and len(first[0].scores) == 3
    with pytest.raises(LLMError):
        ScriptedLLM(choices=["zzz"]).choose(["p"], [["a", "b"]])


def test_state_round_trip() -> None:
    llm = ScriptedLLM(replies=["a", "b", "c"])
    llm.generate(["x"])
    state = llm.get_state()
    llm.generate(["y", "z"])
    llm.set_state(state)
    assert [g.text for g in llm.generate(["y", "z"])] == ["b", "c"]
