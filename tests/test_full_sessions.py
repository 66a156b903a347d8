"""``user.full_sessions``: no user model leaves before the session's pages run out (the agreement test's simulated
side), and leaving is unchanged when it is off."""

from __future__ import annotations

import numpy as np
import pytest

from recagent_gym.llm.testing import ScriptedLLM
from recagent_gym.prompts.page_decision import FIXED_ACTIONS
from recagent_gym.users.config import UserConfig
from recagent_gym.users.distilled.user import DistilledUser
from recagent_gym.users.embedding_user import EmbeddingUser
from recagent_gym.users.protocol import Action, Context, Page
from recagent_gym.users.recsim import RecSimUser
from tests._agent_fixtures import make_model, tiny_dataset
from tests._distilled_fixtures import tiny_distilled, tiny_logs
from tests._env_fixtures import make_dataset

PAGES = 12


def _actions(user, pages: list[Page], seed: int = 0, user_id: int = 0) -> list[Action]:
    """One session of ``pages``; stops at a leave."""
    rng = np.random.default_rng(seed)
    user.start_session(user_id, rng)
    actions = []
    for step, page in enumerate(pages):
        actions.append(user.respond(page, Context(user_id=user_id, step=step, time_h=float(step)), rng).action)
        if actions[-1] == Action.LEAVE:
            break
    return actions


def _pages(n_items: int = 30) -> list[Page]:
    return [Page(items=tuple((5 * k + j) % n_items for j in range(5)), index=k) for k in range(PAGES)]


@pytest.mark.parametrize("full", [False, True])
def test_llm_agents_patience_never_runs_out_under_full_sessions(full):
    # an unreachable watch threshold: every page is a miss, so patience (mean 1) ends the session at once
    user = {"watch_threshold": 20.0, "search_interest_probability": 0.0, "patience": 1.0, "full_sessions": full}
    actions = _actions(make_model(overrides={"user": user}), _pages())
    assert actions == [Action.NEXT] * PAGES if full else actions == [Action.LEAVE]


@pytest.mark.parametrize("full", [False, True])
def test_a_leave_the_llm_agent_chooses_is_a_miss_under_full_sessions(full):
    leave = len(FIXED_ACTIONS) - 1 + 5  # the option index of " leave" on a page of 5
    assert FIXED_ACTIONS[-1] == Action.LEAVE
    llm = ScriptedLLM(choices=[leave] * PAGES, default="x")
    user = {"decision_strategy": "direct", "patience": 100.0, "full_sessions": full}
    actions = _actions(make_model(llm, overrides={"user": user}), _pages())
    assert actions == [Action.NEXT] * PAGES if full else actions == [Action.LEAVE]


@pytest.mark.parametrize("full", [False, True])
def test_recsim_budget_and_patience_end_nothing_under_full_sessions(full):
    # no-click mass 0: every page is watched; the budget pays for 3 pages
    config = UserConfig(recsim_time_budget=3.0, recsim_page_minutes=1.0, recsim_watch_minutes=0.0,
                        recsim_no_click_mass=0.0, full_sessions=full)  # fmt: skip
    actions = _actions(RecSimUser(make_dataset(), config), [Page((1, 2))] * 6)
    assert actions == [Action.WATCH] * 6 if full else actions == [Action.WATCH] * 3 + [Action.LEAVE]
    # patience 1 with nothing worth a click: the first miss leaves, unless full sessions
    config = UserConfig(recsim_no_click_mass=1e9, recsim_search_prob=0.0, patience=1.0, full_sessions=full)
    actions = _actions(RecSimUser(make_dataset(), config), [Page((1, 2))] * 6)
    assert actions == [Action.NEXT] * 6 if full else actions == [Action.LEAVE]


@pytest.mark.parametrize("full", [False, True])
def test_embedding_users_patience_ends_nothing_under_full_sessions(full):
    # nothing worth a click (the no-click option has the highest similarity, at a sharp temperature)
    config = UserConfig(embedding_no_click_threshold=1.0, embedding_temperature=0.01, embedding_fitted=None,
                        recsim_search_prob=0.0, patience=1.0, full_sessions=full)  # fmt: skip
    actions = _actions(EmbeddingUser(make_dataset(), config), [Page((1, 2, 3))] * 6)
    assert actions == [Action.NEXT] * 6 if full else actions == [Action.LEAVE]


def test_distilled_users_saved_patience_never_runs_out_under_full_sessions(tmp_path):
    folder, _ = tiny_distilled(tmp_path / "model", tiny_logs(tmp_path / "logs"))
    pages = [Page(tuple(range(step % 5, 30, 6))[:5], step) for step in range(60)]
    left = [_actions(DistilledUser(tiny_dataset(), folder), pages, seed) for seed in range(5)]
    full = [_actions(DistilledUser(tiny_dataset(), folder, full_sessions=True), pages, seed) for seed in range(5)]
    assert all(a[-1] == Action.LEAVE and len(a) < len(pages) for a in left)  # the saved rule's patience ends them
    assert all(len(a) == len(pages) and Action.LEAVE not in a for a in full)
    for with_leaving, without in zip(left, full, strict=True):  # the same draws until the leave
        assert without[: len(with_leaving) - 1] == with_leaving[:-1]
