"""Where a simulator round's requests wait: every request's wait for a slot and its time in service, by priority.

    python benchmarks/probe_round_requests.py --agents 100 --rounds 3
    python benchmarks/probe_round_requests.py --agents 1000 --rounds 2 --set data.dataset=path/to/ml-1m

Runs the ``evaluate efficiency`` point (``simulate_paper``, the local server at ``--latency-ms``, one key at
``--concurrency``, every agent active) and records, for each LLM request, when it asked for a slot, when it got one
and when its answer was in (:class:`~recagent_gym.llm.endpoints.EndpointPool`'s slot), with its priority
(:mod:`recagent_gym.llm.priority`). Prints per round: the requests, their mean wait per priority, the service time
(median, 99th percentile: the server's latency plus what the process adds), when the take-action batch ended and
the agents' chains started and ended, the *stalls* (moments when at least half
the slots' requests ended late together: the whole process stopped), the calls to the shared embedder by priority
(texts per call, time waited for the vectors), and the garbage collector's pauses during the rounds (count, total,
longest per generation). ``docs/speed.md`` reads these figures; prints figures, not a timed test.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

Request = tuple[int, float, float, float]
"""Priority; when the request asked for a slot, got one, and was answered (``time.perf_counter``)."""


def record_requests(log: list[Request]) -> None:
    """Every slot of every backend's pool from now on appends its request to ``log``."""
    from recagent_gym.llm import endpoints

    original = endpoints.EndpointPool.slot

    @asynccontextmanager
    async def slot(self: Any, avoid: Any = None, priority: int = 0) -> AsyncIterator[Any]:
        asked = time.perf_counter()
        async with original(self, avoid, priority) as endpoint:
            got = time.perf_counter()
            try:
                yield endpoint
            finally:
                log.append((priority, asked, got, time.perf_counter()))

    endpoints.EndpointPool.slot = slot  # type: ignore[method-assign]


