"""Evaluation metrics on hand-computed cases, and the shared helpers (seeded draws, history swap, judge prompt)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from recagent_gym.data.schema import Dataset
from recagent_gym.llm.protocol import Choice
from recagent_gym.prompts import sequence_judge
from recagent_gym.runs.evaluation.subjects import child_rng, swap_histories
from recagent_gym.runs.metrics import (
    JUDGE_LABELS,
    DiscriminationHitRate,
    EmbeddingSimilarity,
    GenreDivergence,
    HeldOutHitRate,
    aggregate_judgements,
    genre_distribution,
    summarize,
    top_k,
)


def test_summarize_mean_stderr_and_normal_interval() -> None:
    est = summarize([1.0, 0.0, 0.0, 1.0])
    assert est.mean == 0.5 and est.n == 4
    assert est.stderr == pytest.approx(math.sqrt(1 / 3) / 2)
    assert est.low == pytest.approx(0.5 - 1.959964 * est.stderr, abs=1e-5)
    assert est.high == pytest.approx(0.5 + 1.959964 * est.stderr, abs=1e-5)


def test_summarize_bootstrap_interval_is_seeded_and_brackets_the_mean() -> None:
    values = [1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0]
    a = summarize(values, np.random.default_rng(3), bootstrap=500)
    b = summarize(values, np.random.default_rng(3), bootstrap=500)
    assert a == b
    assert 0.0 <= a.low <= a.mean <= a.high <= 1.0
    assert a.high - a.low > 0


def test_summarize_empty_and_single() -> None:
    empty = summarize([])
    assert empty.n == 0 and empty.format() == "–"
    single = summarize([0.25], np.random.default_rng(0))
    assert single.mean == 0.25 and math.isnan(single.stderr)


def test_estimate_format() -> None:
    assert summarize([1.0, 0.0]).format(2).startswith("0.50 ± 0.50 [")


def test_top_k_breaks_ties_at_random_not_by_position() -> None:
    firsts = {int(top_k(np.array([1.0, 1.0, 0.0]), 1, np.random.default_rng(s))[0]) for s in range(40)}
    assert firsts == {0, 1}
    assert set(top_k(np.array([0.1, 3.0, 2.0, -1.0]), 2, np.random.default_rng(0)).tolist()) == {1, 2}
    with pytest.raises(ValueError, match="NaN"):
        top_k(np.array([np.nan, 1.0]), 1, np.random.default_rng(0))


def test_discrimination_hit_rate_hand_computed() -> None:
    metric = DiscriminationHitRate()
    per_user = metric.per_user([[1], [2, 3, 4], [5, 6, 7]], [[1], [2, 9, 8], [7, 6, 0]])
    np.testing.assert_allclose(per_user, [1.0, 1 / 3, 2 / 3])
    assert metric.higher_is_better
    assert metric.random_expectation(3, 7) == pytest.approx(0.3)
    with pytest.raises(ValueError, match="empty held-out"):
        metric.per_user([[]], [[1]])
    with pytest.raises(ValueError, match="selections"):
        metric.per_user([[1]], [])


def test_held_out_hit_rate_counts_items_anywhere_in_the_sequence() -> None:
    np.testing.assert_allclose(HeldOutHitRate().per_user([[1, 2, 3, 4]], [[9, 4, 8, 1]]), [0.5])


def test_genre_distribution_splits_multi_genre_items() -> None:
    genres = np.array([[1, 1, 0], [0, 0, 1], [0, 0, 0]], dtype=np.float32)
    np.testing.assert_allclose(genre_distribution([0, 1], genres), [0.25, 0.25, 0.5])
    np.testing.assert_allclose(genre_distribution([2], genres), [0.0, 0.0, 0.0])


def test_genre_divergence_hand_computed() -> None:
    genres = np.array([[1, 0], [0, 1]], dtype=np.float32)
    metric = GenreDivergence(genres)
    assert not metric.higher_is_better
    assert metric([0], [0]) == pytest.approx(0.0)
    assert metric([0], [1]) == pytest.approx(1.0)
    # p = (1, 0), q = (.5, .5), m = (.75, .25): JS = (log2(4/3) + .5 log2(2/3) + .5 log2(2)) / 2
    expected = 0.5 * (math.log2(4 / 3) + 0.5 * math.log2(2 / 3) + 0.5)
    assert metric([0], [0, 1]) == pytest.approx(expected)
    no_genre = GenreDivergence(np.array([[0, 0], [1, 0]], dtype=np.float32))
    assert math.isnan(no_genre([0], [1]))


def test_embedding_similarity_is_the_mean_pairwise_cosine() -> None:
    vectors = np.array([[2.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    metric = EmbeddingSimilarity(vectors)
    assert metric([0], [1, 2]) == pytest.approx((0.0 + 1 / math.sqrt(2)) / 2)
    assert metric([2, 2], [2]) == pytest.approx(1.0)
    assert math.isnan(metric([], [1]))


def test_aggregate_judgements_mirrors_swapped_orders() -> None:
    # Shown labels A>>B, A>>B, A≈B, B>>A; the 2nd and 4th comparisons showed Y as "A".
    summary = aggregate_judgements([0, 0, 2, 4], [False, True, False, True], np.random.default_rng(0), bootstrap=50)
    assert summary.counts == (2, 0, 1, 0, 1)
    assert summary.shares == (0.5, 0.0, 0.25, 0.0, 0.25)
    assert summary.score.mean == pytest.approx((2 - 2 + 0 + 2) / 4)
    assert summary.position_bias == pytest.approx((2 + 2 + 0 - 2) / 4)
    with pytest.raises(ValueError, match="label indices"):
        aggregate_judgements([5], [False])
    with pytest.raises(ValueError, match="order flags"):
        aggregate_judgements([0, 1], [False])


def test_judge_prompt_contract() -> None:
    assert len(sequence_judge.OPTIONS) == len(JUDGE_LABELS)
    prompt = sequence_judge.build(history=["Heat (1995)"], sequence_a=["Up", "Big"], sequence_b=["Jaws"])
    assert "1. Heat (1995)" in prompt and "Sequence A:\n1. Up\n2. Big" in prompt and "next 2 movies" in prompt
    assert prompt.rstrip().endswith("Answer:")
    assert sequence_judge.parse(Choice(index=3, option=" B>A")) == 3
    assert sequence_judge.parse(Choice(index=7, option="?")) is None


def test_child_rng_depends_on_seed_and_keys_only() -> None:
    draw = child_rng(1, "negatives", 3, 7).random()
    assert draw == child_rng(1, "negatives", 3, 7).random()
    assert draw != child_rng(2, "negatives", 3, 7).random()
    assert draw != child_rng(1, "negatives", 1, 9).random()


def _tiny() -> Dataset:
    items = pd.DataFrame({"item_id": range(5), "raw_id": [str(i) for i in range(5)], "title": list("abcde"),
                          "genres": [("A",), ("B",), ("A",), ("B",), ("A", "B")], "year": [-1] * 5,
                          "description": [""] * 5, "tags": [""] * 5})  # fmt: skip
    users = pd.DataFrame({"user_id": range(3), "raw_id": ["u0", "u1", "u2"], "name": ["Ann", "Bob", "Cy"],
                          "gender": ["", "", ""], "age": [30, 40, 50], "traits": ["", "", ""],
                          "career": ["", "", ""], "interests": [("A",), ("B",), ("A", "B")],
                          "features": [(), (), ()], "activity": [0.1, 0.2, 0.3], "diversity": [0.0, 0.0, 1.0],
                          "conformity": [0.5, 0.5, 0.5]})  # fmt: skip
    inter = pd.DataFrame({"user_id": [0, 0, 1, 1, 1, 2], "item_id": [0, 2, 1, 3, 4, 4],
                          "rating": [5.0] * 6, "timestamp": [1, 2, 3, 4, 5, 6]})  # fmt: skip
    return Dataset("tiny", items, users, inter)


def test_swap_histories_moves_history_and_profile_but_hides_held_out_items() -> None:
    train = _tiny()
    swapped = swap_histories(train, {0: 1}, {0: [4]})
    history = swapped.user_history(0)["item_id"].tolist()
    assert history == [1, 3]  # user 1's history without user 0's held-out item 4
    assert swapped.users.at[0, "name"] == "Bob" and swapped.users.at[0, "interests"] == ("B",)
    assert swapped.users.at[0, "raw_id"] == "u0"
    assert swapped.user_history(1)["item_id"].tolist() == [1, 3, 4]  # the donor itself is untouched
    assert swapped.user_history(2)["item_id"].tolist() == [4]
    swapped.validate()
