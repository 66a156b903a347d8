"""What a trained policy folder holds: the SB3 algorithms by name and the file names (shared by training and
evaluation, so neither imports the other for them), and the one place a ``policy.zip`` is read back.

A policy is a stable-baselines3 zip (members ``data``, a JSON document with the pickled spaces and settings, and
``policy.pth``, the weights) with the project's ``policy.json`` beside it (algorithm, env, action kind, observation
keys). :func:`load_policy` checks the zip before SB3 reads it (a zip at all, SB3's members, ``data`` a JSON
object with the spaces), then loads it and compares its spaces with the env's: a missing, empty, damaged or
foreign file, or a policy trained on another env, is one :class:`PolicyError` naming the file, never a traceback
from deep inside SB3 or torch.
"""

from __future__ import annotations

import json
import warnings
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces
from stable_baselines3 import A2C, DQN, PPO
from stable_baselines3.common.base_class import BaseAlgorithm

from recagent_gym.errors import RecAgentError

ALGORITHMS: dict[str, type[BaseAlgorithm]] = {"ppo": PPO, "a2c": A2C, "dqn": DQN}
POLICY_FILE = "policy.zip"
META_FILE = "policy.json"
SB3_MEMBERS = ("data", "policy.pth")
"""The members every stable-baselines3 zip holds."""
_ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, OSError, EOFError, ValueError, KeyError,
               NotImplementedError, RuntimeError, MemoryError, RecursionError)  # fmt: skip
"""What reading a damaged or foreign zip and its JSON raises (CRC and header errors, an unknown compression, an
'encrypted' flag, a member size past the end, bytes that are not UTF-8 or JSON)."""


class PolicyError(RecAgentError):
    """A trained policy that cannot be used: missing, not a policy, damaged, or made for another env."""

    label = "policy error"


