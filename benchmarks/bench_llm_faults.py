"""Two fault figures of issue 13: how long a trickling server is waited on, and how long a huge reply takes to validate.

    .venv/bin/python benchmarks/bench_llm_faults.py [--trickle 12] [--timeout 2] [--reply-mb 3.7]

1. The fault-injection server sends a normal answer a byte at a time over ``--trickle`` seconds; the OpenAI backend
   runs with ``timeout_s=--timeout`` and no retry. Prints the seconds until the typed error (target: about
   ``--timeout``, not ``--trickle``).
2. A reflection reply of ``--reply-mb`` MB of statement lines (a server ignoring ``max_tokens``) is parsed and
   validated by the reflection contract. Prints the seconds it takes.

Prints figures; not a timed test.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests._llm_server

from recagent_gym.llm.config import LLMConfig
from recagent_gym.llm.openai_backend import OpenAIBackend
from recagent_gym.llm.protocol import LLMError
from recagent_gym.prompts import memory_reflection
from tests._llm_server import FaultServer

MEMORIES = ["Ann watched Alien and loved the horror.", "Ann left a comedy after ten minutes."]
LINE = "Ann prefers horror films to comedies on most evenings at home now.\n"


def trickle_seconds(trickle_s: float, timeout_s: float) -> float:
    with FaultServer(trickle_s=trickle_s) as server:
        server.plan = {"t": ["trickle"]}
        cfg = LLMConfig(backend="openai", base_url=server.base_url, model="bench", timeout_s=timeout_s, max_retries=0)
        backend = OpenAIBackend(cfg)
        backend.generate(["<<warm>>"])  # client and event loop started outside the timing
        start = time.perf_counter()
        try:
            backend.generate(["<<t>>"])
        except LLMError:
            pass
        else:
            raise AssertionError("the trickling request was expected to time out")
        elapsed = time.perf_counter() - start
        backend.close()
    return elapsed


def reflection_seconds(reply_mb: float) -> float:
    reply = LINE * int(reply_mb * 1e6 / len(LINE))
    start = time.perf_counter()
    memory_reflection.valid_insights(memory_reflection.parse(reply), MEMORIES, 2, 240, "Ann")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trickle", type=float, default=12.0)
    parser.add_argument("--timeout", type=float, default=2.0)
    parser.add_argument("--reply-mb", type=float, default=3.7)
    args = parser.parse_args()
    waited = trickle_seconds(args.trickle, args.timeout)
    print(f"trickling body over {args.trickle:g} s, timeout_s={args.timeout:g}: typed error after {waited:.1f} s")
    took = reflection_seconds(args.reply_mb)
    print(f"{args.reply_mb:g} MB reflection reply: parsed and validated in {took:.3f} s")


if __name__ == "__main__":
    main()
