"""``recagent-gym users fidelity``: distilled users (and the naive surrogates) against the LLM users, on held-out
users.

Rows: the LLM users (as logged), the distilled users, and the RecSim-style and embedding users as reference.

* **Per-item score Spearman** with the LLM agent's item score (the one its decision rule reads), pooled over every
  eligible (decision, item) of the held-out users, and averaged per page.
* **Action rates** (watch / next / search / leave) when each model answers the logged pages in the logged session
  state (``replays`` draws per page; the distilled user gets the logged patience and watched items, the classical
  users a fresh session each time), and their **total variation distance** from the LLM users' rates.
* **Rating agreement** on the LLM users' rated watches: share of equal star ratings and mean absolute error.
* **Recommender ranking**: the mean session return (the env's reward, sessions stepped by the session kernel with
  its rules: :mod:`~recagent_gym.runs.distill.sessions`) of each page source (random,
  popularity, MF, genre) on the held-out users: logged for the LLM users, from ``replays`` runs of the same session
  plans for the other models; 95% bootstrap intervals over users.
* **Real held-out choices** (``real.csv``): on the held-out users' pages of their real next items (the RL
  protocol's held-out users, logged or not; each user's last 10, one per page among never-seen negatives drawn
  uniformly or popularity-matched;
  :mod:`~recagent_gym.runs.distill.real_choices`), how often the real item has the page's top score, and its
  probability under the rule's choice among the page, for the distilled users (tables re-encoded on the history
  before those items), the LLM users (on ``real_llm_users`` of them, built on that history), the history's
  popularity and chance; 95% bootstrap intervals over users.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from recagent_gym.data.schema import Dataset
from recagent_gym.runs.distill import logs
from recagent_gym.runs.distill.fit import item_rows, spearman, text_vectors
from recagent_gym.runs.distill.pages import PageSources
from recagent_gym.runs.distill.real_choices import CHOICES
from recagent_gym.runs.distill.real_fidelity import held_out_table
from recagent_gym.runs.distill.sessions import ACTIONS, SessionPlan, reward_function, run_sessions, session_kernel
from recagent_gym.runs.metrics import bootstrap_replicates, percentile_interval
from recagent_gym.users.config import UserConfig
from recagent_gym.users.distilled.errors import DistillError
from recagent_gym.users.distilled.saved_model import Artefact
from recagent_gym.users.distilled.user import DistilledUser
from recagent_gym.users.protocol import Context, Page

RANKED = ("random", "popular", "mf", "genre")


def _models(dataset: Dataset, user: UserConfig, artefact: Artefact, vectors: np.ndarray) -> dict[str, Any]:
    from recagent_gym.users.embedding_user import EmbeddingUser
    from recagent_gym.users.recsim import RecSimUser

    return {
        "distilled": DistilledUser(dataset, artefact),
        "recsim": RecSimUser(dataset, user),
        "embedding": EmbeddingUser(dataset, user, item_embeddings=vectors),
    }


def _rating(name: str, model: Any, user: int, item: int) -> float:
    score = float(model.score_items(user, [item], np.random.default_rng(0))[0])
    if name == "distilled":
        return model.rating(score)
    if name == "recsim":
        from recagent_gym.users.recsim import rating_from_utility

        return rating_from_utility(score)
    return float(min(5.0, max(1.0, round(1.0 + 4.0 * max(score, 0.0)))))  # the embedding user's rating


def _replay_rates(name: str, model: Any, test: pd.DataFrame, replays: int, seed: int) -> np.ndarray:
    """Action shares when ``model`` answers every logged page ``replays`` times in the logged session state."""
    counts = np.zeros(len(ACTIONS))
    watched_before: dict[int, list[int]] = {}
    for row in test.sort_values(["session_id", "page_index", "page_source"], kind="stable").itertuples():
        watched = watched_before.setdefault(row.session_id, [])
        page = Page(tuple(int(i) for i in row.items), int(row.page_index), row.page_source, row.query or None)
        context = Context(user_id=int(row.user_id), step=int(row.page_index), watched=tuple(watched))
        for r in range(replays):
            rng = np.random.default_rng([seed, int(row.session_id), int(row.page_index), r])
            model.start_session(int(row.user_id), rng)
            if name == "distilled" and not math.isnan(row.patience_before):
                model.session(int(row.user_id)).patience = int(row.patience_before)
                model.session(int(row.user_id)).watched = set(watched)
            response = model.respond(page, context, rng)
            counts[int(response.action)] += 1
            model.end_sessions([int(row.user_id)])
        if row.item >= 0:
            watched.append(int(row.item))
    return counts / max(counts.sum(), 1.0)


def _bootstrap(returns: pd.DataFrame, n: int, seed: int) -> tuple[float, float, float]:
    """Mean session return and its 95% interval, resampling users."""
    per_user = returns.groupby("user_id")["return"].agg(["sum", "count"])
    if per_user.empty:
        return math.nan, math.nan, math.nan
    sums, counts = per_user["sum"].to_numpy(), per_user["count"].to_numpy()
    means = bootstrap_replicates(lambda idx: sums[idx].sum(axis=1) / counts[idx].sum(axis=1), len(sums),
                                 np.random.default_rng(seed), n_boot=n, batched=True)  # fmt: skip
    return (float(sums.sum() / counts.sum()), *percentile_interval(means, 0.95))


_SESSION = ["session_id", "user_id", "source"]


def _session_returns(frame: pd.DataFrame, also: tuple[str, ...] = ()) -> pd.DataFrame:
    grouped = frame.groupby([*_SESSION, *also], as_index=False)["reward"].sum()
    return grouped.rename(columns={"reward": "return"})


def _simulated_returns(
    model: Any, plans: list[SessionPlan], sources: PageSources, kernel: Any, reward: Any, *, replays: int, seed: int,
) -> pd.DataFrame:  # fmt: skip
    """Each plan's session return averaged over ``replays`` runs (one row per session, as the logged returns)."""
    rows = []
    for r in range(replays):
        pending = list(plans)
        while pending:  # one session per user in a batch
            batch, seen = [], set()
            for plan in pending:
                if plan.user_id not in seen:
                    batch.append(plan)
                    seen.add(plan.user_id)
            taken = {p.session_id for p in batch}
            pending = [p for p in pending if p.session_id not in taken]
            rows += [
                {**row, "replay": r}
                for row in run_sessions(model, batch, sources, kernel, reward, seed=seed + 7919 * (r + 1))
            ]
    return _session_returns(pd.DataFrame(rows), ("replay",)).groupby(_SESSION, as_index=False)["return"].mean()


