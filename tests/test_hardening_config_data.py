"""Issue 28, hostile data and prior files: numbers in other scripts' digits (the UTF-8 formats; ML-1M and ML-100K
are latin-1, which has no other decimal digits), prior weights that are NaN, infinite or
missing, a ``window_days`` that is no number, and the prior with a remote backend."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from recagent_gym.data.load import load_dataset
from recagent_gym.data.schema import DataError
from recagent_gym.runs.cli import main
from recagent_gym.runs.config import ConfigError, load_config
from recagent_gym.users.agent.prior import load_weights
from tests import _data_fixtures as fx
from tests._agent_fixtures import make_model
from tests._sim_fixtures import main as sim_main
from tests._sim_fixtures import settings
from tests.test_cli_errors import one_error_line, sets
from tests.test_users_prior import _watched_items, _with_crowd, write_weights

# --- 6. numbers are ASCII ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("row", "column", "value"),
    [
        ("١٢,1,4.0,{t}", "userId", "١٢"),  # Arabic-Indic digits
        ("１,1,4.0,{t}", "userId", "１"),  # fullwidth digit
        ("1_0,1,4.0,{t}", "userId", "1_0"),  # Python's digit separator
        ("1,٥,4.0,{t}", "movieId", "٥"),
        ("1,2,٤.0,{t}", "rating", "٤.0"),
        ("1,2,4.0,٩٧٨٣٠٠٠٠٠", "timestamp", "٩٧٨٣٠٠٠٠٠"),
        ("²,1,4.0,{t}", "userId", "²"),  # was already refused
    ],
)
def test_numbers_in_other_scripts_digits_are_rejected(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, row: str, column: str, value: str
) -> None:
    folder = fx.ml_latest(tmp_path, extra_ratings=row.format(t=fx.T0 + 99) + "\n")
    line = one_error_line(capsys, "data", "info", str(folder))
    assert line.startswith("recagent-gym: data error: ") and "ratings.csv, line 14" in line
    assert f"column {column!r}" in line and value in line
    assert main(["data", "info", str(folder), "--on-bad-row", "skip", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["skipped_rows"] == 1


def test_other_formats_take_ascii_numbers_only(tmp_path: Path) -> None:
    folder = fx.recagent_csv(tmp_path / "csv")
    users = folder / "user_1000.csv"
    users.write_text(users.read_text().replace("Alice Smith,female,30", "Alice Smith,female,٣٠"), encoding="utf-8")
    with pytest.raises(DataError, match=r"user_1000\.csv, line 2: column 'age': '٣٠'"):
        load_dataset(folder)
    folder = fx.recagent_csv(tmp_path / "csv2")
    with (folder / "interactions.csv").open("a", encoding="utf-8") as file:
        file.write("1,0,٣,400\n")
    with pytest.raises(DataError, match=r"interactions\.csv, line 6: column 'rating': '٣' is not a number"):
        load_dataset(folder)


def test_a_year_in_other_digits_stays_in_the_title(tmp_path: Path) -> None:
    folder = fx.ml_latest(tmp_path, extra_movies="7,Film (١٩٩٥),Drama\n")
    items = load_dataset(folder, min_user_interactions=1).items
    row = items[items["raw_id"] == "7"].iloc[0]
    assert (row["title"], row["year"]) == ("Film (١٩٩٥)", -1)


def test_plain_numbers_still_load(tmp_path: Path) -> None:
    extra = f" 1 , 2 ,+4.5,{fx.T0 + 99}\n3,1,.5,{fx.T0 + 98}\n2,2,3e0,{fx.T0 + 97}\n"
    ds = load_dataset(fx.ml_latest(tmp_path, extra_ratings=extra))
    added = ds.interactions[ds.interactions["timestamp"].between(fx.T0 + 97, fx.T0 + 99)]
    assert len(ds.interactions) == 15 and sorted(added["rating"]) == [0.5, 3.0, 4.5]


# --- 7. prior weights -------------------------------------------------------------------------------------------


def _prior(tmp_path: Path, **fields: object) -> Path:
    doc = {"both": {"llm": 1.0, "popularity": 0.5}, "prior_only": {"popularity": 0.7}, "window_days": 30.0}
    doc.update(fields)
    path = tmp_path / "prior.json"
    path.write_text(json.dumps(doc), encoding="utf-8")  # json.dumps writes NaN and Infinity as such
    return path


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ({"both": {"llm": float("nan"), "popularity": 0.5}}, r"both\.llm is nan, not a finite number"),
        ({"both": {"llm": 1.0, "trend": float("inf")}}, r"both\.trend is inf"),
        ({"prior_only": {"popularity": float("-inf")}}, r"prior_only\.popularity is -inf"),
        ({"prior_only": {"popularity": "1"}}, r"prior_only\.popularity is '1'"),
        ({"prior_only": {"popularity": True}}, r"prior_only\.popularity is True"),
        ({"both": [1, 2]}, r"'both' must map weight names to numbers"),
        ({"window_days": "abc"}, r"window_days is 'abc'"),
        ({"window_days": float("nan")}, r"window_days is nan"),
        ({"window_days": 0}, r"window_days is 0"),
        ({"window_days": None}, r"window_days is None"),
    ],
)
def test_prior_weights_are_checked_whole_at_load(tmp_path: Path, fields: dict[str, object], why: str) -> None:
    path = _prior(tmp_path, **fields)
    for which in ("both", "prior_only"):  # the whole file, whichever fit is asked for
        with pytest.raises(DataError, match=why):
            load_weights(path, which=which)
    with pytest.raises(ConfigError, match=r"user\.prior_weights: prior weights .*" + why):
        load_config(None, [f"user.prior_weights={path}"])


def test_good_prior_weights_load(tmp_path: Path) -> None:
    weights = load_weights(_prior(tmp_path, window_days=7))
    assert weights.llm == 1.0 and weights.features["popularity"] == 0.5 and weights.meta["window_days"] == 7.0
    assert load_config(None, [f"user.prior_weights={tmp_path / 'prior.json'}"]).user.prior_weights


def test_a_bad_prior_fails_before_the_run_folder(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = _prior(tmp_path, window_days="abc")
    out = tmp_path / "run"
    code = sim_main(["simulate", "--out", str(out), *sets(*settings(f"user.prior_weights={path}"))])
    err = capsys.readouterr().err
    assert code == 2 and "window_days is 'abc'" in err and "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize("backend", ["embedded", "openai"])
def test_a_missing_prior_file_is_an_error_with_any_backend(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, backend: str
) -> None:
    remote = ["llm.model=m", "llm.base_url=http://127.0.0.1:9/v1", "llm.max_retries=0"] if backend == "openai" else []
    out = tmp_path / "run"
    missing = tmp_path / "nope.json"
    argv = ["simulate", "--out", str(out), *sets(f"llm.backend={backend}", *remote, f"user.prior_weights={missing}")]
    line = one_error_line(capsys, *argv)
    assert line.startswith("recagent-gym: configuration error: ") and f"{missing}: no such file" in line
    assert not out.exists()


def test_the_prior_applies_with_a_remote_backend(tmp_path: Path) -> None:
    """With ``llm.backend=openai`` the prior used to be ignored (the direct strategy has no scores to adjust): now
    ``auto`` picks the scoring strategy, and a popularity-only prior picks the most watched item every time."""
    from recagent_gym.users.agent import resolve_strategy

    assert resolve_strategy("auto", "openai", prior=True) == "few_shot"
    assert resolve_strategy("auto", "openai") == "direct"
    path = write_weights(tmp_path / "prior.json", {"llm": 0.0, "popularity": 5.0})
    overrides = {
        "llm": {"backend": "openai", "model": "m"},
        "user": {"watch_threshold": -20.0, "watch_temperature": 0.05, "prior_weights": str(path)},
    }
    model = make_model(overrides=overrides)
    assert model.strategy == "few_shot"
    model.dataset = _with_crowd(model.dataset)
    from recagent_gym.users.protocol import Page

    pages = [Page(items=(3, 4, 24, 27, 28), index=k) for k in range(6)]
    assert _watched_items(model, 0, pages) == [24] * len(pages)
    assert np.isfinite(model._pages.prior.weights.vector()).all()


def test_the_direct_strategy_cannot_take_a_prior(tmp_path: Path) -> None:
    path = _prior(tmp_path)
    with pytest.raises(ConfigError, match=r"decision_strategy=direct"):
        load_config(None, [f"user.prior_weights={path}", "user.decision_strategy=direct"])
