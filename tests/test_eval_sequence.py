"""Sequence generation end to end at tiny size: classical users, the scripted agent and judge, the embedded model."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from recagent_gym.data.schema import Dataset
from recagent_gym.data.splits import leave_last_out
from recagent_gym.llm.testing import ScriptedLLM
from recagent_gym.runs.evaluation.sequence import GROUND_TRUTH, MF_TOP, generate_sequence, run_sequence, sequence_kernel
from recagent_gym.users.recsim import RecSimUser
from tests._eval_fixtures import make_resources, movielens_dir, tiny_ml  # noqa: F401


def test_generated_sequences_follow_the_recommender_pages(tiny_ml: Dataset) -> None:  # noqa: F811
    split = leave_last_out(tiny_ml, 4, min_train=10)
    model = RecSimUser(split.train)
    seen = split.train.user_history(0)["item_id"].to_numpy()
    scores = np.random.default_rng(1).random(tiny_ml.n_items)
    seq, fallbacks = generate_sequence(model, 0, 4, scores, seen, 3, "score", np.random.default_rng(0))
    assert len(seq) == 4 == len(set(seq)) and fallbacks == 0
    assert not set(seq) & set(seen.tolist())
    allowed = np.argsort(-np.where(np.isin(np.arange(tiny_ml.n_items), seen), -np.inf, scores))[: 4 + 3]
    assert set(seq) <= set(allowed.tolist())  # only the top (page_size + steps) unseen items were ever shown
    top1, _ = generate_sequence(None, 0, 4, scores, seen, 3, "score", np.random.default_rng(0))
    assert top1 == allowed[:4].tolist()
    kernel = sequence_kernel(split.train, 3, 4)
    responded, fallbacks = generate_sequence(model, 0, 4, scores, seen, 3, "respond", np.random.default_rng(0), kernel)
    assert len(responded) == 4 and 0 <= fallbacks <= 4


def test_sequence_end_to_end_with_scripted_agent_and_judge(tiny_ml: Dataset) -> None:  # noqa: F811
    judge = ScriptedLLM(choice_rules=[("Which sequence", " A>>B")])
    resources = make_resources(tiny_ml, llm=judge, user_models=["recsim", "embedding", "llm"], users=4,
                               sequence_lengths=[3])  # fmt: skip
    result = run_sequence(resources, progress=False)
    users = result.users[3]
    assert len(users) == 4
    truth = leave_last_out(tiny_ml, 3, min_train=10).held_out
    for source, seqs in result.sequences[3].items():
        for u in users:
            assert len(seqs[u]) == 3
            if source == GROUND_TRUTH:
                assert seqs[u] == list(truth[u])
    rows = {r.source: r for r in result.objective}
    assert set(rows) == {GROUND_TRUTH, MF_TOP, "recsim", "embedding", "llm"}
    assert rows[GROUND_TRUTH].hit_rate.mean == 1.0
    assert rows[GROUND_TRUTH].similarity.mean >= rows["recsim"].similarity.mean
    # 3 models vs the ground truth, and 3 pairs of models
    assert [(j.first, j.second) for j in result.judge] == [
        ("recsim", GROUND_TRUTH), ("embedding", GROUND_TRUTH), ("llm", GROUND_TRUTH),
        ("recsim", "embedding"), ("recsim", "llm"), ("embedding", "llm"),
    ]  # fmt: skip
    for j in result.judge:
        # the judge always answers "A>>B": whichever sequence was shown first wins, mirrored back per order
        shown_second_first = sum(j.orders)
        assert j.summary.counts == (4 - shown_second_first, 0, 0, 0, shown_second_first)
        assert j.summary.position_bias == 2.0
    table = result.markdown()
    assert "A>>B" in table and "Ground truth" in table and "LLM agent (scripted:scripted)" in table
    assert {r["table"] for r in result.rows()} == {"objective", "judge"}
    again = run_sequence(resources, progress=False)
    assert again.sequences == result.sequences
    assert _timeless(again.rows()) == _timeless(result.rows())


def _timeless(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in row.items() if k != "seconds"} for row in rows]


def test_sequence_without_judge_and_with_respond(tiny_ml: Dataset) -> None:  # noqa: F811
    resources = make_resources(tiny_ml, user_models=["recsim"], users=3, sequence_lengths=[2, 4], judge=False,
                               sequence_choice="respond")  # fmt: skip
    result = run_sequence(resources, progress=False)
    assert not result.judge and sorted(result.sequences) == [2, 4]
    recsim = [r for r in result.objective if r.source == "recsim"]
    assert len(recsim) == 2 and all(0 <= r.fallbacks <= r.n * 3 for r in recsim)
    assert "LLM judge" not in result.markdown()


@pytest.mark.embedded_llm
@pytest.mark.slow
def test_embedded_llm_agent_and_judge_tiny(tiny_ml: Dataset, embedded_llm: Any) -> None:  # noqa: F811
    # The agents and the judge run on the embedded model; the agents' memory notes and feelings (most of the model's
    # work otherwise) are off: what is checked here is the sequences' and the verdicts' shape, not the memory.
    off = ["memory.implementation=none", "user.write_feelings=false"]
    resources = make_resources(tiny_ml, llm=embedded_llm, user_models=["llm"], users=2, sequence_lengths=[2],
                               judge_history=3, config_overrides=off)  # fmt: skip
    result = run_sequence(resources, progress=False)
    assert len(result.judge) == 1 and result.judge[0].summary.score.n == 2
    assert all(len(s) == 2 for s in result.sequences[2]["llm"].values())
