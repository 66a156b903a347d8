"""Embedder paths judged by what memory does with their vectors, against fp32 MiniLM on a recorded run.

    python benchmarks/bench_embed_agreement.py --agents 100 --rounds 3 [--repeats 3] [--paths fp32,bf16]

Bit identity is not a property a path can keep across machines (another instruction set gives other last bits even
in fp32), so a path is judged by agreement instead. The benchmark runs the ``evaluate efficiency`` point at zero
latency (``simulate_paper``, every agent active, one key at concurrency 64, fp32 MiniLM) and records

- every **retrieval**: the query and the long-term records it ranked (contents, importance, last access, time);
- every **enhancement comparison**: a new short-term record against the records it met (similarity >=
  ``memory.enhance_threshold`` enhances);
- every text the model embedded, per round.

Each path then re-embeds the recorded texts and replays the memory's own scoring (``LongTermMemory.scored``, the
same relevance + recency + importance ranking) and threshold. Printed per path: queries whose top-5 set (and the
agents' top-``user.memory_in_prompt``) equals fp32's, and whose order does too; enhancement pairs fp32 makes that
the path keeps, and the pairs it adds (spurious); and the time per round when each round's texts go to the model in
one call (1 thread, median of ``--repeats``). The accepted paths keep the top-5 set of >= 98% of the queries and >=
99% of the pairs; the fastest of them is the one to use (``llm.embedder_precision``).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

MIN_TOP5_SETS = 0.98
MIN_PAIRS_KEPT = 0.99


@dataclass
class Recording:
    """What a run asked of its embedder and did with the vectors."""

    rounds: list[list[str]] = field(default_factory=list)
    retrievals: list[tuple[str, list[Any], float]] = field(default_factory=list)
    """(query, the long-term records as they were before the retrieval, time)."""
    comparisons: list[tuple[str, list[str]]] = field(default_factory=list)
    """(new short-term record, the short-term records it was compared with)."""
    memory_config: Any = None
    top_n: int = 3


def record_run(agents: int, rounds: int) -> Recording:
    """A zero-latency ``simulate_paper`` run with fp32 MiniLM, recorded (see the module docstring)."""
    from recagent_gym.llm.embedder import SentenceEmbedder
    from recagent_gym.memory import agent_memory, stages
    from recagent_gym.runs.config import load_config
    from recagent_gym.runs.evaluation import efficiency
    from recagent_gym.runs.simulator import runner

    rec = Recording()
    seen: list[str] = []
    lock = threading.Lock()

    class Recorded(SentenceEmbedder):
        def __call__(self, texts: Sequence[str], *, show_progress: bool = False) -> np.ndarray:
            with lock:
                seen.extend(texts)
            return super().__call__(texts, show_progress=show_progress)

    original_retrieve, original_add = agent_memory.AgentMemory.retrieve, stages.ShortTermMemory.add

    def retrieve(self: Any, query: str | None, time_h: float, top_n: int | None = None, **kw: Any) -> Any:
        if self.needs_query_vector(query):
            with lock:
                rec.retrievals.append((str(query), [replace(r) for r in self.long_term.records], float(time_h)))
        return original_retrieve(self, query, time_h, top_n, **kw)

    def add(self: Any, record: Any, embedding: np.ndarray) -> Any:
        if self.records:
            with lock:
                rec.comparisons.append((record.content, [r.content for r in self.records]))
        return original_add(self, record, embedding)

    config = load_config("simulate_paper", [])
    rec.memory_config, rec.top_n = config.memory, config.user.memory_in_prompt
    agent_memory.AgentMemory.retrieve, stages.ShortTermMemory.add = retrieve, add  # type: ignore[method-assign]
    try:
        with (
            tempfile.TemporaryDirectory() as tmp,
            efficiency.ActiveAgentServer(latency_s=0.0, per_key_concurrency=64, choice="random", reply=None, seed=0)
            as server,
        ):  # fmt: skip
            point = efficiency.simulation_config(
                config, agents=agents, rounds=rounds, backend="local-server", base_url=server.base_url, keys=1,
                concurrency=64, all_active=True,
            )  # fmt: skip
            sim = runner.start(point, Path(tmp) / "run", embedder=Recorded(precision="fp32"))
            try:
                for _ in range(rounds):
                    before = len(seen)
                    sim.run(rounds=1)
                    rec.rounds.append(seen[before:])
            finally:
                sim.close()
    finally:
        agent_memory.AgentMemory.retrieve, stages.ShortTermMemory.add = original_retrieve, original_add  # type: ignore[method-assign]
    return rec


def vectors_of(embed: Callable[[Sequence[str]], np.ndarray], rec: Recording) -> dict[str, np.ndarray]:
    """Every text the recorded retrievals and comparisons read, embedded by ``embed`` (one call)."""
    texts: set[str] = set()
    for query, records, _ in rec.retrievals:
        texts.add(query)
        texts.update(r.content for r in records)
    for new, old in rec.comparisons:
        texts.add(new)
        texts.update(old)
    ordered = sorted(texts)
    return dict(zip(ordered, embed(ordered), strict=True))


def rankings(vectors: dict[str, np.ndarray], rec: Recording) -> list[list[int]]:
    """Each recorded retrieval's long-term records in the memory's own order (best first)."""
    from recagent_gym.memory.stages import LongTermMemory

    out = []
    for query, records, time_h in rec.retrievals:
        memory = LongTermMemory(rec.memory_config)
        memory.set_state(records, np.stack([vectors[r.content] for r in records]))
        idx, scores = memory.scored(vectors[query], time_h)
        out.append([int(idx[o]) for o in np.lexsort((idx, -scores))])
    return out


def enhancement_pairs(vectors: dict[str, np.ndarray], rec: Recording) -> set[tuple[int, int]]:
    """(comparison, record) pairs at or above the enhancement threshold."""
    threshold = rec.memory_config.enhance_threshold
    pairs = set()
    for k, (new, old) in enumerate(rec.comparisons):
        sims = np.stack([vectors[t] for t in old]) @ vectors[new]
        pairs.update((k, int(i)) for i in np.flatnonzero(sims >= threshold))
    return pairs


def round_seconds(embed: Callable[[Sequence[str]], np.ndarray], rounds: list[list[str]], repeats: int) -> float:
    """Median wall seconds of one call per round with that round's texts."""
    embed(rounds[0])  # warm-up
    walls = []
    for _ in range(repeats):
        for texts in rounds:
            start = time.perf_counter()
            embed(texts)
            walls.append(time.perf_counter() - start)
    return float(np.median(walls))


