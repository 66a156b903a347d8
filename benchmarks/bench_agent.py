"""Benchmark of the LLM user agent on the embedded model and the bundled data (issue 4 and issue 9's agent part).

Measures, for the default few-shot strategy:
  1. page decisions (single user per call): LLM calls and tokens per decision, latency, the action distribution,
     and how often watched items match the user's interests (top genres) against a random pick from the same pages;
  2. latency per decision when 4 users' decisions go to the backend as one batch;
  3. issue 9's personalization check of the scorer: discrimination (1, b) with each user's held-out last item
     among ``b`` unseen uniform negatives, scored with the user's own history and with another random user's.

Pages come from a noisy popularity recommender (items drawn with probability proportional to popularity among
those the user has not rated), the kind of page an untrained policy shows.

    .venv/bin/python benchmarks/bench_agent.py --decisions 200 --threads 2
"""

from __future__ import annotations

import argparse
import collections
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from recagent_gym.data.load import load_dataset
from recagent_gym.data.schema import Dataset
from recagent_gym.llm.config import LLMConfig
from recagent_gym.llm.embedded import EmbeddedLLM
from recagent_gym.llm.embedder import SentenceEmbedder
from recagent_gym.runs.config import Config
from recagent_gym.users.agent import LLMUserModel
from recagent_gym.users.protocol import Action, Context, Page


@dataclass
class Args:
    decisions: int
    batch_decisions: int
    page_size: int
    users: int
    check_users: int
    negatives: int
    threads: int
    seed: int
    min_history: int
    memory: bool


def parse_args() -> Args:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--decisions", type=int, default=200, help="single-user page decisions")
    p.add_argument("--batch-decisions", type=int, default=40, help="decisions made in batches of 4 users")
    p.add_argument("--page-size", type=int, default=5)
    p.add_argument("--users", type=int, default=40, help="users sampled for the decisions")
    p.add_argument("--check-users", type=int, default=40, help="users in the personalization check")
    p.add_argument("--negatives", type=int, default=5, help="b of the (1, b) discrimination check")
    p.add_argument("--threads", type=int, default=2, help="llama.cpp threads")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--min-history", type=int, default=20)
    p.add_argument("--memory", action="store_true", help="use the paper's memory (default: none, to time decisions)")
    return Args(**{k.replace("-", "_"): v for k, v in vars(p.parse_args()).items()})


def make_model(dataset: Dataset, llm: EmbeddedLLM, embedder: SentenceEmbedder, args: Args) -> LLMUserModel:
    config = Config.model_validate(
        {
            "llm": {"n_threads": args.threads},
            "memory": {"implementation": "recagent" if args.memory else "none"},
            "user": {"write_feelings": False},
        }
    )
    return LLMUserModel(dataset, config.user, llm, embedder, memory=config.memory, llm_backend=config.llm.backend)


def draw_page(dataset: Dataset, seen: set[int], pop: np.ndarray, size: int, rng: np.random.Generator) -> Page:
    weights = pop.astype(float) + 1.0
    weights[list(seen)] = 0.0
    items = rng.choice(dataset.n_items, size=size, replace=False, p=weights / weights.sum())
    return Page(items=tuple(int(i) for i in items))


def matches(dataset: Dataset, model: LLMUserModel, user: int, item: int) -> bool:
    return bool(set(dataset.items["genres"].iat[item]) & set(model.profiles[user].interests))


def bench_decisions(model: LLMUserModel, users: list[int], args: Args, rng: np.random.Generator) -> None:
    dataset, pop = model.dataset, model.popularity
    actions: collections.Counter[str] = collections.Counter()
    calls, prompt_tokens, latency = [], [], []
    watched_match, random_match = [], []
    done, k = 0, 0
    while done < args.decisions:
        user = users[k % len(users)]
        k += 1
        session_rng = np.random.default_rng([args.seed, 1, k])
        model.start_session(user, session_rng)
        seen = set(model.history(user))
        for step in range(10):
            page = draw_page(dataset, seen, pop, args.page_size, session_rng)
            started = time.perf_counter()
            r = model.respond(page, Context(user_id=user, step=step, time_h=float(k)), session_rng)
            latency.append(time.perf_counter() - started)
            done += 1
            actions[r.action.name] += 1
            calls.append(r.usage.calls)
            prompt_tokens.append(r.usage.prompt_tokens)
            if r.action == Action.WATCH:
                seen.add(r.item)
                watched_match.append(matches(dataset, model, user, r.item))
                random_match.append(np.mean([matches(dataset, model, user, i) for i in page.items]))
            if r.action == Action.LEAVE or done >= args.decisions:
                break
        model.end_sessions([user])
        model.write_ended()
    n = sum(actions.values())
    print(f"\n== {n} single-user page decisions ({len(users)} users, pages of {args.page_size}) ==")
    print("actions: " + ", ".join(f"{a} {c} ({c / n:.0%})" for a, c in sorted(actions.items())))
    print(
        f"LLM prompts per decision: {np.mean(calls):.2f} (in 1 batched choose call); "
        f"prompt tokens per decision: {np.mean(prompt_tokens):.0f}"
    )
    print(
        f"latency per decision: mean {np.mean(latency):.2f} s, median {np.median(latency):.2f} s, "
        f"p90 {np.quantile(latency, 0.9):.2f} s"
    )
    if watched_match:
        w, rnd = float(np.mean(watched_match)), float(np.mean(random_match))
        se = float(np.std(watched_match) / np.sqrt(len(watched_match)))
        print(
            f"watched items matching the user's interests: {w:.3f} ± {se:.3f} (n={len(watched_match)}) vs "
            f"random pick from the same pages {rnd:.3f} (ratio {w / max(rnd, 1e-9):.2f})"
        )
    print(f"agent fallbacks: {model.fallbacks}")