def fidelity_report(
    logs_folder: str | Path,
    model_folder: str | Path,
    dataset: Dataset,
    config: Any,
    out: str | Path,
    *,
    replays: int = 20,
    bootstrap: int = 1000,
    seed: int = 0,
    embedder: Any = None,
    cache_dir: str | Path | None = None,
    real_llm_users: int = 40,
    llm_model: Any = None,
) -> str:
    """Write ``fidelity.md``, ``fidelity.csv``, ``ranking.csv`` and ``fidelity.png`` to ``out``; returns the
    markdown."""
    artefact = Artefact.load(model_folder)
    frame = logs.read_logs(logs_folder)
    meta = logs.read_meta(logs_folder)
    logs.check_ids(frame, logs_folder, dataset.n_users, dataset.n_items, dataset.name)
    test_users = set(artefact.meta["test_users"])
    test = frame[frame["user_id"].isin(test_users)].reset_index(drop=True)
    if test.empty:
        raise DistillError(f"{logs_folder}: no decisions of the model's held-out users")
    if artefact.meta.get("logs_hash") != logs.logs_hash(logs_folder):
        note = "the logs changed since the model was distilled (held-out users are still never trained on)"
    else:
        note = "logs as distilled"
    vectors = text_vectors(dataset, embedder, cache_dir)
    models = _models(dataset, config.user, artefact, vectors)
    items = item_rows(test)
    llm_rates = np.array([(test["action"] == a).mean() for a in ACTIONS])
    rated = test[(test["action"] == "watch") & test["rating"].notna()]
    rows: list[dict[str, Any]] = [
        {"users": "LLM (logged)", "spearman": 1.0, "page_spearman": 1.0, **dict(zip(ACTIONS, llm_rates, strict=True)),
         "tv": 0.0, "rating_exact": 1.0, "rating_mae": 0.0},
    ]  # fmt: skip
    for name, model in models.items():
        pred = np.empty(len(items))
        for user, part in items.groupby("user_id"):
            pred[part.index] = model.score_items(int(user), part["item_id"].tolist(), np.random.default_rng(0))
        per_page = [
            spearman(part["score"].to_numpy(), pred[part.index])
            for _, part in items.groupby("decision")
            if len(part) > 2
        ]
        rates = _replay_rates(name, model, test, replays, seed)
        ratings = np.array([_rating(name, model, int(r.user_id), int(r.item)) for r in rated.itertuples()])
        llm_ratings = rated["rating"].to_numpy(dtype=float)
        rows.append(
            {
                "users": name,
                "spearman": spearman(items["score"].to_numpy(), pred),
                "page_spearman": float(np.nanmean(per_page)) if per_page else math.nan,
                **dict(zip(ACTIONS, rates, strict=True)),
                "tv": float(0.5 * np.abs(rates - llm_rates).sum()),
                "rating_exact": float((ratings == llm_ratings).mean()) if len(ratings) else math.nan,
                "rating_mae": float(np.abs(ratings - llm_ratings).mean()) if len(ratings) else math.nan,
            }
        )
    table = pd.DataFrame(rows)

    # recommender ranking: the logged sessions' plans, replayed on every other model
    sessions = test.groupby("session_id").first().reset_index()
    # the ``policy`` source's pages need the policy and its env: its sessions are scored above, not ranked here
    plans = [
        SessionPlan(int(s.session_id), int(s.user_id), s.source) for s in sessions.itertuples() if s.source in RANKED
    ]
    page_size = int(meta.get("page_size", len(test["items"].iloc[0])))
    max_pages = int(meta.get("max_pages", test["page_index"].max() + 1))
    sources = PageSources(dataset, page_size=page_size, config=config, seed=int(meta.get("seed", 0)))
    kernel = session_kernel(dataset, config, page_size=page_size, max_pages=max_pages)
    reward = reward_function(config)
    returns = {"LLM (logged)": _session_returns(test)}
    for name, model in models.items():
        if plans:
            returns[name] = _simulated_returns(
                model, plans, sources, kernel, reward, replays=max(1, replays // 10), seed=seed
            )
    ranking_rows = []
    for name, ret in returns.items():
        for source in [s for s in RANKED if s in set(test["source"])]:
            mean, lo, hi = _bootstrap(ret[ret["source"] == source], bootstrap, seed)
            ranking_rows.append(
                {"users": name, "recommender": source, "mean_return": mean, "ci_low": lo, "ci_high": hi}
            )
    ranking = pd.DataFrame(ranking_rows, columns=["users", "recommender", "mean_return", "ci_low", "ci_high"])
    order = {
        name: tuple(part.sort_values("mean_return", ascending=False)["recommender"])
        for name, part in ranking.groupby("users", sort=False)
    }
    table["same_ranking"] = [order.get(u) == order["LLM (logged)"] if order else math.nan for u in table["users"]]

    real_users = _real_held_out_users(artefact, dataset, config)
    real = held_out_table(
        dataset, config, artefact, vectors, real_users, llm_users=real_llm_users, llm_model=llm_model,
        bootstrap=bootstrap, seed=seed,
    )  # fmt: skip

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "fidelity.csv", index=False)
    real.to_csv(out / "real.csv", index=False)
    ranking.to_csv(out / "ranking.csv", index=False)
    header = (
        f"Held-out users: {len(test_users)} ({test['session_id'].nunique()} sessions, {len(test)} decisions, "
        f"{len(items)} scored items, {len(rated)} rated watches) of logs with {frame['session_id'].nunique()} "
        f"sessions / {len(frame)} decisions by {meta.get('model', '?')} "
        f"({meta.get('users', 'item scoring not recorded')}); {note}; replays per page {replays}."
    )
    markdown = "\n".join(
        [
            "# Distilled users: fidelity to the LLM users and to real held-out choices",
            "",
            header,
            "",
            _markdown(table),
            "",
            "Mean session return per recommender (95% bootstrap interval over users):",
            "",
            _ranking_markdown(ranking) if order else "(none: these logs hold no random, popular, MF or genre pages)",
            "",
            "Ranking (best first): " + "; ".join(f"{u}: {' > '.join(o)}" for u, o in order.items()),
            "",
            f"Real held-out choices ({len(real_users)} users held out of the fit: the RL protocol's held-out users, "
            "logged or not): their pages of their real next items (each user's last "
            f"{CHOICES}, one per page of {config.env.page_size} among never-seen negatives). hit: the real item has "
            "the page's top score (ties share); choice_p: its probability under the rule's softmax(score / "
            "user.watch_temperature); mean over users [95% bootstrap interval]. The distilled users' tables are "
            "re-encoded on the history before these items; the LLM users are built on that history"
            + (f" and score the first {real_llm_users} held-out users' pages" if real_llm_users > 0 else " (not run)")
            + ".",
            "",
            _real_markdown(real) if len(real) else "(none: no held-out user has enough history)",
            "",
            "The same ranking with a policy trained on the distilled users, in the env, on users held out of both: "
            "`recagent-gym users transfer --config quickstart --user-models distilled,recsim,embedding,llm`.",
            "",
        ]
    )
    (out / "fidelity.md").write_text(markdown)
    _plot(table, ranking, out / "fidelity.png")
    return markdown


