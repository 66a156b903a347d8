"""A fuzz loop over the files the distilled users and the policies read: a valid file, then seeded random damage
(a cut at a random length, random bit flips, random bytes inserted); every mutant either loads or raises the
file's typed error (``DistillError``, ``PolicyError``), never anything else.

The valid files are written here: a decision-log part and ``collect.json`` (tiny data), a model distilled from
them (``model.json``, ``weights.npz``) and a few-step RecAgent-v1 policy zip. A mutant that loads is used once
(the distilled users answer a page), so a check that lets a bad value through shows up as a stray exception.
"""

from __future__ import annotations

import json
import shutil
import traceback
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pyarrow")

from recagent_gym.errors import RecAgentError
from recagent_gym.llm.testing import HashingEmbedder
from recagent_gym.runs.distill import logs
from recagent_gym.runs.distill.fit import distill
from recagent_gym.runs.distill.objective import FitSettings
from recagent_gym.runs.policies.policy_files import load_policy
from recagent_gym.users.distilled.saved_model import Artefact
from recagent_gym.users.distilled.user import DistilledUser
from recagent_gym.users.protocol import Context, Page
from tests._agent_fixtures import make_config, tiny_dataset
from tests._distilled_fixtures import tiny_policy
from tests._hardening_files import decision_rows

MUTANTS = 60
"""Mutants per file kind (a third of each damage)."""


def mutate(data: bytes, rng: np.random.Generator) -> bytes:
    """One random damage of ``data``: a cut, 1-8 bit flips, or 1-16 random bytes inserted."""
    kind = int(rng.integers(3))
    if kind == 0:
        return data[: int(rng.integers(len(data)))]
    out = bytearray(data)
    if kind == 1:
        for _ in range(int(rng.integers(1, 9))):
            out[int(rng.integers(len(out)))] ^= 1 << int(rng.integers(8))
        return bytes(out)
    at = int(rng.integers(len(out) + 1))
    return bytes(out[:at]) + rng.bytes(int(rng.integers(1, 17))) + bytes(out[at:])


@pytest.fixture(scope="module")
def valid(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("valid")
    folder = root / "logs"
    logs.write_part(folder, decision_rows(list(range(6)), 30, pages=4))
    logs.write_meta(folder, {"dataset": tiny_dataset().name, "sources": ["random", "popular"], "seed": 0,
                             "page_size": 5, "max_pages": 4, "model": "test", "sessions": 12})  # fmt: skip
    settings = FitSettings(epochs=3, split="own")
    distill(folder, tiny_dataset(), make_config(), root / "model", settings=settings, embedder=HashingEmbedder(16))
    (root / "policy").mkdir()
    return {"logs": folder, "model": root / "model", "policy": tiny_policy(root / "policy", make_config())}


def _use_model(folder: Path) -> None:
    user = DistilledUser(tiny_dataset(), Artefact.load(folder))
    rng = np.random.default_rng(0)
    user.start_session(0, rng)
    user.respond(Page(tuple(range(5)), 0), Context(user_id=0, step=0), rng)


def _fuzz(path: Path, load: Callable[[], object], seed: int) -> tuple[int, int]:
    """``MUTANTS`` mutants of ``path`` (restored after); ``(loaded, refused)``; any other exception fails."""
    original = path.read_bytes()
    rng = np.random.default_rng(seed)
    loaded = refused = 0
    try:
        for k in range(MUTANTS):
            path.write_bytes(mutate(original, rng))
            try:
                load()
                loaded += 1
            except RecAgentError:
                refused += 1
            except Exception:  # the point of the fuzz loop: anything else is a bug
                pytest.fail(f"{path.name} mutant {k} (seed {seed}) raised:\n{traceback.format_exc()}")
    finally:
        path.write_bytes(original)
    return loaded, refused


def test_fuzz_decision_log_part(valid):
    loaded, refused = _fuzz(logs.parts(valid["logs"])[0], lambda: logs.read_logs(valid["logs"]), seed=1)
    assert refused > MUTANTS // 3 and loaded + refused == MUTANTS


def test_fuzz_collect_json(valid):
    loaded, refused = _fuzz(valid["logs"] / "collect.json", lambda: logs.read_meta(valid["logs"]), seed=2)
    assert refused > MUTANTS // 3 and loaded + refused == MUTANTS


@pytest.mark.parametrize(("name", "seed"), [("model.json", 3), ("weights.npz", 4)])
def test_fuzz_distilled_model(valid, tmp_path, name, seed):
    folder = tmp_path / "model"
    shutil.copytree(valid["model"], folder)
    loaded, refused = _fuzz(folder / name, lambda: _use_model(folder), seed=seed)
    assert refused > MUTANTS // 3 and loaded + refused == MUTANTS


def test_fuzz_policy_zip(valid, tmp_path):
    path = tmp_path / "policy.zip"
    shutil.copy(valid["policy"], path)
    space = load_policy(path).observation_space
    loaded, refused = _fuzz(path, lambda: load_policy(path, "ppo", observation_space=space), seed=5)
    assert refused > MUTANTS // 3 and loaded + refused == MUTANTS


def test_the_valid_files_load(valid):
    assert len(logs.read_logs(valid["logs"])) == 48 and logs.read_meta(valid["logs"])["page_size"] == 5
    _use_model(valid["model"])
    assert json.loads((valid["model"] / "model.json").read_text())["metrics"]["target"] == "scores"
    assert load_policy(valid["policy"]).observation_space is not None
