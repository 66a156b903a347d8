"""Policy zips that cannot be used: ``evaluate policies``, ``users transfer`` and ``users collect --policy`` given a
nonexistent, empty, garbage, cut-short or unrelated zip, or a policy of the other env, end in one ``policy error``
(or ``distill error`` for the collect source's own checks) naming the file, and write nothing.

The zip is checked once where policies are loaded (:func:`recagent_gym.runs.policies.policy_files.load_policy`): SB3's
members (``data``, ``policy.pth``), ``data`` a JSON object with the spaces, then the loaded spaces against the env.
"""

from __future__ import annotations

import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("pyarrow")

from recagent_gym.users.distilled.errors import DistillError
from tests._hardening_files import one_error_line, truncate
from tests._scripted_cli import use_scripted_backend

TINY_TRAIN = ["--set", "train.total_timesteps=32", "--set", "train.n_steps=16", "--set", "train.batch_size=16",
              "--set", "train.n_envs=2"]  # fmt: skip


@pytest.fixture(scope="module")
def v0_policy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A RecAgent-v0 PPO of ``train`` (distilled users of the bundled data, a few steps): policy.zip + policy.json."""
    from recagent_gym.runs.cli import main

    out = tmp_path_factory.mktemp("v0")
    code = main(["train", "--config", "quickstart", "--output-dir", str(out), "--no-progress", *TINY_TRAIN])
    assert code == 0
    return out / "policy.zip"


def _unrelated(path: Path) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("hello.txt", "a zip of something else")


BAD_ZIPS: dict[str, Callable[[Path, Path], object]] = {
    "empty": lambda path, good: path.write_bytes(b""),
    "garbage": lambda path, good: path.write_bytes(b"PK\x03\x04 this is not really a zip" * 20),
    "truncated": lambda path, good: (shutil.copy(good, path), truncate(path, 0.4)),
    "unrelated": lambda path, good: _unrelated(path),
    "data_not_json": lambda path, good: _rewrite(good, path, data=b"\x00\x01 not json"),
}


def _rewrite(good: Path, path: Path, *, data: bytes) -> None:
    """``good``'s zip with its ``data`` member replaced."""
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(path, "w") as dst:
        for item in src.infolist():
            dst.writestr(item, data if item.filename == "data" else src.read(item.filename))


def _bad_policy(folder: Path, kind: str, good: Path) -> Path:
    """A damaged ``policy.zip`` in ``folder`` with ``good``'s policy.json beside it (so the zip itself is at fault);
    ``missing``: the json alone."""
    folder.mkdir(parents=True)
    shutil.copy(good.with_name("policy.json"), folder / "policy.json")
    path = folder / "policy.zip"
    if kind != "missing":
        BAD_ZIPS[kind](path, good)
    return path


@pytest.mark.parametrize("kind", ["missing", *sorted(BAD_ZIPS)])
@pytest.mark.slow
def test_evaluate_policies_with_a_bad_zip_is_one_line(tmp_path, capsys, v0_policy, kind):
    policy = _bad_policy(tmp_path / "p", kind, v0_policy)
    out = tmp_path / "eval"
    line = one_error_line(capsys, "evaluate", "policies", "--config", "quickstart", "--users", "2",
                          "--output-dir", str(out), "--policy", str(policy))  # fmt: skip
    assert line.startswith("recagent-gym: policy error: ") and str(policy) in line
    assert not out.exists()


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["missing", *sorted(BAD_ZIPS)])
def test_transfer_with_a_bad_zip_is_one_line(tmp_path, capsys, v0_policy, kind):
    policy = _bad_policy(tmp_path / "p", kind, v0_policy)
    (policy.parent / "policy.json").write_text('{"algorithm": "ppo", "env": "RecAgent-v1"}')
    out = tmp_path / "transfer"
    line = one_error_line(capsys, "users", "transfer", "--config", "quickstart", "--out", str(out), "--users", "2",
                          "--user-models", "distilled", "--no-progress", "--policy", str(policy))  # fmt: skip
    assert line.startswith("recagent-gym: policy error: ") and str(policy) in line
    assert not out.exists()


