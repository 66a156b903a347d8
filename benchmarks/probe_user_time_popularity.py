"""Do real next items follow what was being watched at the user's time? A probe for the user models' next feature.

    python benchmarks/probe_user_time_popularity.py [--dataset bundled] [--windows 30,90,365,1095] [--seed 1]

On the pages of ``users fidelity`` / the real-choice objective (each user's last 10 items, each among 4 never-seen
negatives, uniform or popularity-matched: :func:`recagent_gym.runs.distill.real_choices.real_pages`) it ranks a page's
items by how many ratings each got, from anyone, in the ``W`` days before the user's last history rating (nothing
after it is read), and prints how often the real item comes first (ties broken by global popularity, then shared),
per sampler and window, beside the global popularity of the history, with 95% bootstrap intervals over users and
the number of users. Popularity-matched negatives match the real item's global popularity band, not its popularity
at the user's time, so a gap between the two rows is what a user model that reads the time could win. A probe, not a
timed benchmark: well under a minute on the bundled data.
"""

from __future__ import annotations

import argparse

import numpy as np

from recagent_gym.data.load import load_dataset
from recagent_gym.recommenders.history_scorers import RecentPopularity
from recagent_gym.runs.distill.real_choices import SAMPLERS, real_pages, temporal_split, top_hit
from recagent_gym.runs.metrics import summarize


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", default="bundled", help="'bundled' or a MovieLens folder")
    parser.add_argument("--windows", default="30,90,365,1095", help="days before the user's last history rating")
    parser.add_argument("--seed", type=int, default=1, help="the pages' seed (users fidelity uses seed + 1 = 1)")
    args = parser.parse_args()

    dataset = load_dataset(args.dataset)
    history, real = temporal_split(dataset)
    rated = set(history.interactions["user_id"].tolist())
    users = sorted(u for u in real if u in rated)
    pages = real_pages(dataset, real, users, page_size=5, seed=args.seed)
    popularity = np.bincount(history.interactions["item_id"], minlength=dataset.n_items).astype(np.float64)
    tie = popularity / (popularity.max() + 1.0)  # < 1: breaks ties among equal counts only

    def report(name: str, scores: np.ndarray) -> None:
        hits = top_hit(scores, pages.label)
        cells = []
        for s, sampler in enumerate(SAMPLERS):
            keep = pages.sampler == s
            per_user = [hits[keep & (pages.user == u)].mean() for u in users]
            e = summarize(per_user, np.random.default_rng(0))
            cells.append(f"{sampler} {e.mean:.3f} [{e.low:.3f}, {e.high:.3f}]")
        print(f"| {name} | " + " | ".join(cells) + " |")

    print(f"{dataset.name}: {len(users)} users, {len(pages)} pages of 5 (chance 0.200)")
    report("global popularity of the history", popularity[pages.items])
    for days in (int(d) for d in args.windows.split(",")):
        recent = RecentPopularity(history, days)
        scores = np.zeros(pages.items.shape)
        for u in users:
            rows = pages.user == u
            scores[rows] = recent.scores(u, pages.items[rows]) + tie[pages.items[rows]]
        report(f"ratings in the {days} days before the user's last", scores)


if __name__ == "__main__":
    main()
