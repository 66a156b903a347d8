"""Sequence generation, the paper's Tables 4/5: simulated users pick from an MF recommender's pages, step by step.

Protocol, per length ``N``:

1. ``users`` users with at least ``min_interactions`` interactions are drawn (seeded; the same users as the
   discrimination test and for every N); each user's last ``N`` items
   by time are the ground-truth sequence, the rest is the training data.
2. An MF recommender (``recagent_gym.recommenders.mf``, the ``recommender`` config section) is trained on the
   training data. At each of ``N`` steps it shows its top ``page_size`` items, excluding the user's training history
   and the items already picked in this sequence.
3. The simulated user picks one item per step. ``sequence_choice: score`` (default) takes the top item of the user
   model's ``score_items`` over the page (ties at random): a forced choice, since the protocol needs one pick per
   step, and the user's state does not evolve. ``respond`` runs the user's session in the session kernel (the
   env's page-step pipeline, with the recommender's pages as shown, without catalogue search) so its state evolves
   (e.g. RecSim's interest drift); an answer other than WATCH of a page item falls back to ``score`` and is
   counted, and a user who leaves starts a new session.
   A reference row ``MF top-1`` always takes the recommender's first item.
4. Objective metrics per sequence: hit rate of the held-out items, Jensen-Shannon divergence of its genre
   distribution from the user's training history, mean embedding similarity to the ground truth (all pairs).
5. An LLM judge compares sequences pairwise on the paper's 5-point scale (each model vs the ground truth, and every
   pair of models), with a constrained ``choose`` over the five labels (``prompts/sequence_judge.py``); which
   sequence is shown as "A" is drawn with a seeded generator and recorded, and verdicts are mirrored back.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from recagent_gym.data.schema import Dataset
from recagent_gym.data.splits import leave_last_out
from recagent_gym.llm.seeding import SEED_HIGH
from recagent_gym.prompts import sequence_judge
from recagent_gym.prompts.checked import choose_checked
from recagent_gym.recommenders.baselines import top_k_excluding
from recagent_gym.runs.evaluation.subjects import Resources, child_rng, sample_users
from recagent_gym.runs.metrics import (
    JUDGE_LABELS,
    EmbeddingSimilarity,
    Estimate,
    GenreDivergence,
    HeldOutHitRate,
    JudgeSummary,
    aggregate_judgements,
    summarize,
    top_k,
)
from recagent_gym.session import SessionKernel, SessionRules, SessionStream, SessionTables
from recagent_gym.users.protocol import Action

logger = logging.getLogger(__name__)

GROUND_TRUTH = "ground_truth"
MF_TOP = "mf_top1"
SOURCE_LABELS = {GROUND_TRUTH: "Ground truth", MF_TOP: "MF top-1", "embedding": "Embedding", "recsim": "RecSim",
                 "llm": "LLM agent"}  # fmt: skip


@dataclass
class ObjectiveRow:
    n: int
    source: str
    hit_rate: Estimate
    divergence: Estimate
    similarity: Estimate
    fallbacks: int = 0
    """Picks that fell back to ``score_items`` (``sequence_choice: respond`` only)."""
    seconds: float = 0.0


@dataclass
class JudgeRow:
    n: int
    first: str
    second: str
    summary: JudgeSummary
    orders: list[bool] = field(default_factory=list)
    """Per user: True when ``second`` was shown to the judge as "A"."""


@dataclass
class SequenceResult:
    dataset: str
    users: dict[int, list[int]]
    """Sampled users per length N."""
    sequences: dict[int, dict[str, dict[int, list[int]]]]
    """``sequences[N][source][user]``: the generated (or true) item ids in order."""
    objective: list[ObjectiveRow]
    judge: list[JudgeRow]
    labels: dict[str, str]
    judge_name: str = ""
    seconds: float = 0.0
    usage: str = ""
    """The LLM usage line (calls, tokens, latency), when an LLM was used."""

    def rows(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for r in self.objective:
            out.append({
                "dataset": self.dataset, "table": "objective", "N": r.n, "sequence": self.labels[r.source],
                "users": r.hit_rate.n, "hit_rate": r.hit_rate.mean, "hit_rate_stderr": r.hit_rate.stderr,
                "hit_rate_ci_low": r.hit_rate.low, "hit_rate_ci_high": r.hit_rate.high,
                "genre_js": r.divergence.mean, "genre_js_stderr": r.divergence.stderr,
                "genre_js_ci_low": r.divergence.low, "genre_js_ci_high": r.divergence.high,
                "embedding_similarity": r.similarity.mean, "embedding_similarity_stderr": r.similarity.stderr,
                "embedding_similarity_ci_low": r.similarity.low, "embedding_similarity_ci_high": r.similarity.high,
                "fallbacks": r.fallbacks, "seconds": round(r.seconds, 2),
            })  # fmt: skip
        for j in self.judge:
            row: dict[str, Any] = {
                "dataset": self.dataset,
                "table": "judge",
                "N": j.n,
                "A": self.labels[j.first],
                "B": self.labels[j.second],
                "users": j.summary.score.n,
                "judge": self.judge_name,
            }
            row.update({label: share for label, share in zip(JUDGE_LABELS, j.summary.shares, strict=True)})
            score = j.summary.score
            row.update(score=score.mean, score_stderr=score.stderr, score_ci_low=score.low, score_ci_high=score.high,
                       position_bias=j.summary.position_bias, fallbacks=j.summary.fallbacks)  # fmt: skip
            out.append(row)
        return out

    def markdown(self) -> str:
        lines = [f"# Sequence generation on {self.dataset}", "",
                 "Mean ± standard error [bootstrap 95% interval] over users. ↑ higher is better, ↓ lower is better.",
                 "", "## Objective metrics", "",
                 "| N | sequence | held-out hit rate ↑ | genre JS divergence from history ↓ | "
                 "embedding similarity to ground truth ↑ | fallbacks |", "|---|---|---|---|---|---|"]  # fmt: skip
        for r in self.objective:
            lines.append(f"| {r.n} | {self.labels[r.source]} | {r.hit_rate.format()} | {r.divergence.format()} | "
                         f"{r.similarity.format()} | {r.fallbacks} |")  # fmt: skip
        if self.judge:
            lines += ["", f"## LLM judge ({self.judge_name}), the paper's 5-point scale", "",
                      "Share of verdicts per label with A and B as named (the order shown to the judge was "
                      "randomised and mirrored back). Score: +2 = A much more likely ... -2 = B much more likely. "
                      "Position bias: mean score of whichever sequence was shown first (0 = none).", "",
                      "| N | A | B | " + " | ".join(JUDGE_LABELS) + " | score | position bias | fallbacks |",
                      "|---|---|---|" + "---|" * len(JUDGE_LABELS) + "---|---|---|"]  # fmt: skip
            for j in self.judge:
                shares = " | ".join(f"{s:.2f}" for s in j.summary.shares)
                lines.append(f"| {j.n} | {self.labels[j.first]} | {self.labels[j.second]} | {shares} | "
                             f"{j.summary.score.format(2)} | {j.summary.position_bias:+.2f} | "
                             f"{j.summary.fallbacks} |")  # fmt: skip
        lines += ["", f"Wall time: {self.seconds:.1f} s."]
        if self.usage:
            lines += ["", self.usage]
        return "\n".join(lines) + "\n"


def _pick_by_score(model: Any, user: int, page: np.ndarray, rng: np.random.Generator) -> int:
    scores = np.asarray(model.score_items(user, [int(i) for i in page], rng), dtype=np.float64)
    if scores.shape != page.shape or not np.isfinite(scores).all():
        raise ValueError(f"score_items for user {user} returned {scores.shape} scores for a page of {len(page)}")
    return int(page[top_k(scores, 1, rng)[0]])


def sequence_kernel(train: Dataset, page_size: int, n: int) -> SessionKernel:
    """The session kernel of ``respond`` picks: the recommender's pages shown as given, no catalogue search."""
    rules = SessionRules(page_size=page_size, max_pages=max(n, 1), duplicate_rule="allow", social=False)
    return SessionKernel(SessionTables.build(train), None, rules)


