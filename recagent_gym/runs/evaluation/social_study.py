"""Social phenomena of the paper: the information cocoon and conformity, from simulator runs.

Four simulations share the seed, the agents and the friend graph, and differ in one thing each:

===================  ======================  ==========  ========
condition            recommender             random k    social
===================  ======================  ==========  ========
MF                   matrix factorisation    0           on
Random               uniformly random        0           on
MF + random items    matrix factorisation    ``k``       on
MF, social off       matrix factorisation    0           off
===================  ======================  ==========  ========

*Information cocoon*: per-user genre entropy (bits) of the items a user watched in the last ``window`` rounds,
averaged over the users who watched something then; a cocoon shows as entropy falling over rounds under MF and
not under random recommendations, and ``rec_random_k`` random items per page are the paper's mitigation.

*Conformity*: **heard rate**: the share of watches whose item the agent had heard about from a friend before (in a
chat it took part in, or a post it received); **friend rate**: the share of watches whose item one of the agent's
friends (in the common graph) had watched, posted or chatted about earlier in the run. With social off nobody
hears anything (heard rate 0 by construction), so the friend rate is the comparison that means something there.
"Social off" empties the friend graph of that run: agents who pick the social media find no friends
(``social_none`` events) and spend their turn, as in a world without a social network.
"""

from __future__ import annotations

import math
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tqdm import tqdm

from recagent_gym.runs.config import Config
from recagent_gym.runs.config.evaluation_section import EvaluationConfig
from recagent_gym.runs.metrics import genre_distribution


@dataclass(frozen=True)
class Condition:
    name: str
    recommender: str
    random_k: int
    social: bool


def conditions(random_k: int) -> list[Condition]:
    """The four conditions of the module docstring."""
    return [
        Condition("MF", "mf", 0, True),
        Condition("Random", "random", 0, True),
        Condition(f"MF + {random_k} random items", "mf", random_k, True),
        Condition("MF, social off", "mf", 0, False),
    ]


# -- metrics ------------------------------------------------------------------------------------------------------


def genre_entropy(items: Sequence[int], genre_matrix: np.ndarray) -> float:
    """Shannon entropy in bits of the genre distribution of ``items`` (each item's genres share one unit, see
    :func:`~recagent_gym.runs.metrics.genre_distribution`); NaN for no items or items without genres."""
    if len(items) == 0:
        return math.nan
    shares = genre_distribution(items, genre_matrix)
    if shares.sum() <= 0:
        return math.nan
    p = shares[shares > 0]
    return float(-(p * np.log2(p)).sum())


def entropy_by_round(
    watches: Iterable[Mapping[str, Any]], genre_matrix: np.ndarray, rounds: int, window: int = 1
) -> tuple[list[float], list[int]]:
    """Mean per-user genre entropy at each round ``0..rounds-1`` over the items a user watched in rounds
    ``r - window + 1 .. r`` (rows with ``user_id``, ``item_id``, ``round``), and the number of users averaged."""
    by_user: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for row in watches:
        by_user[int(row["user_id"])].append((int(row["round"]), int(row["item_id"])))
    means: list[float] = []
    counts: list[int] = []
    for r in range(rounds):
        values = []
        for rows in by_user.values():
            items = [i for rr, i in rows if r - window < rr <= r]
            value = genre_entropy(items, genre_matrix)
            if not math.isnan(value):
                values.append(value)
        means.append(float(np.mean(values)) if values else math.nan)
        counts.append(len(values))
    return means, counts


@dataclass
class Conformity:
    watches: int = 0
    heard_watches: int = 0
    """Watches of an item the agent had heard about from a friend (chat or received post) before."""
    friend_watches: int = 0
    """Watches of an item a friend had watched, posted or chatted about before."""
    heard_items: int = 0
    """(agent, item) pairs heard in the run."""

    @property
    def heard_rate(self) -> float:
        return self.heard_watches / self.watches if self.watches else math.nan

    @property
    def friend_rate(self) -> float:
        return self.friend_watches / self.watches if self.watches else math.nan


