from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from recagent_gym.data.schema import Dataset
from recagent_gym.llm.embedder import embed_items, embed_texts_cached
from recagent_gym.llm.testing import HashingEmbedder


def _dataset(titles: list[str]) -> Dataset:
    items = pd.DataFrame(
        {
            "item_id": range(len(titles)),
            "raw_id": [str(i) for i in range(len(titles))],
            "title": titles,
            "genres": [("Drama",)] * len(titles),
            "year": [1999] * len(titles),
            "description": [""] * len(titles),
            "tags": [""] * len(titles),
        }
    )
    empty = pd.DataFrame()
    return Dataset(name="tiny/set", items=items, users=empty, interactions=empty)


def test_hashing_embedder_unit_rows_and_word_overlap() -> None:
    emb = HashingEmbedder(dim=64)
    vectors = emb(["space war robots", "robots in space", "a quiet love story", "", "!!!"])
    assert vectors.shape == (5, 64) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    sims = vectors @ vectors.T
    assert sims[0, 1] > sims[0, 2]
    np.testing.assert_array_equal(emb(["space war robots"])[0], vectors[0])
    with pytest.raises(TypeError):
        emb("a single string")


def test_embed_items_uses_and_invalidates_the_cache(tmp_path) -> None:  # type: ignore[no-untyped-def]
    emb = HashingEmbedder(dim=16)
    data = _dataset(["Heat", "Alien", "Toy Story"])
    first = embed_items(data, emb, tmp_path, progress=False)
    assert first.shape == (3, 16) and emb.texts_seen == 3
    files = list(tmp_path.glob("items-tiny_set-*.npz"))
    assert len(files) == 1
    again = embed_items(data, emb, tmp_path, progress=False)
    assert emb.texts_seen == 3  # served from the .npz file
    np.testing.assert_array_equal(first, again)
    changed = embed_items(_dataset(["Heat", "Alien", "Toy Story 2"]), emb, tmp_path, progress=False)
    assert emb.texts_seen == 6  # a changed catalogue gets a new key
    assert not np.array_equal(changed[2], first[2])
    np.testing.assert_array_equal(embed_texts_cached([], emb, tmp_path, progress=False).shape, (0, 16))


def test_corrupt_cache_file_is_recomputed(tmp_path) -> None:  # type: ignore[no-untyped-def]
    emb = HashingEmbedder(dim=16)
    data = _dataset(["Heat", "Alien"])
    embed_items(data, emb, tmp_path, progress=False)
    (path,) = tmp_path.glob("*.npz")
    with path.open("wb") as handle:  # a plain array, not a checked cache file
        np.save(handle, np.zeros((5, 2), dtype=np.float32))
    vectors = embed_items(data, emb, tmp_path, progress=False)
    assert vectors.shape == (2, 16) and emb.texts_seen == 4


@pytest.mark.slow
def test_sentence_embedder_is_normalised_and_semantic(sentence_embedder) -> None:  # type: ignore[no-untyped-def]
    vectors = sentence_embedder(["A film about a shark attacking swimmers", "Jaws: a great white shark", "Tax law"])
    assert vectors.shape == (3, sentence_embedder.dim) == (3, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.2
    assert sentence_embedder([]).shape == (0, 384)
