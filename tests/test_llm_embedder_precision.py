"""MiniLM's precision (``llm.embedder_precision``): bf16 keeps a text's vector independent of its batch, stays close
to fp32 without being it, and the text-vector store keeps precisions and instruction sets apart."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from recagent_gym.llm.config import LLMConfig
from recagent_gym.llm.embedder import PRECISIONS, cpu_capability, resolve_precision

TEXTS = [
    "Alice watched Heat and thought the ending was far too long, but the music stayed with her.",
    "Bob and Carol talked about comedies.",
    "Toy Story.",
    "She loved it.",
    "Dave posted that he wants to see a documentary about the sea this weekend.",
    "Eve searched for romantic movies from the nineties.",
    "Frank felt the plot twist of The Sixth Sense was earned.",
    "Grace told Heidi about a horror film with a slow start.",
]


@pytest.fixture(scope="module")
def bf16_embedder() -> Any:
    from recagent_gym.llm.embedder import SentenceEmbedder

    return SentenceEmbedder(n_threads=1, precision="bf16")


def test_auto_resolves_to_a_real_precision_and_bad_names_are_refused() -> None:
    assert resolve_precision("auto") in ("bf16", "fp32")
    assert resolve_precision("fp32") == "fp32" and resolve_precision("bf16") == "bf16"
    assert PRECISIONS == ("auto", "bf16", "fp32") and LLMConfig().embedder_precision == "auto"
    with pytest.raises(ValueError, match="precision must be one of"):
        resolve_precision("int8")
    assert cpu_capability() not in ("", "unknown")


def test_an_instruction_set_cap_changes_the_capability(monkeypatch: pytest.MonkeyPatch) -> None:
    plain = cpu_capability()
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    assert cpu_capability() == plain + "+ONEDNN_MAX_CPU_ISA=AVX2"


def test_bf16_vectors_do_not_depend_on_the_batch(bf16_embedder: Any) -> None:
    together = bf16_embedder(TEXTS)
    alone = np.stack([bf16_embedder([t])[0] for t in TEXTS])
    shuffled = bf16_embedder(TEXTS[::-1])[::-1]
    assert together.dtype == np.float32 and together.shape == (len(TEXTS), 384)
    assert np.array_equal(together, alone) and np.array_equal(together, shuffled)
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    with bf16_embedder._precision():  # the packed path is bitwise the grouped one in bf16 too
        assert np.array_equal(together, bf16_embedder._encode_by_length(TEXTS))


@pytest.mark.slow
def test_bf16_is_close_to_fp32_but_not_it(bf16_embedder: Any, sentence_embedder: Any) -> None:
    bf16, fp32 = bf16_embedder(TEXTS), sentence_embedder(TEXTS)
    cosines = (bf16 * fp32).sum(axis=1)
    assert cosines.min() > 0.999, cosines
    assert not np.array_equal(bf16, fp32), "bf16 runs in bfloat16 (autocast), not float32"
    # what memory does with them: the same nearest neighbour for every text
    assert np.array_equal(np.argsort(-(bf16 @ bf16.T), axis=1)[:, 1], np.argsort(-(fp32 @ fp32.T), axis=1)[:, 1])


def test_the_store_identity_names_precision_instruction_set_and_path(
    bf16_embedder: Any, sentence_embedder: Any
) -> None:
    from recagent_gym.llm.vector_store import store_for

    bf16_id, fp32_id = bf16_embedder.store_identity, sentence_embedder.store_identity
    capability = cpu_capability()
    assert "-bf16-" in bf16_id and "-fp32-" in fp32_id and bf16_id.replace("bf16", "fp32") == fp32_id
    assert f"-{capability}-" in bf16_id and f"-{capability}-" in fp32_id
    assert bf16_id.endswith("-packed" if bf16_embedder.packed else "-grouped")
    assert store_for(bf16_embedder).folder != store_for(sentence_embedder).folder  # type: ignore[union-attr]
    assert bf16_embedder.name != sentence_embedder.name, "cache keys keep the precisions apart"
    assert "precision='bf16'" in repr(bf16_embedder)


def test_the_simulator_builds_its_embedder_in_the_configured_precision(monkeypatch: pytest.MonkeyPatch) -> None:
    from recagent_gym.llm import embedder as embedder_module
    from recagent_gym.runs.config import load_config
    from recagent_gym.runs.simulator.world import build_llm_and_embedder
    from recagent_gym.users import factory

    made: list[str] = []

    class Stub:
        def __init__(self, *, precision: str = "fp32", **_: Any) -> None:
            made.append(precision)

        def __call__(self, texts: Any) -> np.ndarray:
            return np.ones((len(texts), 4), dtype=np.float32) / 2

    from recagent_gym.llm import embedder_process

    class ProcessStub(Stub):
        def __init__(self, *, precision: str = "fp32", **_: Any) -> None:
            made.append(f"{precision} in its own process")

    monkeypatch.setattr(embedder_module, "SentenceEmbedder", Stub)
    monkeypatch.setattr(embedder_process, "ProcessEmbedder", ProcessStub)
    config = load_config(None, ["llm.embedder_precision=fp32", "llm.embedder_process=false"])
    build_llm_and_embedder(config, llm=object())
    assert made == ["fp32"]
    build_llm_and_embedder(load_config(None, ["llm.embedder_precision=bf16"]), llm=object())
    assert made == ["fp32", "bf16 in its own process"]  # llm.embedder_process: true is the default
    del made[1:]
    monkeypatch.setattr(factory, "build_llm_agents", lambda dataset, user, llm, embedder, **_: embedder)
    built = factory.build_user_model(
        "llm", None, config.user, llm=object(), llm_config=LLMConfig(embedder_precision="bf16")
    )  # type: ignore[arg-type]
    assert isinstance(built, Stub) and made == ["fp32", "bf16"]
