"""Issue 54, caches that heal: a damaged or foreign entry of an on-disk cache is a miss (logged once, recomputed,
replaced atomically), never a traceback on every later run; caches live under the cache folder, never the working
directory; an unusable cache folder is one line (the model file needs it) or a logged run without the cache.

Covered: the text-vector store (``llm/vector_store.py``), the evaluation's item-embedding files
(``llm/embedding_files.py``), the LLM response cache (``llm/cache.py``) and the cache folder
(``llm/model_files.py``)."""

from __future__ import annotations

import json
import logging
import pickle
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from recagent_gym.llm import model_files
from recagent_gym.llm.cache import CachedLLM
from recagent_gym.llm.embedder import embed_texts_cached
from recagent_gym.llm.protocol import LLMError
from recagent_gym.llm.testing import HashingEmbedder, ScriptedLLM
from recagent_gym.llm.vector_store import VectorStore, store_for
from recagent_gym.runs.cli import main as cli_main

TEXTS = [f"Film number {i} about {['war', 'love', 'space'][i % 3]}" for i in range(8)]


class ModelLike(HashingEmbedder):
    """A hashing embedder that declares an identity, as a model embedder does (it counts the texts it embeds)."""

    store_identity = "model-like:16"

    def __init__(self) -> None:
        super().__init__(dim=16)


class OtherModel(ModelLike):
    """Another model of the same width: its vectors must never be served as ModelLike's."""

    store_identity = "other-model:16"

    def __call__(self, texts):  # type: ignore[no-untyped-def]
        return -super().__call__(texts)


def cut(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def empty(path: Path) -> None:
    path.write_bytes(b"")


def pickled(path: Path) -> None:
    path.write_bytes(pickle.dumps({"vectors": [1, 2, 3]}))


def object_array(path: Path) -> None:
    with path.open("wb") as handle:
        np.save(handle, np.array([{"a": 1}], dtype=object), allow_pickle=True)


def nan_vectors(path: Path) -> None:
    with np.load(path) as data:
        arrays = {k: data[k] for k in data.files}
    for name in ("vectors",):
        arrays[name] = np.full_like(arrays[name], np.nan)
    with path.open("wb") as handle:
        np.savez(handle, **arrays)


DAMAGE = {"cut": cut, "empty": empty, "pickled": pickled, "object array": object_array, "nan": nan_vectors}


# -- the text-vector store --------------------------------------------------------------------------------------


def fill_store(root: Path, model: ModelLike | None = None) -> Path:
    store = store_for(model or ModelLike(), root)
    assert store is not None
    store.add(TEXTS, (model or ModelLike())(TEXTS))
    (segment,) = store.folder.glob("seg-*.npz")
    return segment


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_text_vector_segment_is_logged_once_recomputed_and_replaced(tmp_path, caplog, damage):
    segment = fill_store(tmp_path)
    DAMAGE[damage](segment)
    with caplog.at_level(logging.WARNING, logger="recagent_gym.llm.vector_store"):
        store = store_for(ModelLike(), tmp_path)
        assert store is not None and store.lookup(TEXTS) == [None] * len(TEXTS)  # a miss, no exception
    assert caplog.text.count("text-vector segment") == 1 and not segment.exists()
    store.add(TEXTS, ModelLike()(TEXTS))  # recomputed, written as a new whole segment
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="recagent_gym.llm.vector_store"):
        again = store_for(ModelLike(), tmp_path)
        assert again is not None and all(v is not None for v in again.lookup(TEXTS))
    assert caplog.text == ""  # healed: the next run meets nothing


def test_a_foreign_segment_with_the_same_keys_is_never_served(tmp_path, caplog):
    """Vectors of another model of the same width, copied into this model's folder, used to be read silently."""
    foreign = fill_store(tmp_path, OtherModel())
    mine = store_for(ModelLike(), tmp_path)
    assert mine is not None
    mine.folder.mkdir(parents=True)
    foreign.rename(mine.folder / foreign.name)
    legacy = mine.folder / "seg-1-1.npz"  # a segment from before segments recorded their maker
    np.savez(legacy, keys=np.zeros((1, 16), np.uint8), vectors=np.zeros((1, 16), np.float32))
    with caplog.at_level(logging.WARNING, logger="recagent_gym.llm.vector_store"):
        assert mine.lookup(TEXTS) == [None] * len(TEXTS)
    assert caplog.text.count("foreign text-vector segment") == 2
    assert not list(mine.folder.glob("seg-*.npz"))


def test_an_unusable_cache_folder_runs_without_the_store_logged_once(tmp_path, monkeypatch, caplog):
    afile = tmp_path / "afile"
    afile.write_text("x")
    monkeypatch.setenv(model_files.CACHE_ENV, str(afile))
    monkeypatch.setattr(model_files, "_warned", set())
    with caplog.at_level(logging.WARNING, logger="recagent_gym.llm.model_files"):
        assert store_for(ModelLike()) is None and store_for(ModelLike()) is None
    assert caplog.text.count("running without the text vectors cache") == 1
    assert afile.read_text() == "x"


