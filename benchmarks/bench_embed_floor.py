"""The least time MiniLM needs for a simulator round's own texts: a lower bound on the round's CPU floor.

    python benchmarks/bench_embed_floor.py --agents 100 --rounds 3 [--repeats 3] [--precisions fp32,bf16]

Runs the ``evaluate efficiency`` point at zero latency (``simulate_paper``, local server, all agents active, one key
at per-key concurrency 64, all-MiniLM-L6-v2 as ``simulate`` runs) and records every text that reached the model (the
shared cache lets each text through once). Then, with nothing else running in the process, it embeds each round's
texts again in ONE call (the best batching a round could ever get), in each precision with 1 and with 2 torch
threads, and prints the wall time and process CPU. No round can embed its texts faster than this on the machine,
whatever else is optimised, so a round's zero-latency time (``evaluate efficiency --cpu-floor``) cannot fall below
the 2-thread wall time printed here while the model, its precision and the texts stay as they are.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def record_round_texts(agents: int, rounds: int) -> tuple[list[list[str]], list[float]]:
    """The texts the model embedded in each round of a zero-latency run, and the rounds' wall seconds."""
    from recagent_gym.llm.embedder import SentenceEmbedder
    from recagent_gym.llm.local_server import LocalServer
    from recagent_gym.runs.config import load_config
    from recagent_gym.runs.evaluation import efficiency
    from recagent_gym.runs.simulator import runner

    class Recording(SentenceEmbedder):
        def __init__(self) -> None:
            super().__init__()
            self.seen: list[str] = []
            self._lock = threading.Lock()

        def __call__(self, texts: Sequence[str], *, show_progress: bool = False) -> np.ndarray:
            with self._lock:
                self.seen.extend(texts)
            return super().__call__(texts, show_progress=show_progress)

    server_class = getattr(efficiency, "ActiveAgentServer", LocalServer)
    config = load_config("simulate_paper", [])  # as `evaluate efficiency` runs, every agent active
    embedder = Recording()
    per_round: list[list[str]] = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        server_class(latency_s=0.0, per_key_concurrency=64, choice="random", reply=None, seed=0) as server,
    ):
        point = efficiency.simulation_config(
            config, agents=agents, rounds=rounds, backend="local-server", base_url=server.base_url, keys=1,
            concurrency=64, all_active=True,
        )  # fmt: skip
        sim = runner.start(point, Path(tmp) / "run", embedder=embedder)
        try:
            for _ in range(rounds):
                before = len(embedder.seen)
                sim.run(rounds=1)
                per_round.append(embedder.seen[before:])
        finally:
            sim.close()
    return per_round, [float(r["seconds"]) for r in sim.rounds]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--precisions", default="fp32,bf16", help="comma-separated MiniLM precisions to time")
    args = parser.parse_args()

    from recagent_gym.llm.embedder import SentenceEmbedder

    per_round, seconds = record_round_texts(args.agents, args.rounds)
    walls = ", ".join(f"{s:.2f}" for s in seconds)
    print(f"{args.agents} agents, {args.rounds} rounds at zero latency: round wall {walls} s; texts embedded per "
          f"round {', '.join(str(len(t)) for t in per_round)}")  # fmt: skip
    for precision, threads in [(p, t) for p in args.precisions.split(",") for t in (1, 2)]:
        embedder = SentenceEmbedder(n_threads=threads, batch_size=100_000, precision=precision)  # type: ignore[arg-type]
        tokens = [np.mean([len(ids) for ids in embedder._model.tokenizer(texts)["input_ids"]]) for texts in per_round]
        embedder(per_round[0])  # warm-up
        walls, cpus = [], []
        for _ in range(args.repeats):
            for texts in per_round:
                wall, cpu = time.perf_counter(), time.process_time()
                embedder(texts)
                walls.append(time.perf_counter() - wall)
                cpus.append(time.process_time() - cpu)
        n = float(np.mean([len(t) for t in per_round]))
        print(f"one call per round, {embedder.precision}, {threads} thread(s) (packed path: {embedder.packed}), "
              f"{n:.0f} texts of "
              f"{np.mean(tokens):.1f} tokens on average: wall {min(walls):.2f}-{max(walls):.2f} s (median "
              f"{np.median(walls):.2f}), process CPU median {np.median(cpus):.2f} s, {1000 * np.median(cpus) / n:.1f} "
              f"ms per text")  # fmt: skip


if __name__ == "__main__":
    main()
