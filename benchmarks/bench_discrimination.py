"""Discrimination (a, b) with the embedded LLM user: seconds and decoded tokens per user, and the N = 200 estimate.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_discrimination.py [--users 6] [--dataset bundled]
        [--per-trial] [--no-personalization-check]

Runs ``evaluate discrimination``'s function for the LLM row only (the paper's four settings, both samplers, the
personalization check unless turned off) on ``--users`` users and prints the wall time per user, the tokens the
model decoded and reused per user, and the wall time that scales to 200 users. ``--per-trial`` scores each trial in
its own call (the code before union scoring) for comparison on the same machine. Prints figures; not a timed test.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np

from recagent_gym.data.load import load_dataset
from recagent_gym.runs.config import load_config
from recagent_gym.runs.config.evaluation_section import EvaluationConfig
from recagent_gym.runs.evaluation import discrimination
from recagent_gym.runs.evaluation.discrimination import run_discrimination
from recagent_gym.runs.evaluation.subjects import Resources

CACHE = Path.home() / ".cache" / "recagent-gym" / "embeddings"


def _per_trial(model: Any, user: int, lists: Any, rng: np.random.Generator, *, label: str) -> list[np.ndarray]:
    """One ``score_items`` call per trial, each from a copy of the same generator (what the code did before)."""
    state = rng.bit_generator.state
    out = []
    for items in lists:
        again = np.random.default_rng()
        again.bit_generator.state = state
        out.append(np.asarray(model.score_items(user, list(items), again), dtype=np.float64))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--users", type=int, default=6)
    parser.add_argument("--dataset", default="bundled")
    parser.add_argument("--per-trial", action="store_true", help="one scoring call per trial (before)")
    parser.add_argument("--no-personalization-check", action="store_true")
    args = parser.parse_args()
    if args.per_trial:
        discrimination.score_union = _per_trial  # type: ignore[assignment]
    dataset = load_dataset(args.dataset)
    evaluation = EvaluationConfig(
        users=args.users, user_models=["llm"], embedding_cache_dir=str(CACHE),
        personalization_check=not args.no_personalization_check,
    )  # fmt: skip
    resources = Resources(dataset, load_config(), evaluation, progress=False)
    resources.item_vectors()
    llm = resources.language_model()
    runtime = getattr(getattr(llm, "inner", llm), "_rt", None)
    decoded0 = runtime.tokens_decoded if runtime else 0
    reused0 = runtime.tokens_reused if runtime else 0
    started = time.perf_counter()
    result = run_discrimination(resources, progress=False)
    wall = time.perf_counter() - started
    build = sum(result.build_seconds.values())
    n = len(result.users)
    per_user = (wall - build) / n
    mode = "per trial" if args.per_trial else "union per user"
    print(f"{dataset.name}, {n} users, LLM row, {mode}, personalization check {not args.no_personalization_check}")
    print(f"wall {wall:.1f} s (model builds {build:.1f} s); scoring {per_user:.2f} s per user")
    if runtime:
        print(f"tokens decoded per user {(runtime.tokens_decoded - decoded0) / n:.0f}, "
              f"reused from the prefix cache {(runtime.tokens_reused - reused0) / n:.0f}")  # fmt: skip
    print(f"estimate for --users 200: {(build + 200 * per_user) / 60:.1f} min for the LLM row")
    print(result.usage)


if __name__ == "__main__":
    main()
