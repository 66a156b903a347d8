"""How far can a user model whose watch follows the page get in ``evaluate agreement``? A probe for #31's next step.

    python benchmarks/probe_page_calibration.py [--dataset bundled] [--distilled-path M] [--seed 0] [--boot 300]
        [--recommenders random,popularity,...]

A simulated user whose probability of watching on a page equals the probability that the page holds one of the
user's real next items (given what it sees of the page) has, on every recommender's pages, an expected watch rate
equal to the replayed real users' hit rate, so it ranks recommenders as they do. This probe measures how close
page-level models built from features a user model can have get to that, without playing their sessions:

1. the real replay of ``evaluate agreement`` (its config ``agreement``, both samplers, the 8 recommenders and the
   3 swapped rows) on every held-out user, recording each page and whether it held a real future item;
2. per page item, features: the distilled users' score minus the user's watch threshold (the shipped model
   re-encoded on the history, as the agreement runs it), log popularity in the history, log ratings in the 365 days
   before the user's last history rating (nothing later read), and the user's MF affinity (the zoo's own ``mf``,
   z-scored per user: a user model reading it judges MF by its own scores, said here because it matters);
3. ``P(hit | page) = 1 - prod_i (1 - sigmoid(w . x_i + b))`` fitted by maximum likelihood on the pages of the
   non-personalised recommenders (random, popularity, quality) of the users the distilled model was fitted on,
   never on the users it is evaluated on (the agreement's sample);
4. Kendall tau between the real ranking (hit) and the ranking by each model's mean P(hit) per page over the
   evaluated users, with 95% bootstrap intervals over users, for the model fitted on uniform-negative pools only
   (sampler-agnostic: the user cannot know how the pool was drawn), on both samplers' pools, and per sampler
   (tailored to the test: an upper reference, not a user model).

The shipped rule's expected watch (``sigmoid((best - threshold) / temperature)``, no noise, no sessions) is the first
row. Expected watches, not played sessions: a played session adds the watch draws and leaving, which the mean over
users does not remove (``evaluation.agreement_sessions`` averages them). About 3 minutes on the bundled data.
"""

from __future__ import annotations

import argparse
import os
from types import SimpleNamespace

import numpy as np

FEATURE_SETS = {"score": ["s"], "score+pop": ["s", "pop"], "score+pop+time": ["s", "pop", "time"],
                "score+pop+time+mf": ["s", "pop", "time", "mf"], "pop+time+mf": ["pop", "time", "mf"]}  # fmt: skip
SAMPLERS = ("uniform", "popularity-matched")
NON_PERSONAL = ("random", "popularity", "quality")


def replay_pages(dataset, config, history, split, users, future, item_features):
    """``[(sampler, recommender, user, page items, hit)]`` of the real replay, every recommender and swapped row,
    played by the agreement's own loop (:func:`~recagent_gym.runs.evaluation.agreement.run.run_arms`)."""
    from recagent_gym.runs.evaluation.agreement.pools import PoolRetriever, build_pools
    from recagent_gym.runs.evaluation.agreement.run import REAL, run_arms
    from recagent_gym.runs.evaluation.agreement.zoo import Zoo
    from recagent_gym.runs.make_env import candidates_env
    from recagent_gym.users.replay import ReplayUser

    ev = config.evaluation
    swapped = [name for name in ("itemknn", "mf", "lightgcn") if name in ev.agreement_recommenders]
    zoo = Zoo(ev.agreement_recommenders, history, future, seed=ev.seed, swapped=swapped)
    rows = []
    for sampler in SAMPLERS:
        pools = build_pools(dataset, split, users, sampler=sampler, size=ev.agreement_pool, seed=ev.seed,
                            n_bands=ev.popularity_bands)  # fmt: skip
        retriever = PoolRetriever(pools, ev.agreement_pool, history.n_users)

        def build(retriever=retriever):
            return candidates_env(history, ReplayUser(future), config.env.page_size, ev.agreement_pages, False,
                                  config, n_candidates=ev.agreement_pool, users=users, retriever=retriever,
                                  item_features=item_features)  # fmt: skip

        def on_page(model, recommender, k, info, reward, sampler=sampler):
            rows.append((sampler, recommender, int(users[k]), [int(i) for i in info["page"]], reward > 0))

        run_arms({REAL: build}, zoo, users, future, sampler=sampler, seed=ev.seed, k=config.env.page_size,
                 pages=ev.agreement_pages, on_page=on_page)  # fmt: skip
    return rows


