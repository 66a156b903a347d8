"""Embedded Gemma 3 270M: latency of page decisions (cold vs cached prefix), token throughput, batched scoring.

    .venv/bin/python benchmarks/bench_llm_embedded.py [--threads 2] [--repeats 5] [--decoding canonical|batched]
        [--candidates 50]

The last section scores one user's candidates after a shared few-shot history, as the LLM agents' Yes/No item score
does, with canonical segments starting where the prompt's last two lines begin (``llm.canonical_tail_lines: 2``, the
default) and at block starts only (``0``): milliseconds per candidate, and how far the two segmentations' scores lie
apart beside the spread of the scores over the candidates; then the default item score's cost (title continuation:
each candidate title's log-likelihood, up to its year, after the user's list).

Prints figures; not a timed test. Prompts are synthetic (no dataset needed) and sized like the agent's.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from recagent_gym.llm.config import LLMConfig
from recagent_gym.llm.embedded import EmbeddedLLM
from recagent_gym.prompts import title_continuation

GENRES = ["Drama", "Comedy", "Thriller", "Sci-Fi", "Romance", "Animation", "Horror", "Documentary"]
WORDS = [
    "night",
    "river",
    "storm",
    "city",
    "garden",
    "letter",
    "summer",
    "glass",
    "shadow",
    "island",
    "mirror",
    "winter",
    "road",
    "crown",
]


def _title(rng: np.random.Generator) -> str:
    words = rng.choice(WORDS, size=int(rng.integers(2, 4)), replace=False)
    genres = rng.choice(GENRES, size=2, replace=False)
    return f"The {' '.join(w.title() for w in words)} ({int(rng.integers(1960, 2020))}) [{', '.join(genres)}]"


def profile_prefix(rng: np.random.Generator, n_memories: int) -> str:
    memories = "\n".join(
        f"- I watched {_title(rng)} and felt it was {rng.choice(['moving', 'slow', 'funny', 'tense'])}."
        for _ in range(n_memories)
    )
    return (
        "You are Ana, 34, a nurse who likes quiet evenings. Traits: curious, patient. Interests: Drama, Sci-Fi.\n"
        "You browse a movie recommender. Decide what to do with the page shown.\n"
        f"What you remember:\n{memories}\n"
    )


def page_text(rng: np.random.Generator) -> str:
    lines = "\n".join(f"{i + 1}. {_title(rng)}" for i in range(5))
    return f"The page shows:\n{lines}\nYour decision:"


DECISION_OPTIONS = [" watch 1", " watch 2", " watch 3", " watch 4", " watch 5", " next page", " leave"]


def fewshot_prompts(rng: np.random.Generator, n_history: int = 20, n_candidates: int = 5) -> list[str]:
    shots = "\n".join(f"Movie: {_title(rng)}\nWatched: {'Yes' if k % 2 == 0 else 'No'}" for k in range(n_history))
    return [f"{shots}\nMovie: {_title(rng)}\nWatched:" for _ in range(n_candidates)]


def timed(fn) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """Wall and CPU seconds (all threads of this process): CPU is the figure to trust on a shared machine."""
    start, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - start, time.process_time() - cpu


def summary(runs: list[tuple[float, float]]) -> str:
    wall = [w for w, _ in runs]
    cpu = [c for _, c in runs]
    return f"median wall {statistics.median(wall):.3f} s (min {min(wall):.3f}), cpu {statistics.median(cpu):.3f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--memories", type=int, default=14, help="memory lines in the prefix (~600 tokens at 14)")
    parser.add_argument("--decoding", choices=["canonical", "batched"], default="canonical", help="llm.decoding")
    parser.add_argument("--candidates", type=int, default=50, help="candidates in the tail-segment section")
    args = parser.parse_args()
    rng = np.random.default_rng(0)

    llm = EmbeddedLLM(LLMConfig(n_threads=args.threads, decoding=args.decoding))
    rt = llm._rt  # the benchmark drops the prefix cache on purpose for the cold figures
    print(f"model {llm.name}, {args.threads} threads, {args.decoding} decoding, load {llm.load_s:.2f} s")
    prefix = profile_prefix(rng, args.memories)
    prompt = prefix + page_text(rng)
    n_tokens = len(rt.tokenize(prompt))
    llm.choose([prompt], [DECISION_OPTIONS])  # warm-up (graph allocation)

    cold, cached = [], []
    for _ in range(args.repeats):
        prompt = prefix + page_text(rng)
        rt.reset()
        cold.append(timed(lambda p=prompt: llm.choose([p], [DECISION_OPTIONS])))
        prompt = prefix + page_text(rng)  # same profile and memory, new page
        cached.append(timed(lambda p=prompt: llm.choose([p], [DECISION_OPTIONS])))
    print(f"page decision ({n_tokens} prompt tokens, {len(DECISION_OPTIONS)} options scored):")
    print(f"  cold prefix   {summary(cold)}")
    print(f"  cached prefix {summary(cached)}")

    grammar_llm_cfg = LLMConfig(n_threads=args.threads, choose_method="grammar", decoding=args.decoding)
    grammar_llm = EmbeddedLLM(grammar_llm_cfg)
    g_prompts = [prefix + page_text(rng) for _ in range(3)]
    g_times = [timed(lambda p=p: grammar_llm.choose([p], [DECISION_OPTIONS])) for p in g_prompts]
    print(f"  grammar-constrained choice (prefix cached after the first) {summary(g_times)}")
    grammar_llm.close()

    rt.reset()
    long_prompt = prefix + page_text(rng)
    prefill, prefill_cpu = timed(lambda: llm.generate([long_prompt], max_tokens=1))
    print(f"prompt throughput: {n_tokens / prefill:.0f} tokens/s wall, {n_tokens / prefill_cpu:.0f} per cpu-s")
    gen, gen_cpu = timed(
        lambda: llm.generate(["Write a short review of a film:"], max_tokens=64, temperature=0.8, seed=1)
    )
    one = llm.generate(["Write a short review of a film:"], max_tokens=64, temperature=0.8, seed=1)[0]
    n_gen = one.usage.completion_tokens
    print(f"generation, 1 prompt: {n_gen / gen:.1f} tokens/s wall, {n_gen / gen_cpu:.1f} per cpu-s")
    batch = [f"Write a short review of film number {i}:" for i in range(8)]
    outs: list = []
    elapsed, elapsed_cpu = timed(lambda: outs.extend(llm.generate(batch, max_tokens=64, temperature=0.8, seed=1)))
    n_out = sum(o.usage.completion_tokens for o in outs)
    print(f"generation, 8 prompts batched: {n_out / elapsed:.1f} tokens/s wall, {n_out / elapsed_cpu:.1f} per cpu-s")

    fs_cold, fs_cached = [], []
    for _ in range(args.repeats):
        prompts = fewshot_prompts(rng)
        rt.reset()
        fs_cold.append(timed(lambda p=prompts: llm.choose(p, [[" Yes", " No"]] * len(p))))
        fresh = [p.rsplit("Movie:", 1)[0] + f"Movie: {_title(rng)}\nWatched:" for p in prompts]
        fs_cached.append(timed(lambda p=fresh: llm.choose(p, [[" Yes", " No"]] * len(p))))
    n_fs = len(rt.tokenize(prompts[0]))
    print(f"few-shot Yes/No, 5 candidates x 2 options after a shared {n_fs}-token history, one call:")
    print(f"  cold   {summary(fs_cold)}")
    print(f"  cached {summary(fs_cached)} (history resident from the previous call)")
    print(f"tokens decoded {llm.stats['tokens_decoded']}, reused from the prefix cache {llm.stats['tokens_reused']}")
    llm.close()
    if args.decoding == "canonical":
        tail_segments(args.threads, args.candidates, rng)
        continuation_cost(args.threads, args.candidates, rng)


def tail_segments(threads: int, n_candidates: int, rng: np.random.Generator) -> None:
    """One user's candidates scored one call each after a shared history, with and without the tail's segment."""
    shots = "\n".join(f"Movie: {_title(rng)}\nWatched: {'Yes' if k % 2 == 0 else 'No'}" for k in range(20))
    prompts = [f"{shots}\nMovie: {_title(rng)}\nWatched:" for _ in range(n_candidates + 1)]
    scores: dict[int, np.ndarray] = {}
    print(f"item scores, {n_candidates} candidates of one user after a shared {20}-example history, one call each:")
    for tail in (2, 0):
        llm = EmbeddedLLM(LLMConfig(n_threads=threads, canonical_tail_lines=tail))
        llm.choose(prompts[:1], [[" Yes", " No"]])  # the history resident, as after a user's first candidate
        values: list[float] = []

        def run(llm: EmbeddedLLM = llm, values: list[float] = values) -> None:
            for p in prompts[1:]:
                (choice,) = llm.choose([p], [[" Yes", " No"]])
                values.append(choice.scores[0] - choice.scores[1])  # type: ignore[index]

        wall, cpu = timed(run)
        scores[tail] = np.asarray(values)
        print(f"  canonical_tail_lines {tail}: {1000 * wall / n_candidates:.1f} ms per candidate wall, "
              f"{1000 * cpu / n_candidates:.1f} cpu-ms")  # fmt: skip
        llm.close()
    diff = np.abs(scores[2] - scores[0])
    corr = float(np.corrcoef(scores[2], scores[0])[0, 1]) if n_candidates > 1 else float("nan")
    print(f"  logp(Yes) - logp(No): spread over candidates (sd) {scores[0].std():.3f}; the two segmentations differ "
          f"by {diff.mean():.3f} on average (max {diff.max():.3f}), correlation {corr:.2f}")  # fmt: skip


def continuation_cost(threads: int, n_candidates: int, rng: np.random.Generator) -> None:
    """The default item score's cost: every candidate title's log-likelihood after a user's list, in one call; beside
    it the whole line scored (``" Title (1995)\\n"``, the year's digits too, the score before dc19553)."""
    titles = [_title(rng).rsplit(" [", 1)[0] for _ in range(n_candidates)]  # the agents' line: ``Title (year)``
    prompt = title_continuation.build(name="Ana", shots=title_continuation.build_shots(titles[:10]))
    llm = EmbeddedLLM(LLMConfig(n_threads=threads))
    llm.choose([prompt], [[title_continuation.option(titles[0])]])  # warm-up (graph allocation)
    print(f"title continuation (the default item score), {n_candidates} titles after a 10-title list, one call:")
    scores = {}
    for label, options in (("up to the year", [title_continuation.option(t) for t in titles]),
                           ("whole line, year too", [f" {t}\n" for t in titles])):  # fmt: skip
        llm.forget_prefixes()
        out: list = []
        wall, cpu = timed(lambda o=options, out=out: out.extend(llm.choose([prompt], [o])))
        scores[label] = np.asarray(out[0].scores, dtype=float)
        print(f"  {label}: {1000 * wall / n_candidates:.1f} ms per title wall, {1000 * cpu / n_candidates:.1f} cpu-ms")
    a, b = scores.values()
    print(f"  the two scores' correlation over the titles: {np.corrcoef(a, b)[0, 1]:.3f}")
    llm.close()


if __name__ == "__main__":
    main()