def generate_sequence(
    model: Any, user: int, n: int, mf_scores: np.ndarray, seen: np.ndarray, page_size: int, choice: str,
    rng: np.random.Generator, kernel: SessionKernel | None = None,
) -> tuple[list[int], int]:  # fmt: skip
    """``n`` picks of ``model`` (``None`` = the recommender's first item) and how many fell back to scoring.

    ``choice='respond'`` needs ``kernel`` (:func:`sequence_kernel`)."""
    picked: list[int] = []
    fallbacks = 0
    respond = model is not None and choice == "respond"
    if respond and kernel is None:
        raise ValueError("sequence_choice 'respond' needs the session kernel (sequence_kernel)")
    lane = SessionStream(rng)
    for _ in range(n):
        page = top_k_excluding(mf_scores, np.concatenate([seen, np.asarray(picked, dtype=np.int64)]), page_size)
        if model is None:
            picked.append(int(page[0]))
            continue
        if respond:
            assert kernel is not None
            if lane.session is None or not lane.session.open:  # first step, or the user left: a new session
                kernel.restart([lane], [0], model, user_ids=[user], time_h=0.0)
            final = kernel.step_sessions([lane.session], [page], model)[0].outcome.final  # type: ignore[list-item]
            if final.action == Action.WATCH and final.item in set(page.tolist()):
                picked.append(int(final.item))  # type: ignore[arg-type]
                continue
            fallbacks += 1
        picked.append(_pick_by_score(model, user, page, rng))
    if respond:
        assert kernel is not None
        if lane.session is not None and lane.session.open:
            kernel.end([lane.session], models=[model])
        model.write_ended()
    return picked, fallbacks