def conformity(events: Iterable[Mapping[str, Any]], friends: Mapping[int, Iterable[int]]) -> Conformity:
    """Conformity counts from an event log in order (see the module docstring). Both partners of a chat hear every
    item named in it (both memories get the dialogue); a post's recipients hear its items."""
    heard: dict[int, set[int]] = defaultdict(set)
    touched: dict[int, set[int]] = defaultdict(set)  # items each agent watched, posted or chatted about
    friend_sets = {int(u): {int(f) for f in fs} for u, fs in friends.items()}
    result = Conformity()
    for event in events:
        kind, agent, items = event["kind"], event.get("agent"), [int(i) for i in event.get("items", [])]
        if agent is None:
            continue
        agent = int(agent)
        if kind == "watch":
            for item in items:
                result.watches += 1
                result.heard_watches += item in heard[agent]
                result.friend_watches += any(item in touched[f] for f in friend_sets.get(agent, ()))
            touched[agent].update(items)
        elif kind == "chat":
            partner = int(event.get("extra", {}).get("with", agent))
            for who in {agent, partner}:
                new = set(items) - heard[who]
                result.heard_items += len(new)
                heard[who].update(items)
                touched[who].update(items)
        elif kind == "post":
            touched[agent].update(items)
            for who in event.get("extra", {}).get("recipients", []):
                new = set(items) - heard[int(who)]
                result.heard_items += len(new)
                heard[int(who)].update(items)
    return result


# -- runs -----------------------------------------------------------------------------------------------------


@dataclass
class ConditionResult:
    condition: Condition
    entropy: list[float]
    users: list[int]
    conformity: Conformity
    watches: int
    events: dict[str, int] = field(default_factory=dict)


@dataclass
class SocialResult:
    dataset: str
    agents: int
    rounds: int
    window: int
    results: list[ConditionResult]

    def rows(self) -> list[dict[str, Any]]:
        out = []
        for res in self.results:
            c, conf = res.condition, res.conformity
            finite = [e for e in res.entropy if not math.isnan(e)]
            out.append(
                {
                    "condition": c.name,
                    "recommender": c.recommender,
                    "rec_random_k": c.random_k,
                    "social": "on" if c.social else "off",
                    "watches": res.watches,
                    "entropy_first": _r(finite[0] if finite else math.nan),
                    "entropy_last": _r(finite[-1] if finite else math.nan),
                    "entropy_mean": _r(float(np.mean(finite)) if finite else math.nan),
                    "heard_rate": _r(conf.heard_rate),
                    "friend_rate": _r(conf.friend_rate),
                    "heard_items": conf.heard_items,
                    "chats": res.events.get("chat", 0),
                    "posts": res.events.get("post", 0),
                }
            )
        return out

    def entropy_rows(self) -> list[dict[str, Any]]:
        return [
            {"condition": res.condition.name, "round": r + 1, "entropy_bits": _r(e), "users": n}
            for res in self.results for r, (e, n) in enumerate(zip(res.entropy, res.users, strict=True))
        ]  # fmt: skip

    def markdown(self) -> str:
        from recagent_gym.runs.evaluation.efficiency import _markdown_table

        head = (
            f"## Social phenomena on {self.dataset} ({self.agents} agents, {self.rounds} rounds)\n\n"
            f"Genre entropy in bits over the items a user watched in the last {self.window} round(s), mean over "
            "users who watched; heard rate = watches of items heard from friends; friend rate = watches of items a "
            "friend watched, posted or chatted about earlier.\n\n"
        )
        return head + _markdown_table(self.rows()) + "\n"

    def write(self, out_dir: str | Path, config: Config, evaluation: EvaluationConfig) -> dict[str, Path]:
        """``table.md``, ``table.csv``, ``entropy.csv``, ``plot.png`` and ``config.yaml``."""
        from recagent_gym.runs.evaluation.report import redacted_yaml

        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        paths = {name: out / name for name in ("table.md", "table.csv", "entropy.csv", "plot.png", "config.yaml")}
        paths["table.md"].write_text(self.markdown(), encoding="utf-8")
        pd.DataFrame(self.rows()).to_csv(paths["table.csv"], index=False)
        pd.DataFrame(self.entropy_rows()).to_csv(paths["entropy.csv"], index=False)
        plot_social(self, paths["plot.png"])
        paths["config.yaml"].write_text(redacted_yaml(config, evaluation), encoding="utf-8")
        return paths


