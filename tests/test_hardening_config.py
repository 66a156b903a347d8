"""Issue 28, hostile configuration: deep and exploding YAML, bad base URLs, unusable output folders, a dataset too
small to split, an address that cannot be bound. Each ends in one line and exit status 2, before any work, with
nothing left on disk."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from recagent_gym.runs.config import ConfigError, load_config
from recagent_gym.runs.config.loader import read_yaml
from tests._sim_fixtures import main as sim_main
from tests._sim_fixtures import settings
from tests.test_cli_errors import one_error_line, sets

BOMB = "\n".join(
    [
        "x:",
        '  a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
        *(f"  {b}: &{b} [{','.join(['*' + a] * 9)}]" for a, b in zip("abcdefgh", "bcdefghi", strict=True)),
        "evaluation:",
        "  preference_ratios: *i",
    ]
)
"""Nine levels of nine aliases: 387 million strings from under 1 KB (the "billion laughs")."""


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def config_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    line = one_error_line(capsys, *argv)
    assert line.startswith("recagent-gym: configuration error: "), line
    return line


# --- 1. deep nesting -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "data: " + "[" * 5000 + "]" * 5000,
        "data:\n" + "".join("  " * (k + 1) + "k:\n" for k in range(3000)),
        "data: " + "{a: " * 3000 + "1" + "}" * 3000,
    ],
    ids=["flow-lists", "block-mappings", "flow-mappings"],
)
def test_a_deeply_nested_config_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str) -> None:
    path = write(tmp_path / "deep.yaml", text)
    line = config_error(capsys, "simulate", "--config", str(path), "--out", str(tmp_path / "run"))
    assert str(path) in line and "nested deeper than" in line
    assert not (tmp_path / "run").exists()


def test_a_deeply_nested_override_value_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    deep = "[" * 3000 + "]" * 3000
    line = config_error(capsys, "train", "--set", f"data.max_users={deep}", "--output-dir", str(tmp_path / "t"))
    assert "data.max_users" in line and "nested deeper than" in line
    long_key = ".".join(["data", *["x"] * 3000])
    line = config_error(capsys, "train", "--set", f"{long_key}=1", "--output-dir", str(tmp_path / "t"))
    assert "nested deeper than" in line
    assert not (tmp_path / "t").exists()


def test_moderate_nesting_and_aliases_still_load() -> None:
    assert read_yaml("a: " + "[" * 30 + "1" + "]" * 30)["a"] is not None
    doc = "base: &b {agents: 4, rounds: 2}\nsimulation:\n  <<: *b\n  seed: 3\n"
    assert read_yaml(doc)["simulation"] == {"agents": 4, "rounds": 2, "seed": 3}
    config = load_config(None, ["evaluation.preference_ratios=[1, 2]"])
    assert config.evaluation.preference_ratios == [1, 2]


# --- 2. alias bomb ---------------------------------------------------------------------------------------------


def test_an_alias_bomb_fails_fast(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write(tmp_path / "bomb.yaml", BOMB)
    assert path.stat().st_size < 1024
    started = time.perf_counter()
    line = config_error(capsys, "simulate", "--config", str(path), "--out", str(tmp_path / "run"))
    assert time.perf_counter() - started < 5
    assert str(path) in line and "aliases expand to more than" in line
    assert not (tmp_path / "run").exists()


def test_an_alias_bomb_in_an_override_and_a_recursive_alias(capsys: pytest.CaptureFixture[str]) -> None:
    value = "[" + ",".join(f"&a{k} [" + ",".join([f"*a{k - 1}"] * 9 if k else ["1"] * 9) + "]" for k in range(9)) + "]"
    started = time.perf_counter()
    line = config_error(capsys, "llm", "check", "--set", f"evaluation.preference_ratios={value}")
    assert time.perf_counter() - started < 5 and "aliases expand to more than" in line
    with pytest.raises(ConfigError, match="refers to itself"):
        load_config(None, ["evaluation.preference_ratios=&a [*a]"])


@pytest.mark.parametrize(
    "value",
    ["2001-02-30", "!!int x", "!!float abc", "9" * 5000, "!!timestamp 2001-13-01", "!!int", "!!timestamp", "!!bool x"],
)
def test_yaml_scalars_that_cannot_be_built_are_one_line(capsys: pytest.CaptureFixture[str], value: str) -> None:
    config_error(capsys, "llm", "check", "--set", f"llm.model={value}")


def test_nan_and_infinity_are_not_configuration_values() -> None:
    for value in (".nan", ".inf", "-.inf", "1e999"):
        with pytest.raises(ConfigError, match=r"simulation\.pareto_x_min: .*finite"):
            load_config(None, [f"simulation.pareto_x_min={value}"])
    with pytest.raises(ConfigError, match=r"llm\.timeout_s"):
        load_config(None, ["llm.timeout_s=.inf"])


# --- 3. base URLs ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("ftp://example.com/v1", "http:// or https://"),
        ("http:///v1", "no host"),
        ("https://", "no host"),
        ("127.0.0.1:8080/v1", "http:// or https://"),
        ("http://[::1/v1", "not a URL"),
        ("http://h:99999/v1", "port"),
        ("http://h:abc/v1", "port"),
        ("http://a b/v1", "space"),
    ],
)
def test_llm_check_refuses_a_bad_base_url(capsys: pytest.CaptureFixture[str], url: str, why: str) -> None:
    base = sets("llm.backend=openai", "llm.model=m", "llm.max_retries=0")
    line = config_error(capsys, "llm", "check", *base, "--set", f"llm.base_url={url}")
    assert "llm.base_url" in line and why in line
    line = config_error(capsys, "llm", "check", *base, "--set", f'llm.base_urls=["http://ok:1/v1", "{url}"]')
    assert "llm.base_urls" in line and why in line


def test_good_base_urls_are_kept() -> None:
    for url in ("http://127.0.0.1:8080/v1", "https://api.example.com/v1", "http://[::1]:8000/v1", "http://vllm"):
        assert load_config(None, [f"llm.base_url={url}"]).llm.base_url == url


# --- 4. output folders -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "where"),
    [
        (["simulate", "--out", "/etc/passwd"], "/etc/passwd"),
        (["simulate", "--out", "/etc/passwd/run"], "/etc/passwd"),
        (["train", "--output-dir", "/proc/nope"], "/proc/nope"),
        (["train", "--set", "train.output_dir=/proc/nope/deeper"], "/proc/nope/deeper"),
        (["evaluate", "policies", "--output-dir", "/proc/nope"], "/proc/nope"),
        (["evaluate", "policies", "--set", "train.output_dir=/proc/nope"], "/proc/nope/evaluation"),
        (["serve", "--out", "/etc/passwd"], "/etc/passwd"),
    ],
)
def test_an_unusable_output_folder_is_refused_before_any_work(
    capsys: pytest.CaptureFixture[str], argv: list[str], where: str
) -> None:
    started = time.perf_counter()
    line = config_error(capsys, *argv)
    assert where in line and "output folder" in line
    assert time.perf_counter() - started < 10  # before loading data or models
    assert not Path("/proc/nope").exists()


def test_an_output_folder_under_a_file_is_refused_and_nothing_is_created(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    blocker = write(tmp_path / "file", "user data\n")
    config_error(capsys, "train", "--output-dir", str(blocker / "a" / "b"))
    config_error(capsys, "simulate", "--out", str(blocker))
    assert blocker.read_text() == "user data\n" and sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_a_writable_output_folder_passes_and_leaves_no_probe(tmp_path: Path) -> None:
    from recagent_gym.runs.output_folder import check_output_folder

    assert check_output_folder(tmp_path / "a" / "b", "--out") == tmp_path / "a" / "b"
    assert list(tmp_path.iterdir()) == []  # checked, not created
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "x").write_text("1")
    check_output_folder(tmp_path / "kept", "--out")
    assert [p.name for p in (tmp_path / "kept").iterdir()] == ["x"]


# --- 5. a dataset too small to split ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["train", "--total-timesteps", "8", "--no-progress", "--output-dir"],
        ["evaluate", "policies", "--recommenders", "random", "--output-dir"],
    ],
)
@pytest.mark.slow
def test_one_user_cannot_be_split_into_train_and_held_out(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str]
) -> None:
    line = config_error(capsys, *argv, str(tmp_path / "out"), "--set", "data.max_users=1")
    assert "at least 2 users" in line and "data.max_users" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_one_user_still_simulates(tmp_path: Path) -> None:
    out = tmp_path / "run"
    argv = ["simulate", "--out", str(out), *sets(*settings("data.max_users=1", "simulation.agents=1"))]
    assert sim_main(argv) == 0
    assert (out / "events.jsonl").exists()


# --- 8. serve's address -----------------------------------------------------------------------------------------


def _busy_port() -> tuple[socket.socket, int]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    return sock, sock.getsockname()[1]


@pytest.mark.parametrize("host", ["256.1.1.1", "1.2.3", "not a host", "::zz", "203.0.113.9"])
def test_serve_refuses_an_address_it_cannot_bind(capsys: pytest.CaptureFixture[str], tmp_path: Path, host: str) -> None:
    out = tmp_path / "dash"
    line = config_error(capsys, "serve", "--host", host, "--port", "8765", "--out", str(out))
    assert "--host" in line and host in line
    assert not out.exists()


def test_serve_refuses_a_port_in_use(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    sock, port = _busy_port()
    try:
        line = config_error(capsys, "serve", "--port", str(port), "--out", str(tmp_path / "dash"))
    finally:
        sock.close()
    assert str(port) in line and "in use" in line
    assert not (tmp_path / "dash").exists()