def _real_held_out_users(artefact: Artefact, dataset: Dataset, config: Any) -> list[int]:
    """The users of the real-choice table: the model's held-out users and, with the RL protocol's split (the
    default), every held-out user of that split (logged or not: real choices need no logs); never a train user."""
    users = set(artefact.meta["test_users"])
    if artefact.meta.get("settings", {}).get("split", "policy") == "policy":
        from recagent_gym.runs.policies.protocol import split_users

        rl = split_users(dataset.n_users, test_fraction=config.train.test_fraction, seed=config.train.split_seed)
        users |= {int(u) for u in rl.test}
    return sorted(users - set(artefact.meta["train_users"]))


def _fmt(value: Any) -> str:
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    if isinstance(value, float | np.floating):
        return "n/a" if math.isnan(value) else f"{value:.3f}"
    return str(value)


def _markdown(table: pd.DataFrame) -> str:
    columns = list(table.columns)
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_fmt(v) for v in row) + " |" for row in table.itertuples(index=False)]
    return "\n".join(lines)


def _real_markdown(real: pd.DataFrame) -> str:
    def cell(row: Any, metric: str) -> str:
        mean = getattr(row, metric)
        if math.isnan(mean):
            return "n/a"
        return f"{mean:.3f} [{getattr(row, metric + '_low'):.3f}, {getattr(row, metric + '_high'):.3f}]"

    lines = ["| negatives | users | held-out users | pages | hit | choice_p |", "|---|---|---|---|---|---|"]
    lines += [
        f"| {r.negatives} | {r.users} | {r.n_users} | {r.pages} | {cell(r, 'hit')} | {cell(r, 'choice_p')} |"
        for r in real.itertuples(index=False)
    ]
    return "\n".join(lines)


