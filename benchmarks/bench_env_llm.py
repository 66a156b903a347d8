"""Env steps with the embedded-LLM users (the paper's agent with memory and social round): single env vs vector env.

    .venv/bin/python benchmarks/bench_env_llm.py [--steps 96] [--envs 4]

Prints the median and mean seconds per user step, and steps per second (wall clock, first reset included), for
one env stepped alone and for a vector env whose sub-envs' decisions go to the model as one batch and whose
sub-envs starting sessions at the same step share one social round. Sessions start and end as they come (cold
prompt prefixes of new users, the social world between sessions and the batched end-of-session writes all
count, in the step that ends a session), so the figures include everything a training run pays. For the single
env it also prints the median of the steady-state steps (a later page of a session that goes on, the user's prompt
prefix cached). Not a timed test; with random pages, runs of a few dozen steps vary by 10-20%.
"""

from __future__ import annotations

import argparse
import collections
import statistics
import time

import numpy as np

import recagent_gym  # noqa: F401  (registers the env)
from recagent_gym.data.load import load_dataset_from_config
from recagent_gym.llm.embedder import SentenceEmbedder
from recagent_gym.llm.factory import build_llm
from recagent_gym.llm.testing import ScriptedLLM
from recagent_gym.llm.wrapping import close_model
from recagent_gym.runs.config import load_config
from recagent_gym.runs.make_env import catalogue_env, catalogue_vector_env

PHASES = ("respond_batch", "social_round", "write_ended")
"""User-model methods timed: decisions, the social world between sessions, batched end-of-session writes (the
last can run inside the others, when a pending user's memory is needed)."""

OLD_NAMES = {"social_round": "between_sessions", "write_ended": "flush_ended"}
"""The same phases' names before the session kernel (``aebbaed``), so that this script measures that checkout too:
``cd OLD && PYTHONPATH=$PWD python /path/to/this/script.py``."""


def time_phases(user_model: object) -> collections.Counter[str]:
    """Wrap the user model's phase methods (on the instance) so their wall time adds up in the returned counter;
    ``sessions`` counts session starts (runs of different versions compare only if they did the same work)."""
    spent: collections.Counter[str] = collections.Counter()
    start_session = user_model.start_session

    def counted(*args: object, **kwargs: object) -> object:
        spent["sessions"] += 1
        return start_session(*args, **kwargs)

    user_model.start_session = counted
    for name in PHASES:
        attribute = name if hasattr(user_model, name) else OLD_NAMES[name]
        method = getattr(user_model, attribute)

        def timed(*args: object, _method=method, _name=name, **kwargs: object) -> object:
            start = time.perf_counter()
            try:
                return _method(*args, **kwargs)
            finally:
                spent[_name] += time.perf_counter() - start

        setattr(user_model, attribute, timed)
    return spent


def report(
    name: str, seconds_per_step: list[float], wall: float, steps: int, spent: collections.Counter, llm: object
) -> None:
    print(
        f"{name:<22}: median {statistics.median(seconds_per_step):.3f} s/step, "
        f"mean {statistics.mean(seconds_per_step):.3f} s/step, {steps / wall:.2f} steps/s ({steps} steps, "
        f"{wall:.1f} s)"
    )
    print(" " * 24 + ", ".join(f"{k} {spent[k]:.1f} s" for k in PHASES))
    usage = getattr(llm, "total", None)
    work = f"{spent['sessions']} sessions started, {time.process_time():.1f} s CPU so far"
    if isinstance(llm, ScriptedLLM):
        work += f", {llm.calls} LLM calls in {llm.batches} batches (scripted answers)"
    if usage is not None:
        work += f", {usage.calls} LLM calls, {usage.prompt_tokens} prompt tokens, {usage.completion_tokens} generated"
    print(" " * 24 + work)


