"""Friendship graph: symmetry, degree, determinism, state round-trip, CSV loading."""

from __future__ import annotations

import numpy as np
import pytest

from recagent_gym.data.load import load_dataset
from recagent_gym.data.schema import DataError
from recagent_gym.social.graph import SocialGraph, generate_graph, load_graph
from tests import _data_fixtures as fx


@pytest.fixture(scope="module")
def bundled():
    return load_dataset("bundled")


def _assert_symmetric(graph: SocialGraph) -> None:
    for u in range(graph.n_users):
        for v in graph.friends(u):
            assert u in graph.friends(v) and v != u


@pytest.mark.slow
@pytest.mark.parametrize("method", ["similarity", "random"])
def test_generated_graph_is_symmetric_with_the_asked_degree(bundled, method):
    graph = generate_graph(bundled, method, mean_friends=6, random_k=0, rng=np.random.default_rng(0))
    _assert_symmetric(graph)
    assert abs(graph.degrees().mean() - 6) < 1.5
    again = generate_graph(bundled, method, mean_friends=6, random_k=0, rng=np.random.default_rng(0))
    assert again.to_frame().equals(graph.to_frame())


def test_similarity_links_similar_tastes(bundled):
    graph = generate_graph(bundled, "similarity", mean_friends=4, rng=np.random.default_rng(0))
    genre = bundled.genre_matrix()
    prefs = np.zeros((bundled.n_users, genre.shape[1]))
    np.add.at(prefs, bundled.interactions["user_id"].to_numpy(), genre[bundled.interactions["item_id"].to_numpy()])
    prefs /= np.linalg.norm(prefs, axis=1, keepdims=True)
    sims = prefs @ prefs.T
    linked = np.mean([sims[a, b] for a, b in graph.to_frame()[["user_1", "user_2"]].to_numpy()])
    rng = np.random.default_rng(1)
    pairs = rng.integers(0, bundled.n_users, size=(2000, 2))
    random_pairs = np.mean([sims[a, b] for a, b in pairs if a != b])
    assert linked > random_pairs


def test_random_k_adds_friends_to_everyone(bundled):
    graph = generate_graph(bundled, "random", mean_friends=0, random_k=2, rng=np.random.default_rng(3))
    _assert_symmetric(graph)
    assert graph.degrees().min() >= 2


def test_state_round_trip_and_frame(bundled):
    graph = generate_graph(bundled, mean_friends=3, rng=np.random.default_rng(5))
    graph.add(0, 1, "colleague")
    state = graph.get_state()
    restored = SocialGraph(0)
    restored.set_state(state)
    assert restored.get_state() == state
    assert restored.relationship(1, 0) == "colleague"
    frame = restored.to_frame()
    assert (frame["user_1"] < frame["user_2"]).all() and len(frame) == graph.n_links
    with pytest.raises(ValueError, match="own friend"):
        graph.add(2, 2)


def test_dataset_links_and_csv(tmp_path):
    ds = load_dataset(str(fx.recagent_csv(tmp_path / "ra")))
    graph = SocialGraph.from_dataset(ds)
    assert graph.friends(1) == (0, 2) and graph.relationship(2, 1) == "colleague"
    path = fx.write(tmp_path / "links.csv", "user_1,user_2,relationship\n0,2,sister\n2,0,sister\n1,0,\n")
    loaded = load_graph(path, ds)
    assert loaded.friends(0) == (1, 2) and loaded.relationship(0, 1) == "friend" and loaded.n_links == 2
    fx.write(path, "user_1,user_2\n0,9\n1,1\n")
    with pytest.raises(DataError, match=r"links.csv, line 2: column 'user_2': unknown user id"):
        load_graph(path, ds)
    assert load_graph(path, ds, on_bad_row="skip").n_links == 0