def item_features(history, distilled, users):
    """Per user, an ``(n_items, 4)`` table: distilled score - threshold, log popularity, log ratings in the year
    before the user's last history rating, MF z-score."""
    from recagent_gym.recommenders.history_scorers import RecentPopularity, SVDScores

    popularity = np.log1p(np.bincount(history.interactions["item_id"], minlength=history.n_items).astype(np.float64))
    recent = RecentPopularity(history, days=365)
    mf = SVDScores(history)
    every = np.arange(history.n_items)
    out = {}
    for user in users:
        affinity = mf.scores(int(user), every)
        affinity = (affinity - affinity.mean()) / (affinity.std() + 1e-9)
        score = distilled.score_table[user].astype(np.float64) - distilled.thresholds[user]
        out[int(user)] = np.stack([score, popularity, np.log1p(recent.counts(int(user))), affinity], axis=1)
    return out


def fit_page_model(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``(w, b)`` of ``P(hit) = 1 - prod_i (1 - sigmoid(w . x_i + b))`` by maximum likelihood (L-BFGS)."""
    import torch

    torch.set_num_threads(1)
    xt, yt = torch.tensor(x), torch.tensor(y, dtype=torch.float64)
    w = torch.zeros(x.shape[2] + 1, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([w], max_iter=300)

    def closure():
        opt.zero_grad()
        p = page_probability(xt, w).clamp(1e-6, 1 - 1e-6)
        loss = -(yt * torch.log(p) + (1 - yt) * torch.log(1 - p)).mean() + 1e-4 * (w[:-1] ** 2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    return w.detach().numpy()


def page_probability(x, w):
    import torch

    logits = torch.as_tensor(x) @ torch.as_tensor(w[:-1]) + w[-1]
    return 1 - torch.exp(torch.nn.functional.logsigmoid(-logits).sum(-1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", default="bundled", help="'bundled' or a MovieLens folder (a distilled model "
                        "for it via --distilled-path)")  # fmt: skip
    parser.add_argument("--distilled-path", default=None, help="user.distilled_path (default: the shipped model)")
    parser.add_argument("--boot", type=int, default=300, help="bootstrap resamples of the users")
    parser.add_argument("--seed", type=int, default=0, help="evaluation.seed: the agreement's users and pools")
    parser.add_argument("--recommenders", default=None, help="comma-separated evaluation.agreement_recommenders "
                        "(default: the agreement's; the CI smoke run takes a few)")  # fmt: skip
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from recagent_gym.data.load import load_dataset_from_config
    from recagent_gym.envs.encoding import item_feature_table
    from recagent_gym.runs.config import load_config
    from recagent_gym.runs.evaluation.agreement.pools import temporal_split
    from recagent_gym.runs.evaluation.agreement.stats import rank_agreement
    from recagent_gym.runs.evaluation.distilled_row import build_distilled_row, required_artefact
    from recagent_gym.runs.evaluation.subjects import Resources, child_rng
    from recagent_gym.session.tables import SessionTables

    overrides = [f"data.dataset={args.dataset}", f"evaluation.seed={args.seed}"]
    if args.distilled_path:
        overrides.append(f"user.distilled_path={args.distilled_path}")
    if args.recommenders:
        overrides.append(f"evaluation.agreement_recommenders=[{args.recommenders}]")
    config = load_config("agreement", overrides)
    dataset = load_dataset_from_config(config.data)  # as the commands load it
    ev = config.evaluation
    resources = Resources(dataset, config, ev, progress=True)
    config = resources.config
    split = temporal_split(dataset, ev.agreement_future, ev.agreement_min_history)
    history = split.train
    artefact = required_artefact(dataset, config)
    fitted_on = {int(u) for u in artefact.meta.get("train_users", [])}
    eligible = np.array(sorted(set(split.held_out) - fitted_on))
    n_eval = min(ev.agreement_users, len(eligible))  # the agreement's own sample of users
    evaluated = set(child_rng(ev.seed, "agreement-users").choice(eligible, size=n_eval, replace=False).tolist())
    users = np.array(sorted(split.held_out), dtype=np.int64)
    future = {int(u): tuple(dict.fromkeys(split.held_out[int(u)])) for u in users}
    vectors = resources.item_vectors()
    distilled = build_distilled_row(history, artefact, config, vectors)
    text = SimpleNamespace(item_embeddings=vectors, item_embeddings_source="text_embeddings")
    table = item_feature_table(history, SessionTables.build(history), text, 8)
    print(f"{dataset.name}: replaying {len(users)} held-out users on every recommender (both samplers)", flush=True)
    rows = replay_pages(dataset, config, history, split, users, future, table)
    features = item_features(history, distilled, users)
    names = list(dict.fromkeys(r[1] for r in rows))
    columns = {"s": 0, "pop": 1, "time": 2, "mf": 3}
    sampler_of = np.array([r[0] for r in rows])
    rec_of = np.array([r[1] for r in rows])
    user_of = np.array([r[2] for r in rows])
    hit = np.array([r[4] for r in rows], dtype=np.float64)
    x_all = np.stack([features[r[2]][r[3]] for r in rows])  # (pages, page size, 4)
    train = np.isin(user_of, sorted(fitted_on)) & np.isin(rec_of, NON_PERSONAL)
    scored = np.isin(user_of, sorted(evaluated))
    eval_users = np.array(sorted(evaluated))
    n_fit = len(set(user_of[train].tolist()))
    print(f"fitted on {n_fit} users the distilled model was fitted on ({int(train.sum())} pages of "
          f"{', '.join(NON_PERSONAL)}); scored on the agreement's {len(eval_users)} held-out users, "
          f"{len(names)} recommenders\n")  # fmt: skip

    index = {u: k for k, u in enumerate(eval_users)}
    base = [name for name in names if "~" not in name]

    def per_user(values: np.ndarray, sampler: str, name: str) -> np.ndarray:
        """Each evaluated user's mean of ``values`` over its pages of ``name`` under ``sampler``."""
        keep = scored & (sampler_of == sampler) & (rec_of == name)
        at = [index[u] for u in user_of[keep]]
        sums, counts = np.zeros(len(eval_users)), np.zeros(len(eval_users))
        np.add.at(sums, at, values[keep])
        np.add.at(counts, at, 1.0)
        return sums / np.maximum(counts, 1)

    def cells(p: np.ndarray, sampler: str) -> tuple[str, str]:
        """Tau over the 8 / with the swapped rows, and the recommenders ranked at or above the future oracle."""
        real = {name: per_user(hit, sampler, name) for name in names}
        sim = {name: per_user(p, sampler, name) for name in names}
        taus = []
        for over in (base, names):
            a = rank_agreement({n: real[n] for n in over}, {n: sim[n] for n in over}, n_boot=args.boot, seed=ev.seed)
            taus.append(f"{a.tau:.2f} [{a.tau_low:.2f}, {a.tau_high:.2f}]")
        oracle = sim["oracle"].mean() if "oracle" in sim else np.inf
        above = [n for n in base if n != "oracle" and sim[n].mean() >= oracle]
        return " / ".join(taus), ", ".join(above) or "none"

    print(f"Kendall tau [95% CI over users], over the {len(base)} recommenders / with the {len(names) - len(base)} "
          "swapped rows; the last columns: the recommenders a model ranks at or above the future oracle (real hit "
          "1.0), each above it costing a pair\n")  # fmt: skip
    print("| page model | fitted on pools | tau uniform | tau popularity-matched | at or above the oracle, uniform | "
          "at or above the oracle, popularity-matched |")  # fmt: skip
    print("|---|---|---|---|---|---|")

    def row(label: str, pools: str, probabilities: dict[str, np.ndarray]) -> None:
        (tau_u, above_u), (tau_p, above_p) = (cells(probabilities[s], s) for s in SAMPLERS)
        print(f"| {label} | {pools} | {tau_u} | {tau_p} | {above_u} | {above_p} |", flush=True)

    shipped = 1 / (1 + np.exp(-x_all[:, :, 0].max(axis=1) / distilled.temperature))
    row("shipped rule's expected watch", "–", dict.fromkeys(SAMPLERS, shipped))
    for label, wanted in FEATURE_SETS.items():
        x = x_all[:, :, [columns[c] for c in wanted]]
        mean, std = x[train].reshape(-1, x.shape[2]).mean(0), x[train].reshape(-1, x.shape[2]).std(0) + 1e-9
        x = (x - mean) / std
        fit_on = {"uniform": train & (sampler_of == SAMPLERS[0]), "both": train}
        shared = {pools: page_probability(x, fit_page_model(x[on], hit[on])).numpy() for pools, on in fit_on.items()}
        for pools, p in shared.items():
            row(label, pools, dict.fromkeys(SAMPLERS, p))
        matched = train & (sampler_of == SAMPLERS[1])  # the uniform pools' own fit is the "uniform" row's
        own = {
            SAMPLERS[0]: shared["uniform"],
            SAMPLERS[1]: page_probability(x, fit_page_model(x[matched], hit[matched])).numpy(),
        }
        row(label, "per sampler", own)


if __name__ == "__main__":
    main()
