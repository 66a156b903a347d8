"""One text's embedding beside busy Python threads: MiniLM in the caller's process, and in a process of its own.

    python benchmarks/bench_embed_contention.py [--busy 0,1,4] [--calls 20]

torch gives the interpreter lock back on each operation of a forward pass and takes it again after, so in a process
whose other threads keep the lock busy (a simulator round's agents) every operation can wait for it. For each
placement (``in process``: :class:`~recagent_gym.llm.embedder.SentenceEmbedder`; ``own process``:
:class:`~recagent_gym.llm.embedder_process.ProcessEmbedder`, ``llm.embedder_process``) and each number of busy
threads (pure Python loops), prints the median and 90th percentile of ``--calls`` one-text calls (a new text each
time, 1 torch thread, fp32 unless ``--precision``). ``docs/speed.md`` reads these figures; prints figures, not a
timed test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def busy(stop: threading.Event) -> None:
    """Hold the interpreter as a simulator's agent threads do between their requests."""
    total = 0
    while not stop.is_set():
        for i in range(1000):
            total += i


def timed_calls(embedder: Any, calls: int, tag: str) -> list[float]:
    """Seconds of each of ``calls`` one-text calls (each text new)."""
    seconds = []
    for k in range(calls):
        text = f"Alice watched movie {tag}-{k} about a long war and felt it dragged, though the music stayed"
        started = time.perf_counter()
        embedder([text])
        seconds.append(time.perf_counter() - started)
    return seconds


def measure(embedder: Any, busy_threads: int, calls: int, tag: str) -> list[float]:
    stop = threading.Event()
    threads = [threading.Thread(target=busy, args=(stop,), daemon=True) for _ in range(busy_threads)]
    for thread in threads:
        thread.start()
    try:
        return timed_calls(embedder, calls, tag)
    finally:
        stop.set()
        for thread in threads:
            thread.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--busy", default="0,1,4", help="comma-separated numbers of busy Python threads")
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--precision", default="fp32", choices=("fp32", "bf16", "auto"))
    args = parser.parse_args()
    import torch

    from recagent_gym.llm.embedder import SentenceEmbedder
    from recagent_gym.llm.embedder_process import ProcessEmbedder

    counts = [int(n) for n in args.busy.split(",")]
    print(f"torch {torch.__version__}, CPU capability {torch.backends.cpu.get_cpu_capability()}, "
          f"{os.cpu_count()} CPUs, switch interval {1000 * sys.getswitchinterval():g} ms")  # fmt: skip
    placements = {"in process": lambda: SentenceEmbedder(precision=args.precision),
                  "own process": lambda: ProcessEmbedder(precision=args.precision)}  # fmt: skip
    for name, make in placements.items():
        embedder = make()
        try:
            timed_calls(embedder, 2, f"warm-{name}")
            for n in counts:
                seconds = sorted(measure(embedder, n, args.calls, f"{name}-{n}"))
                p90 = seconds[int(0.9 * (len(seconds) - 1))]
                print(f"{name}, {n} busy threads: one text in {1000 * statistics.median(seconds):.1f} ms "
                      f"(median of {len(seconds)}), p90 {1000 * p90:.1f} ms")  # fmt: skip
        finally:
            close = getattr(embedder, "close", None)
            if close is not None:
                close()


if __name__ == "__main__":
    main()
