"""OpenAI-compatible backend: N concurrent decisions against a local server with a fixed 300 ms latency.

    .venv/bin/python benchmarks/bench_llm_openai.py [--n 64] [--concurrency 8 16 32] [--latency 0.3]

Compares the wall time with the ideal ``ceil(N / concurrency) * latency`` (target: within 1.5x), and prints the
process's CPU milliseconds per request (client and the in-process server together). Prints figures; not a timed
test. The server is the test suite's fault-injection server with no faults planned.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests._llm_server

from recagent_gym.llm.config import LLMConfig
from recagent_gym.llm.openai_backend import OpenAIBackend
from tests._llm_server import FaultServer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=64)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 16, 32])
    parser.add_argument("--latency", type=float, default=0.3)
    args = parser.parse_args()
    with FaultServer(latency_s=args.latency) as server:
        for concurrency in args.concurrency:
            cfg = LLMConfig(backend="openai", base_url=server.base_url, model="bench", max_concurrency=concurrency)
            backend = OpenAIBackend(cfg)
            backend.choose(["<<warm>>"], [["yes", "no"]])  # connection set-up outside the timing
            prompts = [f"<<c{concurrency}-{i}>> PICK:no" for i in range(args.n)]
            start, cpu = time.perf_counter(), time.process_time()
            choices = backend.choose(prompts, [["yes", "no"]] * args.n)
            wall, cpu = time.perf_counter() - start, time.process_time() - cpu
            backend.close()
            assert all(c.option == "no" for c in choices) and len(choices) == args.n
            ideal = math.ceil(args.n / concurrency) * args.latency
            print(
                f"N={args.n:4d} concurrency={concurrency:3d}: wall {wall:6.2f} s, ideal {ideal:6.2f} s, "
                f"ratio {wall / ideal if ideal else math.nan:4.2f}, peak in flight {server.max_in_flight}, "
                f"CPU {1000 * cpu / args.n:5.2f} ms per request"
            )
            server.max_in_flight = 0


if __name__ == "__main__":
    main()
