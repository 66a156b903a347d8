"""Where a zero-latency simulator round spends its CPU: cProfile over every thread, merged.

    python benchmarks/profile_round.py --agents 100 --rounds 3                  # MiniLM, as `simulate` runs
    python benchmarks/profile_round.py --agents 100 --rounds 3 --embedder hashing --top 40

Runs the ``evaluate efficiency`` point (``simulate_paper``, local server at 0 ms, all agents active, one key at
per-key concurrency 64) with a profiler in each thread (the agents' chains, the work done ahead, the loopback
server), merges them and prints the functions with the most own CPU time (thread time: waiting costs nothing), the
most cumulative time (this package's only), and a split by area. Profiling slows everything several times over:
compare the shares, not the seconds, with the unprofiled ``--cpu-floor``.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import os
import pstats
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

AREAS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "embedding (torch, tokenizer, sentence-transformers)",
        ("torch", "sentence_transformers", "transformers", "tokenizers"),
    ),
    ("memory (retrieval, writing)", ("recagent_gym/memory",)),
    ("LLM client (openai, httpx, json)", ("openai", "httpx", "httpcore", "recagent_gym/llm/openai", "h11", "anyio")),
    ("local server (loopback)", ("recagent_gym/llm/local_server", "http/server", "socketserver")),
    ("prompts and agent", ("recagent_gym/prompts", "recagent_gym/users")),
    ("simulator (events, checkpoint, files)", ("recagent_gym/runs/simulator", "recagent_gym/session")),
)


def _profiled_threads(profiles: list[cProfile.Profile]) -> None:
    """Every thread started from now on runs under its own profiler (appended to ``profiles``)."""
    original = threading.Thread.run

    def run(self: threading.Thread) -> None:
        profile = cProfile.Profile(time.thread_time)  # CPU time: waiting threads cost nothing
        profiles.append(profile)
        profile.enable()
        try:
            original(self)
        finally:
            profile.disable()

    threading.Thread.run = run  # type: ignore[method-assign]


OTHER = "other (stdlib, numpy, pandas)"


def _area(func: tuple[str, int, str], stats: dict[Any, Any], depth: int = 0) -> str:
    """The area of :data:`AREAS` whose marker ``func``'s file path holds; a built-in or library function takes the
    area of the caller that spent the most time in it (up to 8 levels up), else :data:`OTHER`."""
    path = func[0]
    for name, markers in AREAS:
        if any(m in path for m in markers):
            return name
    callers = stats[func][4] if func in stats else {}
    if depth >= 8 or not callers:
        return OTHER
    top = max(callers, key=lambda c: callers[c][2] if isinstance(callers[c], tuple) else 0)
    return _area(top, stats, depth + 1)


def area_split(stats: pstats.Stats) -> dict[str, float]:
    """Own CPU time per area (see :func:`_area`)."""
    table = stats.stats  # type: ignore[attr-defined]
    out: dict[str, float] = {name: 0.0 for name, _ in AREAS}
    out[OTHER] = 0.0
    for func, (_cc, _nc, tt, _ct, _callers) in table.items():
        out[_area(func, table)] += tt
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--embedder", choices=("minilm", "hashing"), default="minilm")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--server", choices=("active", "plain"), default="active")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--dump", default=None, help="also write the merged pstats file here")
    args = parser.parse_args()

    from recagent_gym.llm.local_server import LocalServer
    from recagent_gym.runs.config import load_config
    from recagent_gym.runs.evaluation import efficiency

    # as `evaluate efficiency` serves (``--server plain``: the plain random server, an older version's workload)
    server_class = getattr(efficiency, "ActiveAgentServer", LocalServer) if args.server == "active" else LocalServer

    config = load_config("simulate_paper", args.overrides)  # as `evaluate efficiency` runs, every agent active
    embedder = efficiency.make_embedder(args.embedder, config.llm.embedder_precision)
    profiles: list[cProfile.Profile] = []
    _profiled_threads(profiles)
    main_profile = cProfile.Profile(time.thread_time)  # CPU time: waiting threads cost nothing
    profiles.append(main_profile)
    with (
        tempfile.TemporaryDirectory() as tmp,
        server_class(latency_s=0.0, per_key_concurrency=64, choice="random", reply=None, seed=0) as server,
    ):
        point = efficiency.simulation_config(
            config, agents=args.agents, rounds=args.rounds, backend="local-server", base_url=server.base_url, keys=1,
            concurrency=64, all_active=True,
        )  # fmt: skip
        from recagent_gym.runs.simulator import runner

        sim = runner.start(point, Path(tmp) / "run", embedder=embedder)  # set-up (data, MF fit) is not profiled
        started = time.perf_counter()
        main_profile.enable()
        try:
            sim.run()
        finally:
            main_profile.disable()
            sim.close()
        wall = time.perf_counter() - started
        requests = server.request_count
    stats = pstats.Stats(main_profile)
    for profile in profiles[1:]:
        with contextlib.suppress(TypeError):  # a profiler whose thread never ran anything
            stats.add(profile)
    print(f"{args.agents} agents, {args.rounds} rounds, embedder {args.embedder}: wall {wall:.1f} s (profiled), "
          f"rounds {[r['seconds'] for r in sim.rounds]} s, checkpoint {sim.checkpoint_seconds} s, "
          f"{requests} requests")  # fmt: skip
    total = sum(v[2] for v in stats.stats.values())  # type: ignore[attr-defined]
    print(f"\nown CPU time by area (all threads, {total:.1f} s profiled):")
    for name, seconds in sorted(area_split(stats).items(), key=lambda kv: -kv[1]):
        print(f"  {seconds:7.2f} s  {100 * seconds / total:5.1f}%  {name}")
    for key, title in (("tottime", "own time"), ("cumulative", "cumulative time, recagent_gym only")):
        buffer = io.StringIO()
        view = stats
        view.stream = buffer  # type: ignore[attr-defined]
        view.sort_stats(key)
        if key == "cumulative":
            view.print_stats("recagent_gym", args.top)
        else:
            view.print_stats(args.top)
        print(f"\n=== {title} ===")
        print("\n".join(buffer.getvalue().splitlines()[6:]))
    if args.dump:
        stats.dump_stats(args.dump)


if __name__ == "__main__":
    main()
