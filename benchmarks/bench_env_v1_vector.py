"""RecAgent-v1 with LLM users: user steps/s of the batched vector env (N sub-envs) vs N sequential envs.

    .venv/bin/python benchmarks/bench_env_v1_vector.py [--steps 96] [--envs 4] [--llm latency|scripted|embedded]

``--llm`` picks what answers the agents' prompts:

* ``latency`` (default): the scripted test double (``llm/testing.py``) waiting ``--batch-ms`` (50) per call plus
  ``--prompt-ms`` (0) per prompt in it, as the tests' delayed double does: a served model whose batch takes about
  as long as one prompt. The figure is the package's own cost plus that latency, in a minute;
* ``scripted``: the test double without waiting (the CPU cost of everything around the LLM);
* ``embedded``: the embedded Gemma 3 270M (offline, slow on CPU: use few ``--steps``).

Both settings run the same LLM agents (the paper's memory and the social round, as ``bench_env_llm.py``; ``--set
social.enabled=false`` turns the round off), the same random scores and, per sub-env, the same seed. The N
sequential envs are N separate :class:`RecAgentCandidateEnv` objects (each its own agents, one shared LLM) stepped
in turn; the vector env is one :class:`RecAgentCandidateVectorEnv` with one population whose pages go to the LLM as
one batch per step. A step's time includes the session start that follows it, and each run ends by writing every
session it started (ended sessions are written ``user.session_end_batch`` per env or sub-env at a time: both
settings hold back N times as many). The N envs are N worlds, each running a social round before each session
after its first; the vector env is one world, with at most one round per clock time. Prints each setting's user
steps/s, the ratio, and the LLM calls and batches. Not a timed test.

``--item-vectors``: the agents' item embeddings (their embedding relevance) come from the on-disk store
(``user.item_vector_store``, default; filled for the whole catalogue before the timing, as a machine's earlier runs
leave it: the first fill embeds 9,742 items, about a minute) or, with ``cold``, are embedded when first met, once
per env (the vector env's one population meets each item once; four envs four times). With MiniLM, cold item
embeddings are most of a step's CPU.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from recagent_gym.data.load import load_dataset_from_config
from recagent_gym.llm.embedder import embed_items
from recagent_gym.llm.testing import HashingEmbedder, ScriptedLLM
from recagent_gym.llm.vector_store import store_for
from recagent_gym.llm.wrapping import close_model
from recagent_gym.runs.config import Config, load_config
from recagent_gym.runs.make_env import candidates_env, candidates_vector_env

SETTINGS = [
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
"""``bench_env_llm.py``'s settings (the quickstart of its first measurement: LLM agents with memory and the social
round)."""


class LatencyLLM(ScriptedLLM):
    """The scripted model, waiting ``batch_s`` per call plus ``prompt_s`` per prompt (a served model's latency)."""

    def __init__(self, batch_s: float, prompt_s: float) -> None:
        super().__init__(default="I liked it.")
        self.batch_s, self.prompt_s = batch_s, prompt_s

    def generate(self, prompts: Sequence[str], **kwargs: Any) -> Any:
        time.sleep(self.batch_s + self.prompt_s * len(prompts))
        return super().generate(prompts, **kwargs)

    def choose(self, prompts: Sequence[str], options: Sequence[Sequence[str]], **kwargs: Any) -> Any:
        time.sleep(self.batch_s + self.prompt_s * len(prompts))
        return super().choose(prompts, options, **kwargs)


def build_llm(args: argparse.Namespace, config: Config) -> Any:
    if args.llm == "latency":
        return LatencyLLM(args.batch_ms / 1000, args.prompt_ms / 1000)
    if args.llm == "scripted":
        return ScriptedLLM(default="I liked it.")
    from recagent_gym.llm.factory import build_llm as build_configured

    return build_configured(config.llm)


def build_embedder(args: argparse.Namespace) -> Any:
    """The agents' embedder (memory and item vectors): all-MiniLM-L6-v2 as users run it (``--embedder hashing``: the
    tests' cheap stand-in)."""
    if args.embedder == "hashing":
        return HashingEmbedder(32)
    from recagent_gym.llm.embedder import SentenceEmbedder

    return SentenceEmbedder()


def run_sequential(args: argparse.Namespace, config: Config, dataset: Any, embedder: Any, shared: dict) -> float:
    llm = build_llm(args, config)
    envs = [
        candidates_env(dataset, "llm", config=config, llm=llm, embedder=embedder, **shared) for _ in range(args.envs)
    ]
    rng = np.random.default_rng(0)
    rounds = args.steps // args.envs
    scores = rng.uniform(-1.0, 1.0, size=(rounds, args.envs, envs[0].n_candidates)).astype(np.float32)
    start = time.perf_counter()
    for i, env in enumerate(envs):
        env.reset(seed=i)
    for round_scores in scores:
        for env, action in zip(envs, round_scores, strict=True):
            _, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                env.reset()
    for env in envs:  # every session the run started is written (each env's agents wait for end_batch of theirs)
        env.close()
        env.user_model.write_ended(at_least=1)
    wall = time.perf_counter() - start
    report(f"{args.envs} sequential envs", rounds * args.envs, wall, llm)
    close_model(llm)
    return rounds * args.envs / wall


def run_vector(args: argparse.Namespace, config: Config, dataset: Any, embedder: Any, shared: dict) -> float:
    llm = build_llm(args, config)
    venv = candidates_vector_env(args.envs, dataset, "llm", config=config, llm=llm, embedder=embedder, **shared)
    rng = np.random.default_rng(0)
    rounds = args.steps // args.envs
    scores = rng.uniform(-1.0, 1.0, size=(rounds, args.envs, venv.face.n_candidates)).astype(np.float32)
    start = time.perf_counter()
    venv.reset(seed=0)
    for round_scores in scores:
        venv.step(round_scores)
    venv.close()
    venv.user_model.write_ended(at_least=1)
    wall = time.perf_counter() - start
    report(f"vector env x{args.envs}", rounds * args.envs, wall, llm)
    close_model(llm)
    return rounds * args.envs / wall


def report(name: str, steps: int, wall: float, llm: Any) -> None:
    line = f"{name:<20}: {steps / wall:7.2f} user steps/s ({steps} steps, {wall:.1f} s)"
    if isinstance(llm, ScriptedLLM):
        line += f", {llm.calls} LLM prompts in {llm.batches} calls"
    usage = getattr(llm, "total", None)
    if usage is not None:
        line += f", {usage.calls} LLM calls, {usage.prompt_tokens} prompt tokens"
    print(line, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=96, help="user steps in each setting")
    parser.add_argument("--envs", type=int, default=4)
    parser.add_argument("--llm", choices=("latency", "scripted", "embedded"), default="latency")
    parser.add_argument("--embedder", choices=("minilm", "hashing"), default="minilm", help="memory embedder")
    parser.add_argument("--batch-ms", type=float, default=50.0, help="latency: wait per LLM call")
    parser.add_argument("--prompt-ms", type=float, default=0.0, help="latency: wait per prompt in a call")
    parser.add_argument(
        "--set", action="append", default=[], help="a setting over the fixed ones, e.g. social.enabled=false"
    )
    parser.add_argument(
        "--item-vectors",
        choices=("stored", "cold"),
        default="stored",
        help="stored: the agents read item embeddings from the on-disk store (filled for the whole catalogue before "
        "the timing), as every run after a machine's first does; cold: every item embedded when first met, per env",
    )
    args = parser.parse_args()
    store_setting = [f"user.item_vector_store={str(args.item_vectors == 'stored').lower()}"]
    config = load_config("quickstart", SETTINGS + store_setting + args.set)
    dataset = load_dataset_from_config(config.data)
    embedder = build_embedder(args)
    store = store_for(embedder) if config.user.item_vector_store else None
    if store is not None:  # the catalogue through the store, outside the timing, as a machine's earlier runs leave it
        start = time.perf_counter()
        embed_items(dataset, embedder)
        print(f"item vector store {store.folder}: {len(store)} vectors, filled in {time.perf_counter() - start:.1f} s")
    # One retriever for all envs (its factorisation is the slowest part of building one), built outside the timing.
    first = candidates_env(dataset, "recsim", config=config)
    shared = {"retriever": first.retriever}
    latency = f": {args.batch_ms:g} ms per call + {args.prompt_ms:g} ms per prompt" if args.llm == "latency" else ""
    print(
        f"RecAgent-v1, LLM users ({args.llm}{latency}), embedder {args.embedder}, item vectors "
        f"{'stored' if store is not None else 'cold'}, {args.envs} sub-envs; "
        f"settings over bench_env_llm's: {args.set}"
    )
    sequential = run_sequential(args, config, dataset, embedder, shared)
    vector = run_vector(args, config, dataset, embedder, shared)
    print(f"vector / sequential: {vector / sequential:.2f}x")


if __name__ == "__main__":
    main()