def record_collections(pauses: list[tuple[int, float]]) -> None:
    """The garbage collector's pauses from now on, as ``(generation, seconds)``."""
    started = [0.0]

    def note(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            pauses.append((int(info["generation"]), time.perf_counter() - started[0]))

    gc.callbacks.append(note)


Phase = tuple[str, float, float]
"""``take-action`` (the round's batched question) or ``chain`` (one agent's pages and its chain's end); start, end."""


def record_phases(log: list[Phase]) -> None:
    """The take-action batch and every agent's chain from now on, appended to ``log``."""
    from recagent_gym.runs.simulator import round_modes, simulation

    def timed(name: str, function: Any) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                log.append((name, start, time.perf_counter()))

        return run

    choose = simulation.Simulation._choose_actions
    simulation.Simulation._choose_actions = timed("take-action", choose)  # type: ignore[method-assign]
    round_modes.run_chain = timed("chain", round_modes.run_chain)


Embedding = tuple[int, float, float, int]
"""Priority of the calling context; when a call to the shared embedder asked for its vectors, and got them; texts."""


def record_embeddings(log: list[Embedding]) -> None:
    """Every call to the shared embedder (:class:`~recagent_gym.llm.shared_embedder.CachedEmbedder`) from now on, with
    the priority of the context that made it (a chain's retrieval query at 2, a chain's end at 1, work ahead at 0)."""
    from recagent_gym.llm import shared_embedder as embedder
    from recagent_gym.llm.priority import REQUEST_PRIORITY

    original = embedder.CachedEmbedder.__call__

    def call(self: Any, texts: Any) -> Any:
        asked = time.perf_counter()
        try:
            return original(self, texts)
        finally:
            log.append((REQUEST_PRIORITY.get(), asked, time.perf_counter(), len(texts)))

    embedder.CachedEmbedder.__call__ = call  # type: ignore[method-assign]


def summarise_embeddings(calls: list[Embedding], bounds: list[float]) -> None:
    """Per round and priority: the calls to the shared embedder and how long they waited for their vectors (the
    model's time on their texts included)."""
    for k in range(len(bounds) - 1):
        waits: dict[int, list[float]] = defaultdict(list)
        sizes: dict[int, list[int]] = defaultdict(list)
        for priority, asked, got, n in calls:
            if bounds[k] <= asked < bounds[k + 1]:
                waits[priority].append(got - asked)
                sizes[priority].append(n)
        print(f"round {k + 1}: embedder calls " + ", ".join(
            f"p{p}: {len(w)} of {statistics.fmean(sizes[p]):.1f} texts waited {statistics.fmean(w):.3f} s "
            f"(max {max(w):.2f})"
            for p, w in sorted(waits.items(), reverse=True)
        ))  # fmt: skip


def summarise_phases(phases: list[Phase], bounds: list[float]) -> None:
    """Per round, seconds from its start: when the take-action batch ended, when the chains started, when the last
    one ended (a round is its longest chain once the batch is in)."""
    for k in range(len(bounds) - 1):
        start = bounds[k]
        inside = [(name, a - start, b - start) for name, a, b in phases if bounds[k] <= a < bounds[k + 1]]
        chosen = [b for name, _, b in inside if name == "take-action"]
        chains = [(a, b) for name, a, b in inside if name == "chain"]
        if not chosen or not chains:
            continue
        print(f"round {k + 1}: take-action batch in at {chosen[0]:.2f} s; {len(chains)} chains start "
              f"{min(a for a, _ in chains):.2f}-{max(a for a, _ in chains):.2f} s, the last ends at "
              f"{max(b for _, b in chains):.2f} s (longest {max(b - a for a, b in chains):.2f} s)")  # fmt: skip


def stalls(requests: list[Request], latency: float, slots: int) -> int:
    """Moments (0.1 s apart) at which at least half of ``slots`` requests ended over ``latency`` + 0.1 s after
    taking their slot: the process, not the server, held them."""
    late = Counter(round(end, 1) for _, _, got, end in requests if end - got > latency + 0.1)
    return sum(1 for count in late.values() if count >= slots // 2)


def summarise(requests: list[Request], bounds: list[float], latency: float, slots: int) -> None:
    for k in range(len(bounds) - 1):
        inside = [r for r in requests if bounds[k] <= r[1] < bounds[k + 1]]
        if not inside:
            continue
        service = sorted(end - got for _, _, got, end in inside)
        waits: dict[int, list[float]] = defaultdict(list)
        for priority, asked, got, _ in inside:
            waits[priority].append(got - asked)
        by_priority = ", ".join(
            f"p{p}: {len(w)} waited {statistics.fmean(w):.3f} s" for p, w in sorted(waits.items(), reverse=True)
        )
        median, p99 = statistics.median(service), service[int(0.99 * (len(service) - 1))]
        print(f"round {k + 1}: {len(inside)} requests ({by_priority}); service median {median:.3f} s, "
              f"p99 {p99:.3f} s; stalls {stalls(inside, latency, slots)}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency-ms", type=float, default=300.0)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--embedder", choices=("minilm", "hashing"), default="minilm")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()

    from recagent_gym.runs.config import load_config
    from recagent_gym.runs.evaluation import efficiency
    from recagent_gym.runs.simulator import runner

    latency = args.latency_ms / 1000.0
    config = load_config("simulate_paper", args.overrides)
    embedder = efficiency.make_embedder(args.embedder, config.llm.embedder_precision,
                                        process=config.llm.embedder_process)  # fmt: skip
    requests: list[Request] = []
    pauses: list[tuple[int, float]] = []
    phases: list[Phase] = []
    record_requests(requests)
    record_phases(phases)
    embeddings: list[Embedding] = []
    record_embeddings(embeddings)
    server = efficiency.ActiveAgentServer(
        latency_s=latency, per_key_concurrency=args.concurrency, choice="random", reply=None, seed=0
    )
    with tempfile.TemporaryDirectory() as tmp, server:
        point = efficiency.simulation_config(
            config, agents=args.agents, rounds=args.rounds, backend="local-server", base_url=server.base_url, keys=1,
            concurrency=args.concurrency, all_active=True,
        )  # fmt: skip
        sim = runner.start(point, Path(tmp) / "run", embedder=embedder)
        bounds: list[float] = []
        run_round = sim.run_round

        def timed_round() -> None:
            bounds.append(time.perf_counter())
            run_round()

        sim.run_round = timed_round  # type: ignore[method-assign]
        record_collections(pauses)
        try:
            sim.run()
        finally:
            bounds.append(time.perf_counter())
            gc.callbacks.clear()
            sim.close()
    print(f"{args.agents} agents, {args.rounds} rounds at {args.latency_ms:g} ms, concurrency {args.concurrency}: "
          f"rounds {[r['seconds'] for r in sim.rounds]} s")  # fmt: skip
    summarise(requests, bounds, latency, args.concurrency)
    summarise_phases(phases, bounds)
    summarise_embeddings(embeddings, bounds)
    by_generation: dict[int, list[float]] = defaultdict(list)
    for generation, pause in pauses:
        by_generation[generation].append(pause)
    for generation, times in sorted(by_generation.items()):
        print(f"garbage collection, generation {generation}: {len(times)} pauses, {sum(times):.2f} s in all, "
              f"longest {max(times):.3f} s")  # fmt: skip


if __name__ == "__main__":
    main()
