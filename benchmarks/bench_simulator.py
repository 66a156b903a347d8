"""Seconds and LLM tokens per round of the RecAgent simulator (the paper's efficiency figure, at one size).

    python benchmarks/bench_simulator.py --agents 20 --rounds 5              # embedded Gemma 3 270M, CPU
    python benchmarks/bench_simulator.py --agents 20 --rounds 2 --set simulation.execution=serial

Runs ``configs/simulate_small.yaml`` with the response cache off (every call reaches the model) into a temporary
folder and prints one line per round and the means. Timings depend on the machine and on its load.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="simulate_small")
    parser.add_argument("--agents", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--out", default=None, help="keep the run here (default: a temporary folder)")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(1)
    from recagent_gym.runs.config import load_config
    from recagent_gym.runs.simulator import runner

    overrides = [
        f"simulation.agents={args.agents}",
        f"simulation.rounds={args.rounds}",
        "simulation.progress=false",
        "llm.cache_mode='off'",
        *args.overrides,
    ]
    config = load_config(args.config, overrides)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.out) if args.out else Path(tmp) / "run"
        started = time.perf_counter()
        sim = runner.start(config, out)
        built = time.perf_counter() - started
        sim.run()
        summary = sim.summary()
    print(f"setup (data, model, embedder, MF fit): {built:.1f} s")
    for record in sim.rounds:
        print(
            f"round {record['round'] + 1}: {record['active']:3d} active, {record['seconds']:7.1f} s, "
            f"{record['tokens']:7d} tokens, {record['calls']:5d} calls, events {record['counts']}"
        )
    print(
        f"mean: {summary['mean_seconds_per_round']:.1f} s/round, {summary['mean_tokens_per_round']:.0f} tokens/round"
        f" ({args.agents} agents, execution={config.simulation.execution}, backend={config.llm.backend})"
    )
    print(json.dumps({"events": summary["events"], "most_popular": summary["most_popular"][:5]}))


if __name__ == "__main__":
    main()
