"""Long-term memory retrieval latency (query vector given), numpy vs faiss, 384-d MiniLM-sized vectors.

    .venv/bin/python benchmarks/bench_memory.py [--sizes 200 2000 20000]

Prints milliseconds per ``retrieve`` for each index; ``memory.index: auto`` switches to faiss only from
``memory.faiss_min_records`` records, where it starts to pay. Not a timed test.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from recagent_gym.memory.config import MemoryConfig
from recagent_gym.memory.record import MemoryRecord
from recagent_gym.memory.stages import LongTermMemory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[200, 2000, 20000])
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    for n in args.sizes:
        emb = rng.standard_normal((n, 384)).astype(np.float32)
        emb /= np.linalg.norm(emb, axis=1, keepdims=True)
        query = emb[0] + 0.1 * rng.standard_normal(384).astype(np.float32)
        query /= np.linalg.norm(query)
        for index in ("numpy", "faiss"):
            memory = LongTermMemory(MemoryConfig(index=index, forget_max_records=10**6))
            memory.add([MemoryRecord(f"m{i}", float(rng.random()), float(i), float(i)) for i in range(n)], emb)
            memory.retrieve(query, n + 1.0, 5)
            repeats = 200 if n <= 2000 else 20
            start = time.perf_counter()
            for _ in range(repeats):
                memory.retrieve(query, n + 1.0, 5)
            ms = (time.perf_counter() - start) / repeats * 1e3
            print(f"records={n:6d} index={index:5s}: {ms:.3f} ms per retrieve")


if __name__ == "__main__":
    main()
