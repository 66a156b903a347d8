"""The on-disk text-vector store (``llm/vector_store.py``) and the agents' item vectors read through it."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from recagent_gym.data.schema import Dataset
from recagent_gym.llm import vector_store
from recagent_gym.llm.shared_embedder import CachedEmbedder
from recagent_gym.llm.testing import HashingEmbedder
from recagent_gym.llm.vector_store import StoredEmbedder, VectorStore, store_for, store_identity, stored
from recagent_gym.users.agent.items import ItemVectors


class ModelLike(HashingEmbedder):
    """A hashing embedder that declares an identity, as a model embedder does (it counts the texts it embeds)."""

    store_identity = "model-like:16"

    def __init__(self) -> None:
        super().__init__(dim=16)


def _dataset(n: int = 12) -> Dataset:
    items = pd.DataFrame(
        {
            "item_id": range(n),
            "raw_id": [str(i) for i in range(n)],
            "title": [f"Film number {i} about {['war', 'love', 'space'][i % 3]}" for i in range(n)],
            "genres": [("Drama",)] * n,
            "year": [1999] * n,
            "description": [""] * n,
            "tags": [""] * n,
        }
    )
    empty = pd.DataFrame()
    return Dataset(name="tiny", items=items, users=empty, interactions=empty)


def test_a_later_run_reads_the_item_vectors_back_instead_of_embedding(tmp_path) -> None:
    dataset, first_model = _dataset(), ModelLike()
    first = ItemVectors(dataset, stored(first_model, tmp_path))
    expected = first.get([0, 3, 5]).copy()
    assert first_model.texts_seen == 3

    later_model = ModelLike()
    wrapped = stored(later_model, tmp_path)
    assert isinstance(wrapped, StoredEmbedder)
    again = ItemVectors(dataset, wrapped).get([5, 0, 3, 7])
    assert later_model.texts_seen == 1 and later_model.calls == 1  # only item 7 was new
    assert wrapped.store.hits == 3 and wrapped.store.added == 1
    np.testing.assert_array_equal(again[[1, 2, 0]], expected)
    np.testing.assert_array_equal(again[3], ModelLike()([dataset.item_text(7)])[0])


def test_only_embedders_that_declare_an_identity_are_stored(tmp_path) -> None:
    stand_in = HashingEmbedder(16)
    assert store_for(stand_in, tmp_path) is None and stored(stand_in, tmp_path) is stand_in
    wrapped = CachedEmbedder(ModelLike())
    assert store_identity(wrapped) == "model-like:16"
    store = store_for(wrapped, tmp_path)
    assert store is not None and store.folder == tmp_path / "model-like_16"


def test_an_unreadable_segment_is_reported_and_its_texts_embedded_again(tmp_path, caplog) -> None:
    dataset, model = _dataset(), ModelLike()
    ItemVectors(dataset, stored(model, tmp_path)).get([1, 2])
    folder = tmp_path / "model-like_16"
    (folder / "seg-999-1.npz").write_bytes(b"not an npz file")
    later = ModelLike()
    with caplog.at_level(logging.WARNING, logger="recagent_gym.llm.vector_store"):
        ItemVectors(dataset, stored(later, tmp_path)).get([1, 2, 4])
    assert "skipping unreadable text-vector segment" in caplog.text
    assert later.texts_seen == 1  # items 1 and 2 came from the readable segment


def test_many_segments_are_merged_into_one_without_losing_a_vector(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(vector_store, "MAX_SEGMENTS", 3)
    dataset, model = _dataset(), ModelLike()
    vectors = ItemVectors(dataset, stored(model, tmp_path))
    for item in range(6):  # one call, one segment each
        vectors.get([item])
    folder = tmp_path / "model-like_16"
    assert len(list(folder.glob("seg-*.npz"))) == 6
    merged = VectorStore(folder)
    assert len(merged) == 6
    assert len(list(folder.glob("seg-*.npz"))) == 1
    found = merged.lookup([dataset.item_text(i) for i in range(6)])
    np.testing.assert_array_equal(np.stack(found), vectors.get(list(range(6))))


def test_a_store_that_cannot_be_written_costs_recomputation_not_the_run(tmp_path, caplog) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the store's folder would go")
    dataset, model = _dataset(), ModelLike()
    vectors = ItemVectors(dataset, StoredEmbedder(model, VectorStore(blocker / "sub")))
    with caplog.at_level(logging.WARNING, logger="recagent_gym.llm.vector_store"):
        assert vectors.get([0, 1]).shape == (2, 16)
    assert "could not keep 2 text vectors" in caplog.text


def test_minilm_vectors_read_back_are_bitwise_the_recomputed_ones(tmp_path, sentence_embedder) -> None:
    """The claim that makes the store safe for reproducibility: a stored vector is what embedding gives again, even
    when it was embedded in a batch with other texts of other lengths."""
    dataset = _dataset()
    ItemVectors(dataset, stored(sentence_embedder, tmp_path)).get(list(range(dataset.n_items)))
    wrapped = stored(sentence_embedder, tmp_path)
    read_back = ItemVectors(dataset, wrapped).get([4, 9])
    assert wrapped.store.hits == 2 and wrapped.store.added == 0
    alone = np.stack([sentence_embedder([dataset.item_text(i)])[0] for i in (4, 9)])
    np.testing.assert_array_equal(read_back, alone)
    assert "torch" in store_identity(sentence_embedder)  # type: ignore[operator]


def test_catalogue_embeddings_without_a_cache_folder_go_through_the_store(tmp_path, monkeypatch) -> None:
    """``embed_items`` with no ``cache_dir`` (the evaluations' and the quickstart's default) reads the machine's
    store: a second run embeds nothing, and gets the same rows."""
    from recagent_gym.llm.embedder import embed_items

    monkeypatch.setenv("RECAGENT_GYM_CACHE", str(tmp_path))
    dataset = _dataset()
    first_model, later_model = ModelLike(), ModelLike()
    first = embed_items(dataset, first_model, progress=False)
    assert first_model.texts_seen == dataset.n_items
    again = embed_items(dataset, later_model, progress=False)
    assert later_model.texts_seen == 0
    np.testing.assert_array_equal(again, first)
    assert store_for(HashingEmbedder(16)) is None  # a stand-in is recomputed, never stored


def test_a_padded_minilm_is_not_stored(sentence_embedder) -> None:
    from recagent_gym.llm.embedder import SentenceEmbedder

    padded = object.__new__(SentenceEmbedder)
    padded.__dict__.update(sentence_embedder.__dict__, exact=False)
    assert store_identity(padded) is None
