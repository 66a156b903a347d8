from __future__ import annotations

import json

import pytest

from recagent_gym.llm.budget import BudgetedLLM
from recagent_gym.llm.cache import CachedLLM
from recagent_gym.llm.config import LLMConfig
from recagent_gym.llm.factory import build_llm
from recagent_gym.llm.protocol import BudgetExceeded, CacheMiss, LanguageModel
from recagent_gym.llm.recorder import RecordingLLM
from recagent_gym.llm.secrets import redact, register_secret
from recagent_gym.llm.testing import ScriptedLLM


def _scripted() -> ScriptedLLM:
    return ScriptedLLM(default=lambda p: f"echo {p}")


def _run(llm: LanguageModel) -> tuple[list[str], list[int]]:
    texts = [g.text for g in llm.generate(["a", "b", "a"], max_tokens=8, seed=1)]
    picks = [c.index for c in llm.choose(["p", "q"], [["x", "y"], ["u", "v", "w"]], seed=2)]
    return texts, picks


def test_second_identical_run_makes_no_backend_calls(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "cache.sqlite"
    backend = _scripted()
    cached = CachedLLM(backend, path)
    first = _run(cached)
    calls_after_first = backend.calls
    assert calls_after_first == 5  # every prompt asked once (the repeated "a" in the batch too)
    backend2 = _scripted()
    again = CachedLLM(backend2, path)  # a new process would open the same file
    assert _run(again) == first
    assert backend2.calls == 0
    out = again.generate(["a"], max_tokens=8, seed=1)
    assert out[0].usage.cached_calls == 1 and out[0].usage.latency_s == 0.0
    assert again.hits == 6 and again.misses == 0


def test_only_misses_reach_the_backend_and_order_is_kept(tmp_path) -> None:  # type: ignore[no-untyped-def]
    backend = _scripted()
    cached = CachedLLM(backend, tmp_path / "c.sqlite")
    cached.generate(["b"], max_tokens=8)
    out = cached.generate(["a", "b", "c"], max_tokens=8)
    assert [g.text for g in out] == ["echo a", "echo b", "echo c"]
    assert [h["prompt"] for h in backend.history] == ["b", "a", "c"]
    # a different parameter or seed is a different key
    cached.generate(["a"], max_tokens=9)
    cached.generate(["a"], max_tokens=8, seed=5)
    assert backend.calls == 5


def test_replay_raises_on_a_miss(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "c.sqlite"
    CachedLLM(_scripted(), path).generate(["known"])
    backend = _scripted()
    replay = CachedLLM(backend, path, mode="replay")
    assert replay.generate(["known"])[0].text == "echo known"
    with pytest.raises(CacheMiss, match="unknown"):
        replay.generate(["known", "unknown"])
    with pytest.raises(CacheMiss):
        replay.choose(["known"], [["a", "b"]])
    assert backend.calls == 0


def test_a_row_written_under_other_numerics_is_not_served(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The embedded model's scores change with its decoding (``EmbeddedLLM.numerics``): a cache keys rows by it,
    through any wrapper, and a model without ``numerics`` keeps the keys it always had."""
    path = tmp_path / "c.sqlite"

    def backend(numerics: str | None) -> ScriptedLLM:
        model = _scripted()
        if numerics is not None:
            model.numerics = numerics  # type: ignore[attr-defined]
        return model

    wrapped = BudgetedLLM(backend("canonical-block64-tail0"), max_calls=9)
    (written,) = CachedLLM(wrapped, path).choose(["p"], [["x", "y"]])
    same = backend("canonical-block64-tail0")
    assert CachedLLM(same, path, mode="replay").choose(["p"], [["x", "y"]])[0].option == written.option
    with pytest.raises(CacheMiss):
        CachedLLM(backend("canonical-block64-tail2"), path, mode="replay").choose(["p"], [["x", "y"]])
    CachedLLM(backend(None), path).generate(["plain"])
    assert CachedLLM(backend(None), path, mode="replay").generate(["plain"])[0].text == "echo plain"


def test_budget_refuses_before_sending() -> None:
    backend = _scripted()
    budget = BudgetedLLM(backend, max_calls=3)
    budget.generate(["a", "b"])
    with pytest.raises(BudgetExceeded, match="call budget"):
        budget.generate(["c", "d"])
    assert backend.calls == 2  # the refused batch never reached the backend
    budget.choose(["c"], [["x", "y"]])
    with pytest.raises(BudgetExceeded):
        budget.choose(["d"], [["x", "y"]])
    tokens = BudgetedLLM(_scripted(), max_total_tokens=5)
    tokens.generate(["one two three"])  # 3 prompt + 4 completion tokens: crosses the budget
    with pytest.raises(BudgetExceeded, match="token budget"):
        tokens.generate(["x"])
    state = tokens.get_state()
    assert state["tokens"] == 7


def test_recorder_writes_every_call_and_redacts_secrets(tmp_path) -> None:  # type: ignore[no-untyped-def]
    secret = "sk-test-0123456789abcdefSECRET"
    register_secret(secret)
    failing = ScriptedLLM(rules=[("boom", lambda p: (_ for _ in ()).throw(RuntimeError(f"bad key {secret}")))])
    rec = RecordingLLM(ScriptedLLM(default=f"my key is {secret}"), tmp_path / "log.jsonl")
    rec.generate([f"prompt with {secret}"])
    rec.choose(["p"], [["a", "b"]])
    bad = RecordingLLM(failing, tmp_path / "log.jsonl")
    with pytest.raises(RuntimeError):
        bad.generate(["boom"])
    text = (tmp_path / "log.jsonl").read_text()
    assert secret not in text
    lines = [json.loads(line) for line in text.splitlines()]
    assert [line["kind"] for line in lines] == ["generate", "choose", "generate"]
    assert lines[0]["responses"][0]["text"] == "my key is ***"
    assert "error" in lines[2] and "***" in lines[2]["error"]
    fake_key = "sk-" + "abcdefghijklmnopqrstuvwx"  # built at run time: no key-shaped string in the repository
    assert redact(f"token {fake_key} here") == "token *** here"


def test_factory_stacks_wrappers_and_meters_cost(tmp_path) -> None:  # type: ignore[no-untyped-def]
    cfg = LLMConfig(
        cache_path=str(tmp_path / "c.sqlite"),
        cache_mode="read_write",
        record_path=str(tmp_path / "r.jsonl"),
        max_calls=10,
        cost_per_1k_prompt=1.0,
        cost_per_1k_completion=2.0,
    )
    backend = _scripted()
    llm = build_llm(cfg, backend=backend)
    llm.generate(["one two"])  # 2 prompt + 3 completion tokens
    assert llm.total.calls == 1
    assert llm.total.cost_usd == pytest.approx(2 / 1000 * 1.0 + 3 / 1000 * 2.0)
    llm.generate(["one two"])  # cached: free, and no budget spent
    assert backend.calls == 1 and llm.total.cached_calls == 1
    assert llm.total.cost_usd == pytest.approx(0.008)
    assert len((tmp_path / "r.jsonl").read_text().splitlines()) == 2
    state = llm.get_state()
    assert state["inner"]["inner"]["inner"]["calls"] == 1  # recorder -> cache -> budget
    llm2 = build_llm(cfg, backend=_scripted())
    llm2.set_state(state)
    assert llm2.total == llm.total


def test_cache_mode_needs_a_path() -> None:
    from recagent_gym.llm.protocol import LLMError

    with pytest.raises(LLMError, match="cache_path"):
        build_llm(LLMConfig(cache_mode="replay"), backend=_scripted())


def test_prefix_hint_is_forwarded_by_each_wrapper_not_found_by_walking() -> None:
    """Issue 14: the prefix-cache hint is part of every wrapper's interface (each forwards it one level), so the
    agent states it to the model it holds; a model without prefix caching gets a no-op."""
    import contextlib

    from recagent_gym.llm.accounting import UsageMeter
    from recagent_gym.llm.budget import BudgetedLLM
    from recagent_gym.llm.protocol import PrefixCaching, prefix_hint
    from recagent_gym.llm.testing import ScriptedLLM

    seen: list[int] = []

    class Caching(ScriptedLLM):
        @contextlib.contextmanager
        def prefix_priority(self, priority: int):  # type: ignore[no-untyped-def]
            seen.append(priority)
            yield

    stack = UsageMeter(BudgetedLLM(Caching(), max_calls=10))
    assert isinstance(stack, PrefixCaching)
    with prefix_hint(stack, 3):
        pass
    assert seen == [3]

    class Opaque:  # a wrapper that does not forward the hint: nothing reaches through it
        def __init__(self, inner: object) -> None:
            self.inner = inner

    with prefix_hint(Opaque(Caching()), 5):
        pass
    assert seen == [3]
    with prefix_hint(UsageMeter(ScriptedLLM()), 1):  # a model without prefix caching: no-op
        pass