def _title(dataset: Dataset, item: int) -> str:
    row = dataset.items.iloc[item]
    return f"{row.title} ({row.year})" if row.year and row.year > 0 else str(row.title)


def run_sequence(resources: Resources, *, progress: bool = True) -> SequenceResult:
    """Run sequence generation for ``resources.eval.user_models`` (see the module docstring)."""
    from recagent_gym.recommenders.mf import MFRecommender  # torch is imported only when needed

    started = time.perf_counter()
    cfg = resources.eval
    full = resources.dataset
    seed = cfg.seed
    genres = GenreDivergence(full.genre_matrix())
    similarity = EmbeddingSimilarity(resources.item_vectors())
    hits = HeldOutHitRate()
    boot = dict(bootstrap=cfg.bootstrap_samples, confidence=cfg.confidence)
    kinds = list(cfg.user_models)
    sources = [GROUND_TRUTH, MF_TOP, *kinds]
    labels = dict(SOURCE_LABELS)
    all_users: dict[int, list[int]] = {}
    sequences: dict[int, dict[str, dict[int, list[int]]]] = {}
    objective: list[ObjectiveRow] = []
    judge_rows: list[JudgeRow] = []
    judge_name = ""
    total = sum(len(kinds) + 1 for _ in cfg.sequence_lengths) * cfg.users
    with tqdm(total=total, desc="sequence generation", unit="user", disable=not progress) as bar:
        for n in cfg.sequence_lengths:
            users = [int(u) for u in sample_users(full, cfg.users, cfg.min_interactions, child_rng(seed, "users"))]
            all_users[n] = users
            split = leave_last_out(full, n, min_train=cfg.min_interactions - n)
            train = split.train
            truth = {u: list(split.held_out[u]) for u in users}
            history = {u: train.user_history(u)["item_id"].to_numpy(np.int64) for u in users}
            bar.set_postfix_str(f"N={n}: training MF")
            mf = MFRecommender(train, cfg.page_size, resources.config.recommender, seed=int(seed))
            mf_scores = {u: np.asarray(mf.scores(u), dtype=np.float64) for u in users}
            kernel = sequence_kernel(train, cfg.page_size, n) if cfg.sequence_choice == "respond" else None
            seqs: dict[str, dict[int, list[int]]] = {GROUND_TRUTH: truth}
            fallbacks: dict[str, int] = {GROUND_TRUTH: 0}
            seconds: dict[str, float] = {GROUND_TRUTH: 0.0}
            for kind in [MF_TOP, *kinds]:
                start = time.perf_counter()
                bar.set_postfix_str(f"N={n}: {kind}")
                model = None if kind == MF_TOP else resources.build(kind, train)
                if (label := resources.row_label(kind, model)) is not None:
                    labels[kind] = label
                seqs[kind], fallbacks[kind] = {}, 0
                for u in users:
                    rng = child_rng(seed, "sequence", n, kind, u)
                    seq, fb = generate_sequence(model, u, n, mf_scores[u], history[u], cfg.page_size,
                                                cfg.sequence_choice, rng, kernel)  # fmt: skip
                    seqs[kind][u] = seq
                    fallbacks[kind] += fb
                    bar.update(1)
                seconds[kind] = time.perf_counter() - start
            sequences[n] = seqs
            for source in sources:
                per_hit = hits.per_user([truth[u] for u in users], [seqs[source][u] for u in users])
                per_div = np.array([genres(seqs[source][u], history[u]) for u in users])
                per_sim = np.array([similarity(seqs[source][u], truth[u]) for u in users])
                objective.append(ObjectiveRow(
                    n, source,
                    summarize(per_hit, child_rng(seed, "boot-hit", n, source), **boot),
                    summarize(per_div[np.isfinite(per_div)], child_rng(seed, "boot-js", n, source), **boot),
                    summarize(per_sim[np.isfinite(per_sim)], child_rng(seed, "boot-sim", n, source), **boot),
                    fallbacks.get(source, 0), seconds.get(source, 0.0),
                ))  # fmt: skip
            if cfg.judge:
                bar.set_postfix_str(f"N={n}: judge")
                pairs = [(k, GROUND_TRUTH) for k in kinds] + list(itertools.combinations(kinds, 2))
                judge_rows += _judge(resources, full, n, users, seqs, history, pairs, cfg.judge_history, seed, boot)
                judge_name = getattr(resources.judge_model(), "name", "")
    result = SequenceResult(full.name, all_users, sequences, objective, judge_rows, labels, judge_name,
                            time.perf_counter() - started, resources.usage_line())  # fmt: skip
    logger.info("sequence generation on %s in %.1fs", full.name, result.seconds)
    return result


