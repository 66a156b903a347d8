"""What the embedded model's option scores depend on: thread count, batch composition, resident prompt prefixes.

    .venv/bin/python benchmarks/probe_embedded_invariance.py [--threads 1,2] [--decoding canonical,batched]

For three short prompts with the options " Yes", " No", " Maybe", the log-likelihoods ``choose`` returns are compared
bitwise: each prompt scored alone vs the three in one call (batch composition), that call cold vs repeated with its
prefixes resident in the KV cache (the prefix cache), and all of it at each thread count. A figure of the LLM users
repeats from one run to the next only if the sequence of calls does; this says which parts of that sequence matter,
for each ``llm.decoding``: ``canonical`` (the default) must show every comparison equal. Prints figures; not a timed
test.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from recagent_gym.llm.config import LLMConfig
from recagent_gym.llm.embedded import EmbeddedLLM

PROMPTS = [
    "Ann likes horror and sci-fi films. She is shown: Alien (1979), Heat (1995), Toy Story (1995). "
    "Would she watch Alien? Answer:",
    "Ben prefers comedies and romance. Page: Notting Hill (1999), Seven (1995), Up (2009). "
    "Would he watch Seven? Answer:",
    "Cid watches documentaries. Page: Baraka (1992), Speed (1994), Fargo (1996). Would he watch Fargo? Answer:",
]
OPTIONS = [" Yes", " No", " Maybe"]

Scores = list[tuple[float, ...]]


def largest_gap(a: Scores, b: Scores) -> float:
    return max(abs(x - y) for row_a, row_b in zip(a, b, strict=True) for x, y in zip(row_a, row_b, strict=True))


def scores(llm: EmbeddedLLM, prompts: Sequence[str]) -> Scores:
    return [tuple(c.scores or ()) for c in llm.choose(list(prompts), [OPTIONS] * len(prompts))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", default="1,2", help="llama.cpp thread counts to compare")
    parser.add_argument("--decoding", default="canonical,batched", help="llm.decoding modes to probe")
    args = parser.parse_args()
    for decoding in args.decoding.split(","):
        runs: dict[int, tuple[Scores, Scores, Scores]] = {}
        for threads in (int(t) for t in args.threads.split(",")):
            llm = EmbeddedLLM(LLMConfig(n_threads=threads, decoding=decoding))  # type: ignore[arg-type]
            alone = [scores(llm, [p])[0] for p in PROMPTS]
            llm.forget_prefixes()  # cold prefix cache for the batched call
            batched = scores(llm, PROMPTS)
            warm = scores(llm, PROMPTS)  # the same call with its prefixes now resident
            llm.close()
            runs[threads] = (alone, batched, warm)
            print(f"{decoding}, {threads} thread(s): alone vs batched equal {alone == batched} (largest gap "
                  f"{largest_gap(alone, batched):.4f} nats); batched cold vs warm prefixes equal {batched == warm} "
                  f"(largest gap {largest_gap(batched, warm):.4f})")  # fmt: skip
        first, *others = runs
        for t in others:
            same = runs[first] == runs[t]
            print(f"{decoding}, {first} vs {t} threads: every score bitwise equal {same} (largest gap "
                  f"{max(largest_gap(a, b) for a, b in zip(runs[first], runs[t], strict=True)):.4f})")  # fmt: skip


if __name__ == "__main__":
    main()
