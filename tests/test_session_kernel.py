"""The session kernel's fast page step gives the same values as the plain numpy definitions it replaced."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from recagent_gym.runs.make_env import catalogue_env, catalogue_vector_env
from recagent_gym.session import RecommenderSession, SessionTables, observe
from recagent_gym.session.observation import ObservationBatch
from recagent_gym.users.protocol import Action, Context, Page, Response
from tests._env_fixtures import make_dataset


@pytest.fixture(scope="module")
def tables() -> SessionTables:
    return SessionTables.build(make_dataset(n_users=30, n_items=120, per_user=40))


def test_history_genres_are_bit_identical_to_the_numpy_window_mean(tables) -> None:
    rng = np.random.default_rng(0)
    for user in range(tables.n_users):
        session = RecommenderSession.start(user, np.random.default_rng(user), 0.0, tables, history_length=7)
        for item in rng.integers(0, tables.n_items, size=12).tolist():
            session.record_watch(item, tables)
            count = int(np.count_nonzero(session.history >= 0))
            expected = (np.add.reduce(tables.topics[session.history[:count]], axis=0) * (1.0 / count)).astype(
                np.float32
            )
            assert session.history_genres.tobytes() == expected.tobytes()
            assert session.history[0] == item and session.seen[item]


def test_replacement_is_the_most_popular_item_neither_watched_nor_on_the_page(tables) -> None:
    order = tables.popularity_order.tolist()
    for user in range(tables.n_users):
        session = RecommenderSession.start(user, np.random.default_rng(0), 0.0, tables, history_length=5)
        assert session.pop_pointer == 0  # the scan's state moves only when a replacement is made (checkpoints)
        page = [order[0], order[0], order[1], order[2], order[3]]
        items, duplicates, watched = session.apply_duplicate_rule(list(page), "replace", tables)
        taken: set[int] = set()
        counts = [0, 0]
        for slot, item in enumerate(page):
            if item in taken or session.seen[item]:
                counts[0 if item in taken else 1] += 1
                item = next(i for i in order if not session.seen[i] and i not in taken)
            taken.add(item)
            assert items[slot] == item
        assert [duplicates, watched] == counts


def test_seen_mask_is_a_view_of_the_flags_the_step_reads(tables) -> None:
    session = RecommenderSession.start(3, np.random.default_rng(0), 0.0, tables, history_length=5)
    item = int(np.flatnonzero(~session.seen)[0])
    session.record_watch(item, tables)
    assert session.seen[item]
    state = session.get_state()
    restored = RecommenderSession.from_state(state, tables)
    assert restored.get_state() == state
    assert restored.history_genres.tobytes() == session.history_genres.tobytes()


def test_batched_vector_observations_equal_each_sessions_observation() -> None:
    dataset = make_dataset()
    venv = catalogue_vector_env(5, dataset, "recsim", page_size=4, max_pages=3)
    obs, _ = venv.reset(seed=1)
    rng = np.random.default_rng(0)
    finished = 0
    for _ in range(25):
        for i, lane in enumerate(venv.lanes):
            expected = observe(lane.session, venv.kernel.tables, venv.kernel.rules.max_pages)
            for key, value in expected.items():
                assert obs[key][i].tobytes() == value.tobytes(), key
        obs, _, terminated, truncated, infos = venv.step(rng.integers(0, dataset.n_items, size=(5, 4)))
        for i in np.flatnonzero(terminated | truncated):
            finished += 1
            final = infos["final_obs"][i]
            assert final["user_id"][0] == infos["final_info"][i]["user_id"]
            assert final["page"].dtype == np.float32 and final["page"].shape == (1,)
    assert finished > 0


def test_single_env_accepts_a_page_of_any_shape_with_page_size_ids() -> None:
    env = catalogue_env(make_dataset(), "recsim", page_size=4)
    env.reset(seed=0)
    env.step(np.arange(4).reshape(4, 1))
    env.step([5, 6, 7, 8])
    with pytest.raises(ValueError, match="must hold 4 item ids"):
        env.step(np.arange(5))
    with pytest.raises(ValueError, match="outside"):
        env.step(np.array([0, 1, 2, 10_000]))


def test_observation_batch_rewrites_a_row_only_for_a_new_session_or_a_watch(tables) -> None:
    batch = ObservationBatch(2, tables, history_length=4, max_pages=5)
    a = RecommenderSession.start(1, np.random.default_rng(0), 0.0, tables, history_length=4)
    b = RecommenderSession.start(2, np.random.default_rng(0), 0.0, tables, history_length=4)
    batch.update([a, b])
    a.record_watch(int(np.flatnonzero(~a.seen)[0]), tables)
    a.page_index, a.last_code = 1, 1
    batch.update([a, b])
    for i, s in enumerate((a, b)):
        row = batch.row(i)
        for key, value in observe(s, tables, 5).items():
            assert row[key].tobytes() == value.tobytes(), key


def test_protocol_records_stay_frozen_validated_dataclasses() -> None:
    response = Response(Action.WATCH, item=3, rating=4.0)
    assert dataclasses.replace(response, rating=2.0).rating == 2.0
    assert response == Response(Action.WATCH, item=3, rating=4.0) and response.extra == {}
    assert Response(Action.NEXT).extra is not Response(Action.NEXT).extra
    with pytest.raises(dataclasses.FrozenInstanceError):
        response.item = 4  # type: ignore[misc]
    with pytest.raises(ValueError, match="WATCH response needs an item"):
        Response(Action.WATCH)
    with pytest.raises(ValueError, match="SEARCH response needs a query"):
        Response(Action.SEARCH)
    assert hash(Page((1, 2), index=1)) == hash(Page((1, 2), index=1))
    assert Context(user_id=1, watched=(2,)) == Context(1, 0, 0.0, (2,))
