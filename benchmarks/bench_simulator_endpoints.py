"""The simulator's round time against 1 and 4 OpenAI-compatible endpoints (the project's fake servers).

    python benchmarks/bench_simulator_endpoints.py --agents 1000 --endpoints 1,4 [--set data.dataset=PATH]

Starts N fake servers (``python -m recagent_gym.llm.local_server``, 300 ms per request, 8 at once per server), then
runs ``benchmarks/bench_simulator.py`` (``configs/simulate_small.yaml``, one round, response cache off) against
them through ``llm.base_urls`` with ``llm.max_concurrency=8`` per endpoint, and prints its round line. The bundled
data has 610 users; 1,000 agents need a larger dataset (``--set data.dataset=...``, e.g. a MovieLens-1M folder).
Not a timed test; the figures depend on the machine's load.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_llm_endpoints import start_servers  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--endpoints", default="1,4")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--latency-s", type=float, default=0.3)
    parser.add_argument("--capacity", type=int, default=8)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    for n in (int(x) for x in args.endpoints.split(",")):
        procs, urls = start_servers(n, args.latency_s, args.capacity)
        try:
            listed = "[" + ",".join(f'"{u}"' for u in urls) + "]"
            settings = ["llm.backend=openai", "llm.model=fake", f"llm.base_urls={listed}",
                        f"llm.max_concurrency={args.capacity}", *args.overrides]  # fmt: skip
            command = [sys.executable, str(HERE / "bench_simulator.py"), "--agents", str(args.agents),
                       "--rounds", str(args.rounds), *[a for s in settings for a in ("--set", s)]]  # fmt: skip
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            lines = [ln for ln in done.stdout.splitlines() if ln.startswith(("round", "mean", "setup"))]
            print(f"== {n} endpoint(s)\n" + "\n".join(lines or [done.stderr[-2000:]]), flush=True)
        finally:
            for p in procs:
                p.kill()
                p.wait()


if __name__ == "__main__":
    main()
