"""``recagent-gym evaluate discrimination|sequence`` at tiny size, in process and once as a subprocess."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from recagent_gym.runs.cli import main
from tests._eval_fixtures import movielens_dir  # noqa: F401
from tests._scripted_cli import use_scripted_backend

FAST = ["--set", "evaluation.embedder=hashing", "--set", "evaluation.bootstrap_samples=50",
        "--set", "evaluation.min_interactions=14", "--no-progress"]  # fmt: skip


def test_discrimination_command_writes_table_plot_and_config(
    movielens_dir: Path,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "disc"
    code = main(["evaluate", "discrimination", "--dataset", str(movielens_dir), "--user-model", "recsim",
                 "--user-model", "embedding", "--users", "4", "--seed", "3", "--negatives", "popularity-matched",
                 "--out", str(out), *FAST])  # fmt: skip
    assert code == 0
    assert {p.name for p in out.iterdir()} == {"table.md", "table.csv", "plot.png", "config.yaml"}
    table = pd.read_csv(out / "table.csv")
    ours = table[~table["model"].str.contains("paper")]
    assert set(ours["model"]) == {"Random (expectation)", "Popularity", "RecSim (fitted)", "Embedding (fitted)"}
    assert set(ours["sampler"]) == {"popularity-matched"} and set(ours["users"]) == {4}
    assert ours["p"].between(0, 1).all()
    assert (out / "plot.png").read_bytes()[:4] == b"\x89PNG"
    saved = yaml.safe_load((out / "config.yaml").read_text(encoding="utf-8"))
    assert saved["evaluation"]["seed"] == 3 and saved["evaluation"]["user_models"] == ["recsim", "embedding"]
    assert saved["data"]["dataset"] == str(movielens_dir)
    assert "Negatives: popularity-matched" in capsys.readouterr().out


def test_sequence_command_without_judge(movielens_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    out = tmp_path / "seq"
    code = main(["evaluate", "sequence", "--dataset", str(movielens_dir), "--user-model", "recsim", "--users", "3",
                 "--lengths", "2,3", "--no-judge", "--out", str(out), *FAST])  # fmt: skip
    assert code == 0
    table = pd.read_csv(out / "table.csv")
    assert set(table["N"]) == {2, 3} and set(table["sequence"]) == {"Ground truth", "MF top-1", "RecSim (fitted)"}
    assert (out / "plot.png").stat().st_size > 0


def test_sequence_command_with_the_scripted_backend_as_agent_and_judge(
    movielens_dir: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    use_scripted_backend(monkeypatch)
    out = tmp_path / "seq-llm"
    code = main(["evaluate", "sequence", "--dataset", str(movielens_dir), "--user-model", "llm", "--user-model",
                 "recsim", "--users", "2", "--lengths", "2", "--out", str(out),
                 *FAST])  # fmt: skip
    assert code == 0
    table = pd.read_csv(out / "table.csv")
    judged = table[table["table"] == "judge"]
    assert len(judged) == 3 and set(judged["judge"]) == {"scripted:gemma-3-270m-q4_k_m"}
    assert judged[["A>>B", "A>B", "A≈B", "B>A", "B>>A"]].sum(axis=1).round(6).eq(1.0).all()
    assert "LLM usage: agent" in (out / "table.md").read_text(encoding="utf-8")


def test_bad_evaluation_override_is_a_configuration_error(
    movielens_dir: Path,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["evaluate", "discrimination", "--dataset", str(movielens_dir), "--out", str(tmp_path),
                 "--set", "evaluation.popularity_bandz=3"])  # fmt: skip
    assert code == 2
    assert "popularity_bandz" in capsys.readouterr().err


@pytest.mark.slow
def test_discrimination_command_in_a_subprocess(movielens_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    out = tmp_path / "sub"
    run = subprocess.run(
        [sys.executable, "-m", "recagent_gym.runs.cli", "evaluate", "discrimination", "--dataset", str(movielens_dir),
         "--user-model", "recsim", "--users", "3", "--negatives", "uniform", "--out", str(out), *FAST],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "RecAgent (paper)" in (out / "table.md").read_text(encoding="utf-8")