BENCH_SETTINGS = [
    "user.model=llm",
    "user.session_end_batch=8",
    "user.feeling_max_tokens=16",
    "user.score_cache=false",
    "memory.implementation=recagent",
    "memory.sensory=false",
    "memory.reflection=false",
    "social.enabled=true",
    "social.max_active_agents=2",
    "social.max_chat_turns=2",
    "social.utterance_max_tokens=24",
    "env.page_size=5",
    "env.max_pages=5",
]

LATER_KEYS = {"user.score_cache"}
"""Settings added after the first measurement, set above to how older versions always behaved."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=96, help="user steps in each setting")
    parser.add_argument("--envs", type=int, default=4)
    parser.add_argument(
        "--scripted",
        action="store_true",
        help="answer with the test double instead of the embedded model: the CPU cost of everything around the "
        "LLM and the work done (sessions, calls), in a minute instead of half an hour",
    )
    parser.add_argument(
        "--only", choices=("single", "vector"), help="run one setting (e.g. two checkouts side by side, same load)"
    )
    args = parser.parse_args()
    # Fixed settings, so figures stay comparable across versions whatever the quickstart becomes: the quickstart of
    # the first measurement (LLM users with the paper's memory and the social round; sensory compression and
    # reflection off; batched end-of-session writes; no score cache).
    try:
        config = load_config("quickstart", BENCH_SETTINGS)
    except ValueError:  # an older checkout: without the keys it did not have (it always behaved as they are set)
        config = load_config("quickstart", [s for s in BENCH_SETTINGS if s.split("=")[0] not in LATER_KEYS])
    dataset = load_dataset_from_config(config.data)
    embedder = SentenceEmbedder()

    # Each setting gets a freshly loaded model (no prompt prefixes resident from the other) and the same stream of
    # random pages; a step's time includes the session start that follows it (social world, cold prefixes).
    def model() -> object:
        return ScriptedLLM(default="ok") if args.scripted else build_llm(config.llm)

    if args.only != "vector":
        run_single(args, config, dataset, embedder, model)
    if args.only != "single":
        run_vector(args, config, dataset, embedder, model)


def run_single(args: argparse.Namespace, config: object, dataset: object, embedder: object, model: object) -> None:
    llm = model()
    env = catalogue_env(dataset, "llm", config=config, llm=llm, embedder=embedder)
    spent = time_phases(env.user_model)
    rng = np.random.default_rng(0)
    start = time.perf_counter()
    env.reset(seed=0)
    times, warm = [], []
    while len(times) < args.steps:
        t = time.perf_counter()
        _, _, terminated, truncated, info = env.step(rng.integers(0, dataset.n_items, size=env.page_size))
        if terminated or truncated:
            env.reset()
        times.append(time.perf_counter() - t)
        if info["page_index"] > 0 and not (terminated or truncated):
            warm.append(times[-1])  # a later page of a session that goes on: the user's prefix is cached
    report("single env", times, time.perf_counter() - start, len(times), spent, llm)
    if warm:
        print(" " * 24 + f"later pages of ongoing sessions: median {statistics.median(warm):.3f} s/step ({len(warm)})")
    close_model(llm)


def run_vector(args: argparse.Namespace, config: object, dataset: object, embedder: object, model: object) -> None:
    llm = model()
    venv = catalogue_vector_env(args.envs, dataset, "llm", config=config, llm=llm, embedder=embedder)
    spent = time_phases(venv.user_model)
    rng = np.random.default_rng(0)
    start = time.perf_counter()
    venv.reset(seed=0)
    per_step = []
    for _ in range(args.steps // args.envs):
        t = time.perf_counter()
        venv.step(rng.integers(0, dataset.n_items, size=(args.envs, config.env.page_size)))
        per_step += [(time.perf_counter() - t) / args.envs] * args.envs
    report(f"vector env x{args.envs}", per_step, time.perf_counter() - start, len(per_step), spent, llm)


if __name__ == "__main__":
    main()