def _judge(
    resources: Resources, dataset: Dataset, n: int, users: Sequence[int], seqs: dict[str, dict[int, list[int]]],
    history: dict[int, np.ndarray], pairs: Sequence[tuple[str, str]], shown_history: int, seed: int,
    boot: dict[str, Any],
) -> list[JudgeRow]:  # fmt: skip
    """All comparisons of one length in one batched ``choose`` (plus one re-ask batch)."""
    prompts: list[str] = []
    orders: list[list[bool]] = []
    for first, second in pairs:
        flags = []
        for u in users:
            swap = bool(child_rng(seed, "judge-order", n, first, second, u).random() < 0.5)
            a, b = (seqs[second][u], seqs[first][u]) if swap else (seqs[first][u], seqs[second][u])
            recent = history[u][-shown_history:] if shown_history else history[u][:0]
            prompts.append(sequence_judge.build(
                history=[_title(dataset, int(i)) for i in recent],
                sequence_a=[_title(dataset, i) for i in a],
                sequence_b=[_title(dataset, i) for i in b],
            ))  # fmt: skip
            flags.append(swap)
        orders.append(flags)
    llm = resources.judge_model()
    checked = choose_checked(llm, prompts, [sequence_judge.OPTIONS] * len(prompts), sequence_judge.parse,
                             seed=int(child_rng(seed, "judge-seed", n).integers(0, SEED_HIGH)))  # fmt: skip
    rows = []
    for p, (first, second) in enumerate(pairs):
        part = checked[p * len(users) : (p + 1) * len(users)]
        fallbacks = sum(c.value is None for c in part)
        if fallbacks:
            logger.warning("judge N=%d %s vs %s: %d invalid answers fell back to A≈B", n, first, second, fallbacks)
        labels = [sequence_judge.FALLBACK_INDEX if c.value is None else int(c.value) for c in part]
        summary = aggregate_judgements(labels, orders[p], child_rng(seed, "boot-judge", n, first, second),
                                       fallbacks=fallbacks, **boot)  # fmt: skip
        rows.append(JudgeRow(n, first, second, summary, orders[p]))
    return rows