def _r(value: float) -> float:
    return round(value, 4) if not math.isnan(value) else math.nan


def condition_config(base: Config, condition: Condition, agents: int, rounds: int) -> Config:
    sim = base.simulation.model_copy(update={"agents": agents, "rounds": rounds, "progress": False})
    rec = base.recommender.model_copy(update={"model": condition.recommender, "rec_random_k": condition.random_k})
    return base.model_copy(update={"simulation": sim, "recommender": rec})


def run_condition(
    config: Config, condition: Condition, out: Path, *, llm: Any = None, embedder: Any = None, window: int = 1
) -> ConditionResult:
    from recagent_gym.runs.simulator import runner
    from recagent_gym.social.graph import SocialGraph

    sim = runner.start(config, out, llm=llm, embedder=embedder)
    try:
        friends = {u: tuple(sim.model.friends(u)) for u in sim.agents}
        if not condition.social:
            empty = SocialGraph(sim.dataset.n_users)
            sim.model.graph = sim.world.graph = empty
        sim.run()
        events = sim.log.read()
    finally:
        if llm is None:  # a model passed in belongs to the caller (e.g. one shared loaded model)
            sim.close()
    genres = sim.dataset.genre_matrix()
    entropy, users = entropy_by_round(sim.interactions, genres, config.simulation.rounds, window)
    counts: dict[str, int] = defaultdict(int)
    for e in events:
        counts[e["kind"]] += 1
    return ConditionResult(condition, entropy, users, conformity(events, friends), len(sim.interactions), dict(counts))


def run_social_study(
    config: Config,
    evaluation: EvaluationConfig,
    *,
    out: str | Path | None = None,
    progress: bool = True,
    llm_factory: Callable[[], Any] | None = None,
    embedder: Any = None,
) -> SocialResult:
    """Every condition of :func:`conditions`; simulations go under ``out/runs``. ``llm_factory`` gives each run its
    model (None: the configured backend); ``embedder`` defaults to ``evaluation.embedder``."""
    from recagent_gym.runs.evaluation.efficiency import make_embedder

    runs_root = Path(out) / "runs" if out is not None else Path(tempfile.mkdtemp(prefix="social-"))
    embedder = embedder if embedder is not None else make_embedder(evaluation.embedder)
    agents, rounds = evaluation.social_agents, evaluation.social_rounds
    results = []
    bar = tqdm(conditions(evaluation.social_random_k), desc="social study", unit="condition", disable=not progress)
    for k, condition in enumerate(bar):
        bar.set_postfix(condition=condition.name)
        llm = llm_factory() if llm_factory is not None else None
        folder = runs_root / f"{k}_{condition.recommender}_k{condition.random_k}_{'on' if condition.social else 'off'}"
        point = condition_config(config, condition, agents, rounds)
        results.append(
            run_condition(point, condition, folder, llm=llm, embedder=embedder, window=evaluation.social_window)
        )
    bar.close()
    return SocialResult(config.data.dataset, agents, rounds, evaluation.social_window, results)


def plot_social(result: SocialResult, path: str | Path) -> None:
    """Left: genre entropy over rounds, one line per condition. Right: heard and friend rates per condition."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    for res in result.results:
        left.plot(range(1, len(res.entropy) + 1), res.entropy, marker="o", label=res.condition.name)
    left.xaxis.get_major_locator().set_params(integer=True)
    left.set_xlabel("round")
    left.set_ylabel("genre entropy (bits)")
    left.set_title("information cocoon: per-user genre entropy")
    left.legend(fontsize=8)
    names = [res.condition.name for res in result.results]
    x = np.arange(len(names))
    heard = np.nan_to_num([res.conformity.heard_rate for res in result.results])
    friend = np.nan_to_num([res.conformity.friend_rate for res in result.results])
    right.bar(x - 0.2, heard, 0.4, label="heard rate")
    right.bar(x + 0.2, friend, 0.4, label="friend rate")
    right.set_xticks(x, names, rotation=15, fontsize=8)
    right.set_ylim(0, 1)
    right.set_ylabel("share of watches")
    right.set_title("conformity")
    right.legend(fontsize=8)
    fig.suptitle(f"Social phenomena on {result.dataset} ({result.agents} agents)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
