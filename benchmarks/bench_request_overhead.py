"""What one request through the OpenAI-compatible backend costs beyond the server's own latency, one at a time.

    .venv/bin/python benchmarks/bench_request_overhead.py [--latency 0.05] [--requests 30]

Sends ``--requests`` single-prompt requests, one after another, to the loopback server ``evaluate efficiency``
uses (:class:`~recagent_gym.llm.local_server.LocalServer`, answering after ``--latency`` seconds) and prints the
median and best wall time per request and the overhead over the latency. ``--nagle`` serves with Nagle's algorithm
on, as the server did before: its answer's body then waited for the client's delayed ACK, about 40 ms more per
request (measured here: 96 ms against 52 ms at 50 ms latency), which every efficiency figure carried. Prints
figures; not a timed test.
"""

from __future__ import annotations

import argparse
import statistics
import time

from recagent_gym.llm.config import LLMConfig
from recagent_gym.llm.local_server import LocalServer
from recagent_gym.llm.openai_backend import OpenAIBackend


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--nagle", action="store_true", help="serve with Nagle's algorithm on (the old server)")
    args = parser.parse_args()
    with LocalServer(latency_s=args.latency) as server:
        if args.nagle:
            server._httpd.RequestHandlerClass.disable_nagle_algorithm = False  # type: ignore[attr-defined]
        config = LLMConfig(backend="openai", base_url=server.base_url, model="m", api_keys=["k"],
                           structured_output="text")  # fmt: skip
        backend = OpenAIBackend(config)
        try:
            backend.generate(["warm up"])
            seconds = []
            for k in range(args.requests):
                started = time.perf_counter()
                backend.generate([f"request {k}"])
                seconds.append(time.perf_counter() - started)
        finally:
            backend.close()
    median, best = statistics.median(seconds), min(seconds)
    print(f"{args.requests} requests one at a time, server latency {1000 * args.latency:.0f} ms, "
          f"Nagle {'on' if args.nagle else 'off'}: median {1000 * median:.1f} ms per request "
          f"(overhead {1000 * (median - args.latency):.1f} ms), best {1000 * best:.1f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
