"""The social study: entropy and conformity metrics on hand-computed cases, and the study end to end (scripted)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from recagent_gym.runs.evaluation.social_study import (
    conformity,
    entropy_by_round,
    genre_entropy,
    run_social_study,
)
from tests._sim_fixtures import make_config, make_embedder, make_llm

# items: 0 = [A], 1 = [B], 2 = [A, B], 3 = no genre
GENRES = np.array([[1, 0], [0, 1], [1, 1], [0, 0]], dtype=np.float32)


def test_genre_entropy_hand_computed() -> None:
    assert genre_entropy([0], GENRES) == 0.0
    assert genre_entropy([0, 1], GENRES) == pytest.approx(1.0)
    assert genre_entropy([2], GENRES) == pytest.approx(1.0)  # one item, two genres sharing it
    # shares A = 1 + 0.5, B = 0.5 -> p = (0.75, 0.25)
    expected = -(0.75 * math.log2(0.75) + 0.25 * math.log2(0.25))
    assert genre_entropy([0, 2], GENRES) == pytest.approx(expected)
    assert math.isnan(genre_entropy([], GENRES))
    assert math.isnan(genre_entropy([3], GENRES))


def test_entropy_by_round_windows_and_user_counts() -> None:
    watches = [
        {"user_id": 0, "item_id": 0, "round": 0},
        {"user_id": 0, "item_id": 1, "round": 1},
        {"user_id": 1, "item_id": 0, "round": 1},
        {"user_id": 1, "item_id": 0, "round": 1},
    ]
    means, users = entropy_by_round(watches, GENRES, rounds=3, window=1)
    assert means[0] == 0.0 and users[0] == 1
    assert means[1] == pytest.approx(0.0) and users[1] == 2  # user 0: [B] -> 0; user 1: [A, A] -> 0
    assert math.isnan(means[2]) and users[2] == 0
    means2, users2 = entropy_by_round(watches, GENRES, rounds=3, window=2)
    assert means2[1] == pytest.approx(0.5)  # user 0: [A, B] -> 1 bit; user 1 -> 0
    assert users2 == [1, 2, 2]


def test_conformity_hand_computed() -> None:
    friends = {0: [1], 1: [0, 2], 2: [1]}
    events = [
        {"kind": "watch", "agent": 1, "items": [5]},  # nothing heard yet, no friend touched 5
        {"kind": "chat", "agent": 0, "items": [7], "extra": {"with": 1}},  # 0 and 1 hear 7
        {"kind": "post", "agent": 2, "items": [9], "extra": {"recipients": [1]}},  # 1 hears 9
        {"kind": "watch", "agent": 0, "items": [5]},  # friend 1 watched 5 -> friend watch, not heard
        {"kind": "watch", "agent": 1, "items": [9]},  # heard 9; friend 2 posted 9 -> both
        {"kind": "watch", "agent": 2, "items": [7]},  # not heard by 2; friend 1 chatted about 7 -> friend watch
        {"kind": "watch", "agent": 0, "items": [8]},  # neither
    ]
    result = conformity(events, friends)
    assert result.watches == 5
    assert result.heard_watches == 1
    assert result.friend_watches == 3
    assert result.heard_items == 3
    assert result.heard_rate == pytest.approx(0.2)
    assert result.friend_rate == pytest.approx(0.6)
    assert math.isnan(conformity([], friends).heard_rate)


@pytest.mark.slow
def test_social_study_end_to_end_with_the_scripted_model(tmp_path: Path) -> None:
    config = make_config("simulation.activation=uniform", "simulation.active_prob=0.8", "recommender.model=mf")
    evaluation = config.evaluation.model_copy(update={"social_agents": 8, "social_rounds": 2, "social_random_k": 2})
    result = run_social_study(
        config, evaluation, out=tmp_path, progress=False, llm_factory=make_llm, embedder=make_embedder()
    )
    paths = result.write(tmp_path, config, evaluation)
    rows = {r["condition"]: r for r in result.rows()}
    assert list(rows) == ["MF", "Random", "MF + 2 random items", "MF, social off"]
    assert rows["MF, social off"]["chats"] == 0 and rows["MF, social off"]["posts"] == 0
    assert rows["MF, social off"]["heard_items"] == 0
    assert sum(r["chats"] + r["posts"] for r in rows.values()) > 0, "social conditions should socialise"
    for res in result.results:
        assert len(res.entropy) == 2 and all(e >= 0 for e in res.entropy if not math.isnan(e))
        assert res.watches > 0
    entropy = pd.read_csv(paths["entropy.csv"])
    assert len(entropy) == 4 * 2
    assert paths["plot.png"].stat().st_size > 1000
    assert "MF + 2 random items" in paths["table.md"].read_text()
    # the mitigation run really mixed random items into the pages
    run = next((tmp_path / "runs").glob("2_mf_k2_on"))
    pages = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    pages = [e for e in pages if e["kind"] == "page"]
    assert pages and all(len(e["extra"]["random_items"]) == 2 for e in pages)


@pytest.mark.slow
def test_social_command_runs_with_the_scripted_backend(tmp_path: Path) -> None:
    out = tmp_path / "social"
    cmd = [sys.executable, "-m", "tests._scripted_cli", "evaluate", "social", "--agents", "6", "--rounds", "2",
           "--out", str(out), "--no-progress", "--set", "evaluation.embedder=hashing",
           "--set", "simulation.activation=uniform", "--set", "recommender.mf_epochs=2"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "MF, social off" in done.stdout
    for name in ("table.md", "table.csv", "entropy.csv", "plot.png", "config.yaml"):
        assert (out / name).exists()
