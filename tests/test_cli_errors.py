"""First contact with the command line: --version and --help, shipped configs by name, and bad input of every kind
ending in one line on stderr and exit status 2 (never a traceback), with secrets masked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from recagent_gym.runs.cli import build_parser, main
from recagent_gym.runs.config import ConfigError, load_config
from recagent_gym.runs.config.named import config_names
from tests import _data_fixtures as fx
from tests._sim_fixtures import main as sim_main
from tests._sim_fixtures import settings

ROOT = Path(__file__).resolve().parent.parent
FAKE_KEY = "sk-" + "unittestsecret" * 3  # built at run time: no key-shaped string in the repository


def one_error_line(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run the command in process; it must exit 2 with exactly one ``recagent-gym:`` line and no traceback."""
    code = main(list(argv))
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("recagent-gym:")]
    assert len(lines) == 1, err
    return lines[0]


def run(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "recagent_gym", *argv], capture_output=True, text=True, cwd=cwd, env=env, timeout=300
    )


def sets(*pairs: str) -> list[str]:
    return [arg for pair in pairs for arg in ("--set", pair)]


# --- version, help, logging -------------------------------------------------------------------------------------


@pytest.mark.slow
def test_version_and_help_describe_the_tool(tmp_path: Path) -> None:
    from recagent_gym import __version__

    done = run("--version", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == f"recagent-gym {__version__}"
    text = build_parser().format_help()
    assert "Gymnasium environment" in text and "recommender is the RL" in text and "examples:" in text
    assert "registers itself here" not in text  # not the module's internal docstring


@pytest.mark.slow
def test_third_party_info_lines_only_with_verbose(tmp_path: Path) -> None:
    code = (
        "import logging, sys; from recagent_gym.runs.cli import configure_logging; "
        "configure_logging(verbose=sys.argv[1] == 'v'); "
        "logging.getLogger('httpx').info('THIRD-PARTY-INFO'); "
        "logging.getLogger('matplotlib.font_manager').info('FONT-INFO'); "
        "logging.getLogger('sentence_transformers').warning('THIRD-PARTY-WARNING'); "
        "logging.getLogger('recagent_gym.x').info('OWN-INFO'); logging.getLogger('recagent_gym.x').debug('OWN-DEBUG')"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    quiet = subprocess.run([sys.executable, "-c", code, "q"], capture_output=True, text=True, env=env, cwd=tmp_path)
    loud = subprocess.run([sys.executable, "-c", code, "v"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert "OWN-INFO" in quiet.stderr and "THIRD-PARTY-WARNING" in quiet.stderr
    assert not any(word in quiet.stderr for word in ("THIRD-PARTY-INFO", "FONT-INFO", "OWN-DEBUG"))
    assert all(word in loud.stderr for word in ("THIRD-PARTY-INFO", "FONT-INFO", "OWN-DEBUG"))


# --- shipped configurations ---------------------------------------------------------------------------------------


def test_named_configs_are_package_data_and_paths_still_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # not the checkout: names resolve inside the package
    assert {"quickstart", "simulate_small", "simulate_paper"} <= set(config_names())
    assert load_config("quickstart").train.algorithm == "ppo"
    own = tmp_path / "mine.yaml"
    own.write_text("simulation:\n  agents: 3\n", encoding="utf-8")
    assert load_config(own).simulation.agents == 3
    assert load_config("mine.yaml").simulation.agents == 3


@pytest.mark.parametrize(
    "argv",
    [
        ["train", "--config", "quikstart"],
        ["evaluate", "policies", "--config", "quikstart"],
        ["evaluate", "discrimination", "--config", "quikstart"],
        ["simulate", "--config", "quikstart"],
    ],
)
def test_a_misspelt_config_name_lists_the_names_and_suggests_the_nearest(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    line = one_error_line(capsys, *argv)
    assert "unknown configuration 'quikstart'" in line and "did you mean 'quickstart'?" in line
    assert all(name in line for name in config_names())


def test_a_missing_config_file_is_named(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    line = one_error_line(capsys, "train", "--config", str(tmp_path / "nope.yaml"))
    assert "configuration file not found" in line and "nope.yaml" in line


@pytest.mark.slow
def test_a_misspelt_config_from_a_subprocess_prints_one_line(tmp_path: Path) -> None:
    done = run("train", "--config", "quickstrt", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "Traceback" not in done.stderr, done.stderr
    assert "did you mean 'quickstart'?" in done.stderr


# --- data errors in every command -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["train", "--total-timesteps", "8", "--no-progress", "--output-dir"],
        ["simulate", "--out"],
        ["evaluate", "policies", "--recommenders", "random", "--episodes", "1", "--output-dir"],
        ["evaluate", "discrimination", "--user-model", "recsim", "--no-progress", "--out"],
    ],
)
def test_a_missing_dataset_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str]) -> None:
    line = one_error_line(capsys, *argv, str(tmp_path / "out"), "--set", "data.dataset=/nonexistent")
    assert line.startswith("recagent-gym: data error:") and "/nonexistent" in line


def test_ratings_off_the_scale_are_rejected_or_counted(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    folder = fx.ml_1m(tmp_path, extra_ratings=f"1::1::77::{fx.T0 + 9}\n2::2::-1::{fx.T0 + 9}\n")
    line = one_error_line(capsys, "data", "info", str(folder))
    assert "ratings.dat, line 6: column 'rating': 77 is outside 1..5" in line
    assert main(["data", "info", str(folder), "--on-bad-row", "skip", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["skipped_rows"] == 2 and summary["rating_min"] >= 1 and summary["rating_max"] <= 5


@pytest.mark.parametrize("stamp", ["99999999999999", "-5", "1" + "0" * 30])
def test_an_absurd_timestamp_is_rejected(capsys: pytest.CaptureFixture[str], tmp_path: Path, stamp: str) -> None:
    folder = fx.ml_latest(tmp_path, extra_ratings=f"1,2,4.0,{stamp}\n")
    line = one_error_line(capsys, "data", "info", str(folder))
    assert "ratings.csv, line 14: column 'timestamp'" in line and "outside" in line
    assert main(["data", "info", str(folder), "--on-bad-row", "skip", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["skipped_rows"] == 1 and summary["time_end"] < "2100"


def test_half_star_ratings_keep_their_scale(tmp_path: Path) -> None:
    from recagent_gym.data.load import load_dataset
    from recagent_gym.data.schema import DataError

    assert load_dataset(fx.ml_latest(tmp_path / "ok")).interactions["rating"].min() == 0.5
    folder = fx.ml_latest(tmp_path / "bad", extra_ratings=f"1,2,5.5,{fx.T0}\n")
    with pytest.raises(DataError, match=r"5\.5 is outside 0\.5\.\.5"):
        load_dataset(folder)


# --- configuration values -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pair", "expected"),
    [
        ("simulation.rounds=true", "simulation.rounds: Input should be a valid integer (got True)"),
        ("simulation.seed=-1", "simulation.seed: Input should be greater than or equal to 0"),
        ("social.enabled=1", "social.enabled: Input should be a valid boolean"),
        ("llm.temperature=true", "llm.temperature: Input should be a valid number"),
        ("llm.backend=scripted", "llm.backend: Input should be 'embedded' or 'openai'"),
        ("llm.backend=openai", "llm.backend is 'openai' but llm.model is not set"),
    ],
)
def test_config_values_are_checked_strictly(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, pair: str, expected: str
) -> None:
    line = one_error_line(capsys, "simulate", "--out", str(tmp_path / "o"), "--set", pair)
    assert line.startswith("recagent-gym: configuration error:") and expected in line
    assert not (tmp_path / "o").exists()


def test_yaml_floats_in_exponent_form() -> None:
    config = load_config(None, ["train.learning_rate=1e-4", "recommender.mf_weight_decay=2E-5"])
    assert config.train.learning_rate == pytest.approx(1e-4) and config.recommender.mf_weight_decay == 2e-5
    assert load_config(None, ["simulation.rounds=3"]).simulation.rounds == 3


def test_remote_backends_need_a_model_name() -> None:
    with pytest.raises(ConfigError, match=r"llm\.model is not set"):
        load_config(None, ["llm.backend=openai", "llm.base_url=http://127.0.0.1:9/v1"])
    assert load_config(None, ["llm.backend=openai", "llm.model=gpt-4o-mini"]).llm.model == "gpt-4o-mini"
    assert load_config(None).llm.model_name == "gemma-3-270m-q4_k_m"


@pytest.mark.parametrize(
    "pairs",
    [
        [f"llm.api_keys={FAKE_KEY}"],  # a string where a list is expected
        [f"llm.api_keys=[{FAKE_KEY}]", "llm.temperature=9"],  # the key is fine, another value is not
        [f"llm={{api_keys: [{FAKE_KEY}], temperature: 9}}"],  # the key inside a mapping value
        [f"llm.api_key={FAKE_KEY}"],  # a misspelt key name
        [f"evaluation.judge_llm={{api_keys: {FAKE_KEY}}}"],
        [f"llm.api_keys=[{FAKE_KEY}", "x"],  # not valid YAML, then not key=value
    ],
)
def test_config_errors_never_echo_secrets(capsys: pytest.CaptureFixture[str], pairs: list[str]) -> None:
    line = one_error_line(capsys, "llm", "check", *sets(*pairs))
    assert FAKE_KEY not in line and "unittestsecret" not in line
    assert "***" in line or "api_key" in line


# --- simulator runs -------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_resume_after_the_event_log_was_deleted(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert sim_main(["simulate", *sets(*settings("simulation.rounds=1")), "--out", str(out)]) == 0
    (out / "events.jsonl").unlink()
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    capsys.readouterr()
    code = sim_main(["simulate", "--resume", str(out), *sets("simulation.rounds=2")])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    (line,) = [line for line in err.splitlines() if line.startswith("recagent-gym:")]
    assert "checkpoint error" in line and "events.jsonl is missing" in line
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before  # nothing written


@pytest.mark.slow
def test_relative_cache_path_lands_in_the_run_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    out = tmp_path / "run"
    extra = ("simulation.rounds=1", "llm.cache_mode=read_write", "llm.cache_path=cache.sqlite")
    assert sim_main(["simulate", *sets(*settings(*extra)), "--out", str(out)]) == 0
    assert (out / "cache.sqlite").is_file() and not list(elsewhere.iterdir())
    saved = (out / "config.yaml").read_text(encoding="utf-8")
    assert f"cache_path: {out / 'cache.sqlite'}" in saved


def test_in_run_folder_places_relative_run_files_only(tmp_path: Path) -> None:
    config = load_config(
        None,
        [
            "llm.cache_path=c.sqlite",
            "llm.record_path=/abs/r.jsonl",
            "evaluation.judge_llm={cache_path: j.sqlite}",
        ],
    )
    placed = config.in_run_folder(tmp_path / "out")
    assert placed.llm.cache_path == str(tmp_path / "out" / "c.sqlite")
    assert placed.llm.record_path == "/abs/r.jsonl"
    assert placed.evaluation.judge_llm is not None
    assert placed.evaluation.judge_llm.cache_path == str(tmp_path / "out" / "j.sqlite")
    assert config.llm.cache_path == "c.sqlite"  # a copy


def test_verbose_adds_the_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-v", "train", "--config", "quikstart"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and "ConfigError" in err
    assert err.rstrip().splitlines()[-1].startswith("recagent-gym: configuration error: unknown configuration")


def test_train_and_evaluate_place_run_files_in_their_output_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from recagent_gym.runs.commands import evaluate_paper as paper_commands
    from recagent_gym.runs.policies import training

    seen: list[object] = []

    def fake_train(config: object, **_: object) -> object:
        seen.append(config)
        raise ConfigError("stop here")

    monkeypatch.setattr(training, "train_policy", fake_train)
    cache = ["--set", "llm.cache_path=c.sqlite", "--set", "llm.record_path=r.jsonl"]
    assert main(["train", "--output-dir", str(tmp_path / "t"), *cache]) == 2
    (config,) = seen
    assert config.llm.cache_path == str(tmp_path / "t" / "c.sqlite")  # type: ignore[attr-defined]
    assert config.llm.record_path == str(tmp_path / "t" / "r.jsonl")  # type: ignore[attr-defined]
    args = build_parser().parse_args(["evaluate", "sequence", "--out", str(tmp_path / "e"), *cache])
    config, _ = paper_commands.load_configs(args)
    assert config.llm.cache_path == str(tmp_path / "e" / "c.sqlite")