def score_path(name: str, embed: Any, rec: Recording, reference: dict[str, Any], repeats: int) -> dict[str, Any]:
    vectors = vectors_of(embed, rec)
    ranks, pairs = rankings(vectors, rec), enhancement_pairs(vectors, rec)
    ref_ranks, ref_pairs = reference.get("ranks", ranks), reference.get("pairs", pairs)
    row: dict[str, Any] = {"path": name, "queries": len(ranks), "pairs_ref": len(ref_pairs)}
    for k in sorted({5, rec.top_n}):
        row[f"top{k}_sets"] = sum(set(a[:k]) == set(b[:k]) for a, b in zip(ranks, ref_ranks, strict=True))
        row[f"top{k}_order"] = sum(a[:k] == b[:k] for a, b in zip(ranks, ref_ranks, strict=True))
    row["pairs_kept"], row["pairs_spurious"] = len(pairs & ref_pairs), len(pairs - ref_pairs)
    row["s_per_round"] = round_seconds(embed, rec.rounds, repeats)
    row["ranks"], row["pairs"] = ranks, pairs
    share = row["top5_sets"] / max(row["queries"], 1), row["pairs_kept"] / max(row["pairs_ref"], 1)
    row["accepted"] = share[0] >= MIN_TOP5_SETS and share[1] >= MIN_PAIRS_KEPT
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--paths", default="fp32,bf16", help="comma-separated; fp32 (the reference) always runs first")
    args = parser.parse_args()

    import torch

    from recagent_gym.llm.embedder import SentenceEmbedder, cpu_capability

    rec = record_run(args.agents, args.rounds)
    texts = sum(len(r) for r in rec.rounds)
    print(f"recorded: {args.agents} agents, {args.rounds} rounds of simulate_paper at zero latency (fp32 MiniLM): "
          f"{len(rec.retrievals)} retrievals, {len(rec.comparisons)} enhancement comparisons, {texts} texts embedded "
          f"(per round {', '.join(str(len(r)) for r in rec.rounds)}); torch {torch.__version__}, CPU capability "
          f"{cpu_capability()}, 1 thread")  # fmt: skip
    reference: dict[str, Any] = {}
    rows = []
    paths = ["fp32"] + [p for p in args.paths.split(",") if p and p != "fp32"]
    for name in paths:
        row = score_path(name, SentenceEmbedder(n_threads=1, batch_size=100_000, precision=name), rec, reference,
                         args.repeats)  # fmt: skip
        reference = reference or {"ranks": row["ranks"], "pairs": row["pairs"]}
        rows.append(row)
        n, k = row["queries"], rec.top_n
        print(f"{name}: top-5 sets equal {row['top5_sets']}/{n}, order {row['top5_order']}/{n}; top-{k} (the "
              f"agents' prompt) sets {row[f'top{k}_sets']}/{n}, order {row[f'top{k}_order']}/{n}; enhancement pairs "
              f"kept {row['pairs_kept']}/{row['pairs_ref']}, spurious {row['pairs_spurious']}; "
              f"{row['s_per_round']:.3f} s per round (one call per round); "
              f"{'accepted' if row['accepted'] else 'rejected'}")  # fmt: skip
    accepted = [r for r in rows if r["accepted"]]
    if not accepted:
        print("no path accepted (a run too short to retrieve anything accepts none: more agents or rounds)")
        return
    best = min(accepted, key=lambda r: r["s_per_round"])
    print(f"fastest accepted path: {best['path']} ({best['s_per_round']:.3f} s per round; thresholds: top-5 sets >= "
          f"{MIN_TOP5_SETS:.0%} of queries, enhancement pairs kept >= {MIN_PAIRS_KEPT:.0%})")  # fmt: skip


if __name__ == "__main__":
    main()
