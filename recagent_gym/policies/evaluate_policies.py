"""Run recommenders (baselines and trained policies) on the same seeded users; table, CSV and plot.

Every recommender answers SB3's ``predict`` on the env's ``Dict`` observation; a trained policy is adapted by
:class:`PolicyRecommender` (flatten the observation, predict, map the action to a page). Each recommender runs on
the same env reset with the same seed, which restores every user's state, so all see the same sequence of users.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from recagent_gym.envs.adapters import ObsFlattener, PageAdapter
from recagent_gym.envs.recagent_env import RecAgentEnv
from recagent_gym.envs.wrappers import page_adapter
from recagent_gym.policies.training import ALGORITHMS, META_FILE


@dataclass(frozen=True)
class PolicyMetrics:
    """Per-recommender results; every figure is a mean over sessions except coverage and genre entropy."""

    recommender: str
    sessions: int
    mean_return: float
    watches_per_session: float
    search_watches_per_session: float
    pages_per_session: float
    leave_rate: float
    coverage: float
    """Distinct recommended items / catalogue size."""
    genre_entropy: float
    """Entropy of the genres of recommended items, normalised by log(n_genres) to [0, 1]."""
    fallbacks: int
    """User-model fallbacks (LLM users) counted over the run."""


class PolicyRecommender:
    """A trained SB3 model behind the ``predict`` of the raw env (flatten, predict, page through the adapter)."""

    def __init__(self, model: Any, adapter: PageAdapter | None, flattener: ObsFlattener, env: RecAgentEnv) -> None:
        self.model, self.adapter, self.flattener, self.env = model, adapter, flattener, env

    @classmethod
    def load(cls, path: str | Path, env: RecAgentEnv) -> PolicyRecommender:
        """Load ``policy.zip`` (or a checkpoint) with the ``policy.json`` written beside it by training."""
        path = Path(path)
        meta_path = (path if path.is_dir() else path.parent) / META_FILE
        if not meta_path.exists() and path.parent.name == "checkpoints":
            meta_path = path.parent.parent / META_FILE
        if not meta_path.exists():
            raise FileNotFoundError(f"{meta_path} not found: a trained policy needs the {META_FILE} saved with it")
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if meta["n_items"] != env.tables.n_items or meta["page_size"] != env.page_size:
            raise ValueError(
                f"{path}: trained for {meta['n_items']} items and pages of {meta['page_size']}, "
                f"but the env has {env.tables.n_items} items and pages of {env.page_size}"
            )
        policy_file = path / "policy.zip" if path.is_dir() else path
        model = ALGORITHMS[meta["algorithm"]].load(policy_file, device="cpu")
        flattener = ObsFlattener(env.observation_space, meta["observation_keys"])
        return cls(model, page_adapter(meta["action"], env), flattener, env)

    def predict(
        self, observation: Any, state: Any = None, episode_start: Any = None, deterministic: bool = True
    ) -> tuple[np.ndarray, Any]:
        action, state = self.model.predict(self.flattener.flatten(observation), deterministic=deterministic)
        page = action if self.adapter is None else self.adapter.to_page(action, self.env.seen_mask)
        return np.asarray(page, dtype=np.int64), state


def run_recommender(name: str, recommender: Any, env: RecAgentEnv, n_episodes: int, seed: int) -> PolicyMetrics:
    """``n_episodes`` sessions of ``recommender`` on ``env`` from ``reset(seed=seed)``."""
    shown = np.zeros(env.tables.n_items, dtype=np.int64)
    returns, watches, search_watches, pages, leaves, fallbacks = [], [], [], [], 0, 0
    obs, _ = env.reset(seed=seed)
    episode_return, episode_watches, episode_search, episode_pages = 0.0, 0, 0, 0
    observe = getattr(recommender, "observe", None)
    while len(returns) < n_episodes:
        page, _ = recommender.predict(obs, deterministic=True)
        obs, reward, terminated, truncated, info = env.step(page)
        episode_return += reward
        episode_pages += 1
        shown[list(info["page"])] += 1
        if info["item"] is not None:
            episode_search += int(info["from_search"])
            episode_watches += int(not info["from_search"])
        fallbacks += info["fallbacks"]
        if observe is not None:
            observe(info, terminated or truncated)
        if terminated or truncated:
            returns.append(episode_return)
            watches.append(episode_watches)
            search_watches.append(episode_search)
            pages.append(episode_pages)
            leaves += int(terminated)
            episode_return, episode_watches, episode_search, episode_pages = 0.0, 0, 0, 0
            obs, _ = env.reset()
    genre_mass = shown.astype(np.float64) @ env.tables.topics
    p = genre_mass / max(genre_mass.sum(), 1e-12)
    entropy = float(-(p[p > 0] * np.log(p[p > 0])).sum() / math.log(max(env.tables.n_genres, 2)))
    return PolicyMetrics(
        recommender=name,
        sessions=n_episodes,
        mean_return=float(np.mean(returns)),
        watches_per_session=float(np.mean(watches)),
        search_watches_per_session=float(np.mean(search_watches)),
        pages_per_session=float(np.mean(pages)),
        leave_rate=leaves / n_episodes,
        coverage=float((shown > 0).sum() / env.tables.n_items),
        genre_entropy=entropy,
        fallbacks=fallbacks,
    )


def evaluate_recommenders(
    recommenders: Mapping[str, Any], env: RecAgentEnv, n_episodes: int, seed: int = 0
) -> list[PolicyMetrics]:
    """Each recommender on the same seeded users."""
    return [run_recommender(name, rec, env, n_episodes, seed) for name, rec in recommenders.items()]


def markdown_table(results: list[PolicyMetrics]) -> str:
    rows = [asdict(r) for r in results]
    header = list(rows[0])
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for row in rows:
        cells = [f"{v:.3f}" if isinstance(v, float) else str(v) for v in row.values()]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_results(results: list[PolicyMetrics], output_dir: str | Path, title: str = "") -> dict[str, Path]:
    """``policies.md``, ``policies.csv`` and ``policies.png`` (return and watches per session) in ``output_dir``."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on servers and CI
    import matplotlib.pyplot as plt

    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"markdown": out / "policies.md", "csv": out / "policies.csv", "plot": out / "policies.png"}
    paths["markdown"].write_text((f"{title}\n\n" if title else "") + markdown_table(results) + "\n", "utf-8")
    with paths["csv"].open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(asdict(results[0])))
        writer.writeheader()
        writer.writerows(asdict(r) for r in results)
    names = [r.recommender for r in results]
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.5))
    for ax, field, label in zip(
        axes,
        ("mean_return", "watches_per_session", "leave_rate"),
        ("return", "watches / session", "leave rate"),
        strict=True,
    ):
        ax.bar(names, [getattr(r, field) for r in results], color="tab:blue")
        ax.set_title(label)
        ax.tick_params(axis="x", rotation=30)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(paths["plot"], dpi=100)
    plt.close(fig)
    return paths
