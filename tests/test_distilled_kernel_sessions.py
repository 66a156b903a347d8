"""``users collect`` / ``users fidelity`` sessions are the session kernel's: its search, ``max_pages``, ending and
reward, one ``respond_batch`` per step across the batch's sessions (scripted users, tiny data)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

pytest.importorskip("pyarrow")

from recagent_gym.runs.distill import logs
from recagent_gym.runs.distill.collect import collect
from recagent_gym.runs.distill.pages import PageSources
from recagent_gym.runs.distill.sessions import plan_sessions, reward_function, run_sessions, session_kernel
from recagent_gym.users.protocol import Action, Context, Page, Response
from tests._agent_fixtures import make_config, make_model, tiny_dataset


class Scripted:
    """Searches on every recommended page, watches the first item of a results page on even steps and asks for
    the next on odd ones; counts its ``respond_batch`` calls and their sizes."""

    social = False

    def __init__(self) -> None:
        self.calls: list[int] = []
        self.ended: list[int] = []

    def start_session(self, user_id: int, rng: np.random.Generator) -> None:
        pass

    def respond_batch(self, requests: Sequence[tuple[Page, Context]], rngs: Sequence[Any]) -> list[Response]:
        self.calls.append(len(requests))
        out = []
        for page, context in requests:
            if page.source != "search":
                out.append(Response(Action.SEARCH, query="comedy drama"))
            elif context.step % 2 == 0:
                out.append(Response(Action.WATCH, item=page.items[0], rating=5.0))
            else:
                out.append(Response(Action.NEXT))
        return out

    def end_sessions(self, user_ids: Sequence[int]) -> None:
        self.ended += list(user_ids)

    def write_ended(self, *, at_least: int = 1) -> list[int]:
        return []


def _run(model: Any, max_pages: int, users: int = 4, config: Any = None) -> list[dict[str, Any]]:
    dataset = tiny_dataset()
    plans = plan_sessions(range(users), ["random"], users, seed=0)
    sources = PageSources(dataset, page_size=5)
    kernel = session_kernel(dataset, config, page_size=5, max_pages=max_pages)
    return run_sessions(model, plans, sources, kernel, reward_function(config), seed=0)


def test_a_search_is_answered_within_its_step_and_does_not_count_toward_max_pages():
    model = Scripted()
    rows = _run(model, max_pages=3)
    for user in range(4):
        mine = [r for r in rows if r["user_id"] == user]
        # 3 steps (max_pages), each the page's row and its results' row, with the step's page index
        assert [(r["page_index"], r["page_source"]) for r in mine] == [
            (k, source) for k in range(3) for source in ("recommender", "search")
        ]
        assert [r["action"] for r in mine] == ["search", "watch", "search", "next", "search", "watch"]
    # one respond_batch per step for the pages and one for the results, each across the 4 sessions
    assert model.calls == [4] * 6
    assert sorted(model.ended) == [0, 1, 2, 3]


def test_the_reward_is_the_envs_on_the_steps_outcome():
    rows = _run(Scripted(), max_pages=2)
    page_rows = [r for r in rows if r["page_source"] == "recommender"]
    # a watch found through search: EnvConfig.reward_search_watch (0 by default), on the step's first row
    assert all(r["reward"] == 0.0 for r in rows)
    config = make_config({"env": {"reward_search_watch": 0.5}})
    rows = _run(Scripted(), max_pages=2, config=config)
    page_rows = [r for r in rows if r["page_source"] == "recommender"]
    assert [r["reward"] for r in page_rows if r["page_index"] == 0] == [0.5] * 4
    assert all(r["reward"] == 0.0 for r in rows if r["page_source"] == "search")
    assert all(r["reward"] == 0.0 for r in page_rows if r["page_index"] == 1)  # the step's final answer was next


def test_collected_sessions_follow_the_kernels_rules(tmp_path):
    out = tmp_path / "logs"
    collect(make_model(), tiny_dataset(), out, sessions=12, batch=4, max_pages=4, progress=False)
    frame = logs.read_logs(out)
    for _, session in frame.groupby("session_id"):
        steps = session["page_index"].to_numpy()
        assert steps.max() <= 3  # max_pages counts steps, whatever the searches
        assert (np.diff(steps) >= 0).all()
        results = session[session["page_source"] == "search"]
        for step in results["page_index"]:  # a results page follows a search on the same step's page
            first = session[(session["page_index"] == step) & (session["page_source"] == "recommender")]
            assert list(first["action"]) == ["search"]
        last = session.iloc[-1]
        assert last["action"] == "leave" or last["page_index"] == 3
    assert frame.loc[frame["page_source"] == "search", "reward"].eq(0).all()
    watched = frame[(frame["action"] == "watch") & (frame["page_source"] == "recommender")]
    assert (watched["reward"] == 1.0).all()  # deferred ratings: no rating bonus, as in the env