def _reason(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return (f"{type(exc).__name__}: {text}" if text else type(exc).__name__)[:300]


def policy_file(path: str | Path) -> Path:
    """The ``policy.zip`` of ``path`` (the file itself, or the one in a policy folder); it must exist."""
    path = Path(path)
    file = path / POLICY_FILE if path.is_dir() else path
    if not file.is_file():
        raise PolicyError(f"{file}: no such policy file (a {POLICY_FILE} written by training)")
    return file


def meta_path(path: str | Path) -> Path:
    """Where the ``policy.json`` of ``path`` is: beside the zip, or in the run folder of a checkpoint."""
    path = Path(path)
    found = (path if path.is_dir() else path.parent) / META_FILE
    if not found.exists() and path.parent.name == "checkpoints":
        found = path.parent.parent / META_FILE
    return found


def read_meta(path: str | Path, *, required: bool = True) -> dict[str, Any]:
    """The ``policy.json`` saved beside a policy, a JSON object (``{}`` when absent and not ``required``); the
    policy file itself must exist."""
    policy_file(path)
    found = meta_path(path)
    if not found.exists():
        if not required:
            return {}
        raise PolicyError(f"{found} not found: a trained policy needs the {META_FILE} saved with it")
    try:
        meta = json.loads(found.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise PolicyError(f"{found}: not a readable {META_FILE} ({_reason(exc)})") from exc
    if not isinstance(meta, dict):
        raise PolicyError(f"{found}: {META_FILE} must hold a JSON object, not {type(meta).__name__}")
    return meta


def trained_env(meta: dict[str, Any]) -> str:
    """The env a policy was trained on (``policy.json``'s ``env``; RecAgent-v0 training writes none)."""
    env = meta.get("env", "RecAgent-v0")
    return env if isinstance(env, str) else repr(env)


def check_v0_meta(path: str | Path, meta: dict[str, Any], keys: list[str]) -> dict[str, Any]:
    """A RecAgent-v0 policy's ``policy.json`` (from ``train``): what evaluation needs to act with it; ``keys``: the
    env's observation keys."""
    if trained_env(meta) != "RecAgent-v0":
        raise PolicyError(
            f"{path}: trained on {trained_env(meta)}, but this command runs RecAgent-v0 (a policy of 'train'); "
            "RecAgent-v1 policies are evaluated by 'users transfer' with train.transfer_env=v1"
        )
    problems = [k for k in ("n_items", "page_size") if not isinstance(meta.get(k), int) or isinstance(meta[k], bool)]
    if meta.get("algorithm") not in ALGORITHMS:
        problems.append(f"algorithm (one of {', '.join(ALGORITHMS)})")
    if meta.get("action") not in ("score", "genre", "page"):
        problems.append("action (score, genre or page)")
    observed = meta.get("observation_keys")
    if not isinstance(observed, list) or not observed or not all(k in keys for k in observed):
        problems.append(f"observation_keys (some of {', '.join(keys)})")
    if problems:
        raise PolicyError(f"{meta_path(path)}: missing or invalid {'; '.join(problems)}")
    return meta


def check_zip(path: str | Path) -> Path:
    """``path``'s zip checked as a stable-baselines3 save (see the module docstring); the file."""
    file = policy_file(path)
    try:
        with zipfile.ZipFile(file) as archive:
            missing = [m for m in SB3_MEMBERS if m not in archive.namelist()]
            data = None if missing else json.loads(archive.read("data").decode("utf-8"))
    except _ZIP_ERRORS as exc:
        raise PolicyError(f"{file}: not a readable policy zip ({_reason(exc)})") from exc
    if missing:
        raise PolicyError(f"{file}: not a stable-baselines3 policy (no {', '.join(missing)} in the zip)")
    if not isinstance(data, dict) or not all(k in data for k in ("policy_class", "observation_space", "action_space")):
        raise PolicyError(f"{file}: not a stable-baselines3 policy (its 'data' lacks the policy class and spaces)")
    return file


def load_policy(
    path: str | Path,
    algorithm: str = "ppo",
    *,
    observation_space: spaces.Space | None = None,
    action_space: spaces.Space | None = None,
) -> BaseAlgorithm:
    """The policy of ``path`` (:func:`check_zip`), loaded on the CPU with ``algorithm``; its spaces must match the
    given ones (those of the env it will act in)."""
    if algorithm not in ALGORITHMS:
        raise PolicyError(f"{path}: unknown algorithm {algorithm!r}; expected one of {', '.join(ALGORITHMS)}")
    file = check_zip(path)
    try:
        with warnings.catch_warnings():  # SB3 warns on each object it cannot unpickle, then fails below
            warnings.simplefilter("ignore")
            model = ALGORITHMS[algorithm].load(file, device="cpu")
    except Exception as exc:  # unpickling and torch.load of damaged members raise anything; the file is the cause
        raise PolicyError(f"{file}: the policy does not load ({_reason(exc)})") from exc
    for name, expected, got in (
        ("observation", observation_space, model.observation_space),
        ("action", action_space, model.action_space),
    ):
        if expected is not None and not same_space(expected, got):
            raise PolicyError(
                f"{file}: trained for the {name} space {describe(got)}, but the env has {describe(expected)} "
                "(a policy of another env, dataset or settings)"
            )
    return model


def check_policy(path: str | Path) -> Path:
    """``path``'s policy loaded once (with the algorithm its ``policy.json`` names, else PPO) and dropped: a damaged
    zip (a flipped bit in its network) fails here, when the command starts, not after minutes of fitting."""
    algorithm = read_meta(path, required=False).get("algorithm", "ppo")
    load_policy(path, algorithm if algorithm in ALGORITHMS else "ppo")
    return policy_file(path)


def same_space(a: Any, b: Any) -> bool:
    """Same kind and shape (and, for a dict, the same keys): what a policy's network depends on."""
    if type(a) is not type(b):
        return False
    if isinstance(a, spaces.Dict):
        return list(a.spaces) == list(b.spaces) and all(same_space(a[k], b[k]) for k in a.spaces)
    if isinstance(a, spaces.Discrete):
        return int(a.n) == int(b.n)
    if isinstance(a, spaces.MultiDiscrete):
        return np.array_equal(a.nvec, b.nvec)
    return a.shape == b.shape


def describe(space: Any) -> str:
    if isinstance(space, spaces.Dict):
        return "Dict(" + ", ".join(f"{k}: {describe(v)}" for k, v in space.spaces.items()) + ")"
    if isinstance(space, spaces.Discrete):
        return f"Discrete({int(space.n)})"
    return f"{type(space).__name__}{getattr(space, 'shape', '')}"
