"""``users collect``: LLM decisions over diverse pages written to Parquet, resumable (scripted LLM, tiny data)."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("pyarrow")

from recagent_gym.runs.distill import logs
from recagent_gym.runs.distill.collect import collect
from recagent_gym.users.distilled.errors import DistillError
from tests._agent_fixtures import make_model, tiny_dataset
from tests._distilled_fixtures import tiny_policy


def test_collect_writes_every_decision_with_scores_and_resumes(tmp_path):
    out = tmp_path / "logs"
    rows = collect(make_model(), tiny_dataset(), out, sessions=8, batch=4, max_pages=4, progress=False)
    frame = logs.read_logs(out)
    assert len(frame) == rows > 8
    assert set(frame["session_id"]) == set(range(8))
    assert set(frame["source"]) == {"random", "popular", "mf", "genre"}
    assert set(frame["action"]) <= {"watch", "next", "search", "leave"}
    row = frame.iloc[0]
    assert len(row["shown"]) == len(row["items"]) == len(row["llm_scores"]) == len(row["embedding_scores"]) == 5
    assert sorted(row["shown"]) == sorted(row["items"])
    assert not math.isnan(row["patience_before"])
    watches = frame[frame["action"] == "watch"]
    assert len(watches) and (watches["position"] >= 0).all()
    assert watches["rating"].between(1, 5).all()  # deferred ratings filled in after the session
    # each session ends on leave or at max_pages
    last = frame.sort_values("page_index").groupby("session_id").tail(1)
    assert ((last["action"] == "leave") | (last["page_index"] == 3)).all()
    before = logs.logs_hash(out)
    assert collect(make_model(), tiny_dataset(), out, sessions=8, batch=4, max_pages=4, progress=False) == 0
    assert logs.logs_hash(out) == before  # nothing redone
    more = collect(make_model(), tiny_dataset(), out, sessions=10, batch=4, max_pages=4, progress=False)
    assert more > 0 and set(logs.read_logs(out)["session_id"]) == set(range(10))


def test_collect_refuses_other_settings_in_the_same_folder(tmp_path):
    collect(make_model(), tiny_dataset(), tmp_path, sessions=2, max_pages=2, progress=False)
    with pytest.raises(DistillError, match="other settings"):
        collect(make_model(), tiny_dataset(), tmp_path, sessions=2, max_pages=3, progress=False)


def test_collect_records_the_users_and_refuses_other_users(tmp_path):
    collect(make_model(), tiny_dataset(), tmp_path, sessions=2, max_pages=2, users="yes_no item score", progress=False)
    assert logs.read_meta(tmp_path)["users"] == "yes_no item score"
    with pytest.raises(DistillError, match="users"):  # decisions of other agents are not mixed into the same logs
        collect(make_model(), tiny_dataset(), tmp_path, sessions=3, max_pages=2, users="continuation", progress=False)


def test_resuming_logs_that_record_no_users_warns(tmp_path, caplog):
    collect(make_model(), tiny_dataset(), tmp_path, sessions=2, max_pages=2, progress=False)  # as older versions
    with caplog.at_level("WARNING", logger="recagent_gym.runs.distill.collect"):
        collect(make_model(), tiny_dataset(), tmp_path, sessions=3, max_pages=2, users="continuation", progress=False)
    assert "before collect.json recorded how the users score items" in caplog.text


def test_collect_rejects_unknown_source(tmp_path):
    with pytest.raises(DistillError, match="unknown page source"):
        collect(make_model(), tiny_dataset(), tmp_path, sessions=2, sources=["nope"], progress=False)


@pytest.mark.parametrize("bad", [{"sessions": 0}, {"batch": 0}, {"max_pages": 0}])
def test_collect_rejects_counts_below_one_before_writing(tmp_path, bad):
    with pytest.raises(DistillError, match="must be >= 1"):
        collect(make_model(), tiny_dataset(), tmp_path, **{"sessions": 2, **bad}, progress=False)
    assert not any(tmp_path.iterdir())


def test_collect_logs_the_pages_a_trained_policy_chooses(tmp_path):
    """The ``policy`` source: the LLM users' decisions on the pages a RecAgent-v1 policy picks among its candidates,
    logged as the other sources' rows."""
    from tests._agent_fixtures import make_config

    # sessions' writes deferred in batches (as the quickstart does): each policy session still gets its ratings
    deferred = {"user": {"session_end_batch": 8}}
    config = make_config(deferred)
    policy = tiny_policy(tmp_path, config)
    out = tmp_path / "logs"
    model = make_model(overrides=deferred)
    rows = collect(model, tiny_dataset(), out, sessions=6, sources=["random", "policy"], batch=3,
                   max_pages=3, config=config, policy=policy, progress=False)  # fmt: skip
    frame = logs.read_logs(out)
    assert len(frame) == rows and set(frame["session_id"]) == set(range(6))
    mine = frame[frame["source"] == "policy"]
    assert mine["session_id"].nunique() == 3 and (mine["page_index"].groupby(mine["session_id"]).min() == 0).all()
    assert mine["page_index"].max() <= 2  # max_pages reaches the env
    for _, row in mine.iterrows():
        assert row["action"] in {"watch", "next", "search", "leave"}
        if row["page_source"] == "recommender":  # a search's results page may hold fewer items
            assert len(row["items"]) == 5 and len(set(row["items"])) == 5 and len(row["llm_scores"]) == 5
        else:
            assert 1 <= len(row["items"]) == len(set(row["items"])) == len(row["llm_scores"]) <= 5
    watches = mine[mine["action"] == "watch"]
    assert len(watches) and watches["rating"].between(1, 5).all()  # deferred ratings reach the policy's rows too
    # the env's retriever never offers an item the user watched: no page repeats an earlier watch of its session
    for _, session in mine.sort_values("page_index").groupby("session_id"):
        watched: set[int] = set()
        for _, row in session.iterrows():
            if row["page_source"] == "recommender":
                assert watched.isdisjoint(int(i) for i in row["items"])
            if row["item"] >= 0:
                watched.add(int(row["item"]))


def test_policy_source_and_policy_path_go_together(tmp_path):
    with pytest.raises(DistillError, match="go together"):
        collect(make_model(), tiny_dataset(), tmp_path / "a", sessions=2, sources=["policy"], progress=False)
    with pytest.raises(DistillError, match="no such file"):
        collect(make_model(), tiny_dataset(), tmp_path / "b", sessions=2, sources=["policy"],
                policy=tmp_path / "missing.zip", progress=False)  # fmt: skip
    assert not (tmp_path / "b").exists()  # nothing written