def bench_batched(model: LLMUserModel, users: list[int], args: Args) -> None:
    dataset, pop = model.dataset, model.popularity
    latency = []
    done, k = 0, 0
    while done < args.batch_decisions:
        group = [users[(4 * k + j) % len(users)] for j in range(4)]
        if len(set(group)) < 4:
            group = users[:4]
        k += 1
        session_rngs = [np.random.default_rng([args.seed, 2, k, j]) for j in range(4)]
        for u, r in zip(group, session_rngs, strict=True):
            model.start_session(u, r)
        requests = [
            (draw_page(dataset, set(model.history(u)), pop, args.page_size, r), Context(user_id=u, time_h=float(k)))
            for u, r in zip(group, session_rngs, strict=True)
        ]
        started = time.perf_counter()
        model.respond_batch(requests, session_rngs)
        latency.append((time.perf_counter() - started) / 4)
        done += 4
        model.end_sessions(group)
        model.write_ended()
    print(f"\n== {done} decisions in batches of 4 users (one choose call per batch) ==")
    print(f"latency per decision: mean {np.mean(latency):.2f} s (per batch {4 * np.mean(latency):.2f} s)")


def bench_personalization(
    dataset: Dataset, llm: EmbeddedLLM, embedder: SentenceEmbedder, users: list[int], args: Args
) -> None:
    """Discrimination (1, b): own history vs another random user's; also each score component alone."""
    rng = np.random.default_rng([args.seed, 3])
    held = {}
    drop_rows = []
    for u in users:
        hist = dataset.user_history(u)
        held[u] = int(hist["item_id"].iloc[-1])
        drop_rows.append(hist.index[-1])
    train = Dataset(
        dataset.name, dataset.items, dataset.users, dataset.interactions.drop(index=drop_rows), dataset.social
    )
    model = make_model(train, llm, embedder, args)
    pop = train.item_popularity()
    hits = collections.defaultdict(list)
    parts: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {"own": [], "swapped": []}
    for u in users:
        seen = set(dataset.user_history(u)["item_id"])
        negatives: list[int] = []
        while len(negatives) < args.negatives:
            i = int(rng.integers(dataset.n_items))
            if i not in seen and i not in negatives:
                negatives.append(i)
        candidates = [held[u], *negatives]
        other = int(rng.choice([v for v in users if v != u]))
        for label, who in (("own", u), ("swapped", other)):
            llm_s, emb_s = model.score_components(who, candidates, np.random.default_rng([args.seed, 4, u]))
            hits[f"{label} combined"].append(int(np.argmax(model.combine(llm_s, emb_s)) == 0))
            hits[f"{label} llm"].append(int(np.argmax(llm_s) == 0))
            hits[f"{label} embedding"].append(int(np.argmax(emb_s) == 0))
            parts[label].append((llm_s, emb_s))
        hits["popularity"].append(int(np.argmax(pop[candidates]) == 0))
    n = len(users)
    print(f"\n== personalization check: discrimination (1,{args.negatives}), {n} users, uniform negatives ==")
    print(f"random expectation {1 / (args.negatives + 1):.3f}; popularity {np.mean(hits['popularity']):.3f}")
    for part in ("combined", "llm", "embedding"):
        own, swapped = np.mean(hits[f"own {part}"]), np.mean(hits[f"swapped {part}"])
        se = np.sqrt(own * (1 - own) / n)
        print(f"{part:>9}: own history {own:.3f} ± {se:.3f}, another user's {swapped:.3f}, drop {own - swapped:+.3f}")
    for w in (0.5, 1.0, 2.0, 3.0, 5.0, 10.0):  # sensitivity of the combined score to the LLM weight
        own, swapped = (np.mean([np.argmax(w * a + b) == 0 for a, b in parts[k]]) for k in ("own", "swapped"))
        print(f"  llm weight {w:>4} (embedding 1): own {own:.3f}, another user's {swapped:.3f}")


def main() -> None:
    args = parse_args()
    import torch

    torch.set_num_threads(1)
    dataset = load_dataset("bundled")
    counts = dataset.interactions.groupby("user_id").size()
    eligible = counts[counts >= args.min_history].index.to_numpy()
    rng = np.random.default_rng(args.seed)
    users = sorted(int(u) for u in rng.choice(eligible, size=min(args.users, len(eligible)), replace=False))
    check = sorted(int(u) for u in rng.choice(eligible, size=min(args.check_users, len(eligible)), replace=False))
    llm = EmbeddedLLM(LLMConfig(n_threads=args.threads))
    embedder = SentenceEmbedder(n_threads=1)
    print(
        f"embedded model {llm.name}, {args.threads} threads; embedder {embedder.name}; "
        f"dataset {dataset.name}: {dataset.n_users} users, {dataset.n_items} items"
    )
    model = make_model(dataset, llm, embedder, args)
    print(f"strategy {model.strategy}; user config: {model.config.model_dump(exclude={'model'})}")
    if args.decisions:
        bench_decisions(model, users, args, rng)
    if args.batch_decisions:
        bench_batched(model, users, args)
    if args.check_users:
        bench_personalization(dataset, llm, embedder, check, args)
    print(f"\nbackend prefix cache: {llm.stats}")
    pd.set_option("display.width", 120)


if __name__ == "__main__":
    main()