# -- the evaluation's item-embedding files ----------------------------------------------------------------------


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_embedding_file_is_a_logged_miss_and_is_replaced(tmp_path, caplog, damage):
    first = embed_texts_cached(TEXTS, ModelLike(), tmp_path, progress=False)
    (path,) = tmp_path.glob("*.npz")
    DAMAGE[damage](path)
    model = ModelLike()
    with caplog.at_level(logging.WARNING, logger="recagent_gym.llm.embedding_files"):
        again = embed_texts_cached(TEXTS, model, tmp_path, progress=False)
    np.testing.assert_array_equal(again, first)
    assert model.texts_seen == len(TEXTS) and caplog.text.count("ignoring cached embeddings") == 1
    later = ModelLike()
    np.testing.assert_array_equal(embed_texts_cached(TEXTS, later, tmp_path, progress=False), first)
    assert later.texts_seen == 0  # the replaced file is whole
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left


def test_an_embedding_file_made_by_another_model_is_not_served(tmp_path, caplog):
    embed_texts_cached(TEXTS, OtherModel(), tmp_path / "theirs", progress=False)
    embed_texts_cached(TEXTS, ModelLike(), tmp_path, progress=False)
    ((theirs,), (mine,)) = (list((tmp_path / "theirs").glob("*.npz")), list(tmp_path.glob("*.npz")))
    theirs.replace(mine)  # another model's vectors (same width, same texts) under my file's name
    with caplog.at_level(logging.WARNING, logger="recagent_gym.llm.embedding_files"):
        got = embed_texts_cached(TEXTS, ModelLike(), tmp_path, progress=False)
    np.testing.assert_array_equal(got, ModelLike()(TEXTS))
    assert "made by" in caplog.text


def test_a_relative_embedding_folder_lies_under_the_cache_folder(tmp_path, monkeypatch):
    """``agreement.yaml`` names ``embeddings``: the files used to land in whatever folder the command started in."""
    monkeypatch.setenv(model_files.CACHE_ENV, str(tmp_path / "cache"))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    embed_texts_cached(TEXTS, ModelLike(), "embeddings", progress=False)
    assert list(work.iterdir()) == []
    assert len(list((tmp_path / "cache" / "embeddings").glob("*.npz"))) == 1


# -- the cache folder -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["afile", "afile/below", "/proc/nope"])
def test_an_unusable_cache_folder_is_one_line(tmp_path, monkeypatch, capsys, where):
    (tmp_path / "afile").write_text("x")
    value = where if where.startswith("/") else str(tmp_path / where)
    monkeypatch.setenv(model_files.CACHE_ENV, value)
    assert cli_main(["llm", "check"]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith(f"recagent-gym: cache folder error: {model_files.CACHE_ENV}={value}: ")
        and "Traceback" not in err
    )
    assert len(err.splitlines()) == 1 and (tmp_path / "afile").read_text() == "x"


# -- the LLM response cache -------------------------------------------------------------------------------------


def answers(path: Path, mode: str = "read_write") -> tuple[CachedLLM, list[str]]:
    cache = CachedLLM(ScriptedLLM(default=lambda p: f"answer to {p}"), path, mode=mode)  # type: ignore[arg-type]
    texts = [g.text for g in cache.generate(["a", "b", "c"], max_tokens=8)]
    return cache, texts


def test_a_cut_response_cache_is_moved_aside_and_started_again(tmp_path, caplog):
    path = tmp_path / "cache.sqlite"
    first, expected = answers(path)
    first.close()
    with sqlite3.connect(path) as db:  # fold the WAL in, then cut the file in the middle of its pages
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    path.write_bytes(path.read_bytes()[:1500])
    with caplog.at_level(logging.WARNING, logger="recagent_gym.llm.cache"):
        cache, texts = answers(path)
    assert texts == expected and cache.misses + cache.hits == 3
    assert "moved to" in caplog.text and len(list(tmp_path.glob("cache.sqlite.damaged-*"))) >= 1


def test_damaged_and_foreign_rows_are_misses_replaced_by_fresh_answers(tmp_path, caplog):
    path = tmp_path / "cache.sqlite"
    first, expected = answers(path)
    first.close()
    with sqlite3.connect(path) as db:
        keys = [k for (k,) in db.execute("SELECT key FROM responses ORDER BY key")]
        db.execute("UPDATE responses SET response = '{not json' WHERE key = ?", (keys[0],))
        db.execute("UPDATE responses SET request = ? WHERE key = ?", (json.dumps({"prompt": "other"}), keys[1]))
    with caplog.at_level(logging.WARNING, logger="recagent_gym.llm.cache"):
        cache, texts = answers(path)
    assert texts == expected and cache.misses == 2 and cache.damaged == 2
    assert caplog.text.count("damaged or foreign entry") == 1  # logged once
    cache.close()
    healed, _ = answers(path)
    assert healed.hits == 3 and healed.misses == 0


def test_a_file_that_is_no_sqlite_file_is_refused_and_never_touched(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("my notes")
    for mode in ("read_write", "replay"):
        with pytest.raises(LLMError, match=r"not an SQLite|not a readable SQLite"):
            answers(path, mode)
    assert path.read_text() == "my notes" and [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_a_damaged_replay_cache_is_one_error(tmp_path):
    path = tmp_path / "cache.sqlite"
    first, _ = answers(path)
    first.close()
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    path.write_bytes(path.read_bytes()[:1500])
    with pytest.raises(LLMError):
        answers(path, "replay")
    assert not list(tmp_path.glob("*.damaged-*"))


def test_the_store_records_its_maker_in_each_segment(tmp_path):
    segment = fill_store(tmp_path)
    with np.load(segment) as data:
        assert str(data["made_by"]) == "model-like:16"
    assert VectorStore(segment.parent).lookup(TEXTS[:1])[0] is not None  # a store without identity checks nothing
