"""The path of one env step with LLM users, read by tracing it: RecAgent-v0's ``RecAgentEnv`` and RecAgent-v1's
``RecAgentCandidateEnv``. It prints the package files the step enters, their lines, the lines it executes and its
file-to-file hops (ScriptedLLM and a hashing embedder stand in for the models, so the path is the package's own
code; the paper's memory is on).

.venv/bin/python benchmarks/step_path.py [-v] [--phases] [--env v0|v1]
    --env: trace only that env (default: both); -v: one line per file; --phases: the calls the env and the kernel
    make into other files, in order (with how often), so that a reader sees each phase of the step entered once.

Runs on older checkouts too (the agent's constructor took the root config before it took sections).
"""

from __future__ import annotations

import inspect
import os
import sys
from collections import Counter
from typing import Any

import numpy as np

import recagent_gym
from recagent_gym.data.load import load_dataset
from recagent_gym.llm.testing import HashingEmbedder, ScriptedLLM
from recagent_gym.runs.config import Config
from recagent_gym.runs.make_env import catalogue_env
from recagent_gym.users.agent import LLMUserModel

ROOT = os.path.dirname(recagent_gym.__file__)


def size(rel: str) -> int:
    with open(os.path.join(ROOT, rel)) as f:
        return sum(1 for _ in f)


ORCHESTRATORS = ("envs" + os.sep, "session" + os.sep)
"""The layers whose outgoing calls are a step's phases (the Gymnasium face and the session kernel)."""


def trace(env: Any, action: np.ndarray, label: str, verbose: bool, phases: bool) -> None:
    files: Counter[str] = Counter()
    lines: set[tuple[str, int]] = set()
    hops: set[tuple[str, str]] = set()
    calls: Counter[str] = Counter()  # "caller -> callee:function", in first-call order

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        path = frame.f_code.co_filename
        if not path.startswith(ROOT):
            return tracer
        rel = os.path.relpath(path, ROOT)
        if event == "call":
            caller = frame.f_back
            while caller is not None and not caller.f_code.co_filename.startswith(ROOT):
                caller = caller.f_back
            if caller is not None and os.path.relpath(caller.f_code.co_filename, ROOT) != rel:
                source = os.path.relpath(caller.f_code.co_filename, ROOT)
                hops.add((source, rel))
                if source.startswith(ORCHESTRATORS) and not frame.f_code.co_name.startswith("<"):
                    calls[f"{source} -> {rel}:{frame.f_code.co_name}"] += 1
            files[rel] += 1
        elif event == "line":
            lines.add((rel, frame.f_lineno))
        return tracer

    sys.settrace(tracer)
    _, _, terminated, truncated, _ = env.step(action)
    sys.settrace(None)
    packages = {p.split(os.sep)[0] for p in files if os.sep in p}
    print(
        f"{label}: {len(files)} files, {sum(size(r) for r in files)} lines in them, {len(lines)} lines executed, "
        f"{len(hops)} file-to-file hops, {len(packages)} packages (session ended: {terminated or truncated})"
    )
    if verbose:
        for rel in sorted(files):
            print(f"  {rel:40s} {size(rel):5d} lines, {sum(1 for f, _ in lines if f == rel):4d} executed")
    if phases:
        for call, count in calls.items():
            print(f"  {call}" + (f"  (x{count})" if count > 1 else ""))


def candidate_env_class() -> Any:
    """RecAgent-v1's env class, under its module name of this checkout."""
    try:
        from recagent_gym.envs.candidate_slate_env import RecAgentCandidateEnv
    except ImportError:  # before the rename
        from recagent_gym.envs.candidate_env import RecAgentCandidateEnv  # type: ignore[no-redef]
    return RecAgentCandidateEnv


def main() -> None:
    verbose, phases = "-v" in sys.argv, "--phases" in sys.argv
    which = sys.argv[sys.argv.index("--env") + 1] if "--env" in sys.argv else "both"
    for name in ("v0", "v1"):
        if which in (name, "both"):
            print(f"RecAgent-{name}:")
            trace_env(name, verbose, phases)


def trace_env(name: str, verbose: bool, phases: bool) -> None:
    dataset = load_dataset("bundled")
    config = Config.model_validate({"user": {"session_end_batch": 1}, "memory": {"implementation": "recagent"}})
    takes_sections = "social" in inspect.signature(LLMUserModel).parameters
    sections = {"social": config.social, "memory": config.memory} if takes_sections else {}
    model = LLMUserModel(
        dataset,
        config.user if takes_sections else config,
        ScriptedLLM(default="I liked it."),
        HashingEmbedder(32),
        **sections,
    )
    rng = np.random.default_rng(0)
    if name == "v0":
        env: Any = catalogue_env(dataset, model, config=config, max_pages=2, social=False)

        def action() -> np.ndarray:
            return rng.integers(0, dataset.n_items, size=5)
    else:
        env = candidate_env_class()(dataset, model, config=config, max_pages=2, social=False)

        def action() -> np.ndarray:
            return rng.uniform(-1.0, 1.0, env.n_candidates).astype(np.float32)

    env.reset(seed=0)
    env.step(action())  # warms the lazy agent state; not traced
    env.reset(seed=1)
    trace(env, action(), "a page step", verbose, phases)
    trace(env, action(), "the last page step (session ends, is written)", verbose, phases)


if __name__ == "__main__":
    main()