def _ranking_markdown(ranking: pd.DataFrame) -> str:
    wide = ranking.assign(
        cell=[f"{m:.2f} [{lo:.2f}, {hi:.2f}]" for m, lo, hi in ranking[["mean_return", "ci_low", "ci_high"]].values]
    ).pivot(index="recommender", columns="users", values="cell")
    wide = wide[[c for c in ranking["users"].unique()]]
    return _markdown(wide.reset_index())


def _plot(table: pd.DataFrame, ranking: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    width = 0.8 / len(table)
    x = np.arange(len(ACTIONS))
    for k, row in enumerate(table.itertuples(index=False)):
        left.bar(x + k * width, [getattr(row, a) for a in ACTIONS], width, label=row.users)
    left.set_xticks(x + 0.4 - width / 2, ACTIONS)
    left.set_ylabel("share of decisions")
    left.set_title("Action rates on held-out users")
    left.legend(fontsize=8)
    users = list(ranking["users"].unique())
    recs = list(ranking["recommender"].unique())
    width = 0.8 / max(len(users), 1)
    for k, name in enumerate(users):
        part = ranking[ranking["users"] == name].set_index("recommender").reindex(recs)
        err = np.vstack([part["mean_return"] - part["ci_low"], part["ci_high"] - part["mean_return"]])
        right.bar(np.arange(len(recs)) + k * width, part["mean_return"], width, yerr=err, capsize=2, label=name)
    if not recs:  # logs of the policy source only
        right.text(0.5, 0.5, "no random, popular, MF or genre pages in these logs", ha="center",
                   transform=right.transAxes)  # fmt: skip
    right.set_xticks(np.arange(len(recs)) + 0.4 - width / 2, recs)
    right.set_ylabel("mean session return")
    right.set_title("Recommenders by mean return (95% CI)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