@pytest.mark.slow
def test_transfer_with_a_recagent_v0_policy_is_one_line(tmp_path, capsys, v0_policy):
    """As trained (its policy.json says RecAgent-v0), and with a v1 policy.json beside it: its observation space
    is not RecAgent-v1's."""
    out = tmp_path / "transfer"
    argv = ["users", "transfer", "--config", "quickstart", "--out", str(out), "--users", "2",
            "--user-models", "distilled", "--no-progress", "--policy"]  # fmt: skip
    line = one_error_line(capsys, *argv, str(v0_policy))
    assert "policy error" in line and "trained on RecAgent-v0" in line and "RecAgent-v1" in line
    relabelled = tmp_path / "relabelled"
    relabelled.mkdir()
    shutil.copy(v0_policy, relabelled / "policy.zip")
    (relabelled / "policy.json").write_text('{"algorithm": "ppo", "env": "RecAgent-v1"}')
    line = one_error_line(capsys, *argv, str(relabelled / "policy.zip"))
    assert "policy error" in line and "observation space" in line
    assert not out.exists()


def test_transfer_on_v0_with_a_bad_zip_or_a_v1_policy_is_one_line(tmp_path, capsys, v0_policy):
    out = tmp_path / "transfer"
    argv = ["users", "transfer", "--config", "quickstart", "--out", str(out), "--users", "2", "--no-progress",
            "--user-models", "distilled", "--set", "train.transfer_env=v0", "--policy"]  # fmt: skip
    garbage = _bad_policy(tmp_path / "g", "garbage", v0_policy)
    assert str(garbage) in one_error_line(capsys, *argv, str(garbage))
    v1 = _bad_policy(tmp_path / "v1", "truncated", v0_policy)
    (v1.parent / "policy.json").write_text('{"algorithm": "ppo", "env": "RecAgent-v1"}')
    assert "trained on RecAgent-v1" in one_error_line(capsys, *argv, str(v1))
    assert not out.exists()


@pytest.mark.parametrize("kind", ["missing", *sorted(BAD_ZIPS)])
def test_collect_with_a_bad_policy_zip_is_one_line(tmp_path, capsys, monkeypatch, v0_policy, kind):
    use_scripted_backend(monkeypatch)
    policy = _bad_policy(tmp_path / "p", kind, v0_policy)
    out = tmp_path / "logs"
    line = one_error_line(capsys, "users", "collect", "--config", "quickstart", "--out", str(out), "--sessions", "2",
                          "--no-progress", "--policy", str(policy))  # fmt: skip
    assert line.startswith("recagent-gym: policy error: ") and str(policy) in line
    assert not out.exists()


def test_collect_source_refuses_a_v0_policy(tmp_path, v0_policy):
    """In process, on the tiny data: a RecAgent-v0 policy (its json says so, or not) is refused before any row."""
    from recagent_gym.runs.distill.collect import collect
    from tests._agent_fixtures import make_config, make_model, tiny_dataset

    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(v0_policy, bare / "policy.zip")
    for policy, message in ((v0_policy, "trained on RecAgent-v0"), (bare / "policy.zip", "not an item-scoring")):
        with pytest.raises(DistillError, match=message):
            collect(make_model(), tiny_dataset(), tmp_path / "logs", sessions=2, sources=["policy"],
                    config=make_config(), policy=policy, progress=False)  # fmt: skip
        assert not (tmp_path / "logs").exists()


def test_load_policy_checks_spaces_and_loads_a_good_zip(v0_policy):
    from gymnasium import spaces

    from recagent_gym.runs.policies.policy_files import PolicyError, load_policy

    model = load_policy(v0_policy, "ppo")
    assert load_policy(v0_policy, "ppo", observation_space=model.observation_space).observation_space.shape
    with pytest.raises(PolicyError, match="observation space"):
        load_policy(v0_policy, "ppo", observation_space=spaces.Box(0.0, 1.0, (3,)))
    with pytest.raises(PolicyError, match="unknown algorithm"):
        load_policy(v0_policy, "sac")
