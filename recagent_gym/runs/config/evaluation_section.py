"""Configuration of the paper's evaluations: discrimination (a, b), sequence generation, efficiency, social study."""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import Field, Strict, StrictInt, field_validator, model_validator

from recagent_gym.llm.config import LLMConfig
from recagent_gym.settings_section import Section

NegativeSampler = Literal["uniform", "popularity-matched"]
NEGATIVE_SAMPLERS: tuple[str, ...] = ("uniform", "popularity-matched")
AGREEMENT_RECOMMENDERS: tuple[str, ...] = (
    "random", "popularity", "recent-popularity", "quality", "itemknn", "userknn", "mf", "mf-8", "mf-128", "bpr",
    "lightgcn", "ease", "gru4rec", "oracle", "anti-oracle",
)  # fmt: skip
"""The agreement test's zoo (``evaluation/agreement/zoo.py``)."""

Setting = Annotated[tuple[StrictInt, StrictInt], Strict(False)]
"""A discrimination setting ``(a, b)``; a YAML or JSON list ``[a, b]`` is accepted (strict sections want tuples)."""


AgreementUserModel = Literal[
    "recsim",
    "embedding",
    "distilled",
    "llm",
    "llm+fit",
    "llm+prior",
    "llm+prior-parts",
    "llm-only",
    "llm-embedding-term",
]
AGREEMENT_USER_MODELS: tuple[str, ...] = get_args(AgreementUserModel)
"""The user models ``evaluate agreement`` knows (``--user-model``, ``evaluation.agreement_user_models``)."""


class EvaluationConfig(Section):
    users: int = Field(20, ge=1, le=100_000)
    """Users sampled per evaluation (the paper used 20; more users give tighter intervals)."""

    seed: int = Field(0, ge=0)
    """Seed of every draw of an evaluation (users, negatives, shuffles, donors, judge order, bootstrap)."""

    user_models: list[Literal["llm", "recsim", "embedding", "prior", "llm+prior", "llm+prior-parts", "distilled"]] = (
        Field(default_factory=lambda: ["embedding", "recsim", "llm"])
    )
    """User models evaluated, in table order (Random and Popularity rows are always added to discrimination).
    ``prior`` and ``llm+prior``: the behavioural prior alone and combined with the LLM agent, with the weights of
    ``user.prior_weights`` (``recagent-gym calibrate``; ``evaluation/prior_ablation.py``); ``llm+prior-parts`` with its
    ``parts`` fit (the LLM's score and the embedding term each at its own weight). ``distilled``: the shipped
    distilled users (or ``user.distilled_path``), their tables re-encoded on the training split, the users they were
    fitted on left out (``evaluation/distilled_row.py``); only where the model fits the dataset."""

    min_interactions: int = Field(30, ge=2)
    """Interactions (held-out items included) a sampled user must have. The same users are drawn whatever the
    settings and lengths (so runs with different settings or models share users and candidates), and each keeps at
    least ``min_interactions - a`` (or ``- N``) training interactions."""

    settings: list[Setting] = Field(default_factory=lambda: [(1, 5), (3, 3), (3, 7), (1, 9)])
    """Discrimination settings ``(a, b)``: ``a`` held-out items shown among ``b`` negatives (the paper's four)."""

    negatives: Literal["uniform", "popularity-matched", "both"] = "both"
    """Negative sampler of the discrimination test. ``uniform``: unseen items uniformly (the paper). ``popularity-
    matched``: unseen items from the held-out item's popularity band (``recagent_gym.data.splits``). ``both``."""

    popularity_bands: int = Field(10, ge=2, le=1000)
    """Equal-size bands of items sorted by interaction count used by popularity-matched negatives (10 = deciles)."""

    personalization_check: bool = True
    """Re-score every model with each user's history swapped for another random user's and report the drop."""

    bootstrap_samples: int = Field(1000, ge=0, le=100_000)
    """Bootstrap resamples of users for the confidence intervals (0: intervals from the standard error only)."""

    confidence: float = Field(0.95, gt=0.0, lt=1.0)
    """Coverage of the reported confidence intervals."""

    preference_positives: int = Field(3, ge=1, le=50)
    """Preference 1:m (Agent4Rec): held-out items per user, each mixed with ``m`` never-interacted items."""

    preference_ratios: list[int] = Field(default_factory=lambda: [1, 2, 3, 9])
    """Preference 1:m: the ratios ``m`` (Agent4Rec's 1, 2, 3, 9); one setting ``(a, m * a)`` per ratio."""

    rating_held_out: int = Field(3, ge=1, le=50)
    """Rating prediction: each user's last items by time whose ratings are predicted."""

    rating_negatives: int = Field(9, ge=1, le=200)
    """Rating prediction: never-interacted items scored together with the held-out items; a held-out item's rank
    among these candidates places it on the user's own training rating scale (see ``evaluation/rating.py``)."""

    sequence_lengths: list[int] = Field(default_factory=lambda: [5, 10])
    """Sequence generation: held-out lengths N (the paper's 5 and 10)."""

    page_size: int = Field(5, ge=1, le=100)
    """Sequence generation: items the MF recommender shows per step (the paper's 5)."""

    sequence_choice: Literal["score", "respond"] = "score"
    """How a simulated user picks from a page. ``score``: the top item of ``score_items`` (a forced choice, as the
    paper's protocol requires one pick per step; the user's state does not evolve). ``respond``: the user model's
    own ``respond`` (state evolves); a non-WATCH answer falls back to ``score`` and is counted."""

    judge: bool = True
    """Sequence generation: ask an LLM judge to compare sequences on the paper's 5-point scale."""

    judge_llm: LLMConfig | None = None
    """Backend of the judge; None uses the top-level ``llm`` section."""

    judge_history: int = Field(10, ge=0, le=200)
    """Most recent training titles of the user shown to the judge."""

    embedder: Literal["minilm", "hashing"] = "minilm"
    """Item embeddings of the embedding user and the similarity metric: all-MiniLM-L6-v2, or the deterministic
    hashing embedder (fast, for tests and smoke runs)."""

    embedding_cache_dir: str | None = None
    """Folder caching the item embeddings (``.npz`` keyed by model and texts, checked on read); a relative folder
    lies under the cache folder (``$RECAGENT_GYM_CACHE`` or ``~/.cache/recagent-gym``); None recomputes them per
    run."""

    efficiency_agents: list[int] = Field(default_factory=lambda: [1, 10, 50, 100])
    """Efficiency (local server): agent counts, one simulation per count and key count (the paper's 1..500; the
    500-agent point is opt-in with ``--agents``). Each must not exceed the dataset's users."""

    efficiency_keys: list[int] = Field(default_factory=lambda: [1, 5])
    """Efficiency (local server): numbers of fake API keys, used round-robin by the OpenAI backend (the paper went
    1..5; ``--keys 1,2,3,4,5`` runs them all, the default keeps the run within a few minutes on 2 cores)."""

    efficiency_latency_ms: float = Field(300.0, ge=0.0, le=60_000.0)
    """Efficiency (local server): fixed latency the local server adds to every request, in milliseconds."""

    efficiency_per_key_concurrency: int = Field(4, ge=1, le=1024)
    """Efficiency (local server): requests one key may have in service at once; more wait in line (the per-key
    rate limit of a provider, see ``llm/local_server.py``). The client may send ``keys x`` this many at once."""

    efficiency_server_process: bool = False
    """Efficiency (local server): run the local server in a process of its own, as a real LLM server is, instead of
    a thread of the simulator's process; its CPU is then the ``server_cpu_s_per_round`` column, out of the
    process's. Off by default: on a loaded 2-core machine it was no faster (10 agents 2.57 s per round against 2.43,
    100 agents 5.35 against 5.04; ``docs/speed.md``), and off keeps the CPU columns comparable with earlier runs."""

    efficiency_rounds: int = Field(2, ge=1, le=100)
    """Efficiency: rounds simulated per point (seconds per round are reported per round and as a mean)."""

    efficiency_all_active: bool = True
    """Efficiency: every agent is active in every round (uniform activation with probability 1, the threshold raised
    to the agent count), as the paper's seconds-per-round figure counts agents; off keeps the configuration's own
    activation (``simulate_paper``: Pareto, 50 at most)."""

    efficiency_embedded_agents: list[int] = Field(default_factory=lambda: [1, 2, 5])
    """Efficiency with ``--backend embedded``: agent counts (small: Gemma 3 270M on CPU)."""

    efficiency_embedder: Literal["minilm", "hashing"] = "minilm"
    """Efficiency: the agents' memory embedder. ``minilm`` (default) is what ``simulate`` runs, so the figures are
    the simulator's; ``hashing`` (a cheap stand-in) leaves the CPU cost of embedding out. Every table says which."""

    social_agents: int = Field(20, ge=2, le=1000)
    """Social study: agents per simulation."""

    social_rounds: int = Field(5, ge=1, le=200)
    """Social study: rounds per simulation."""

    social_random_k: int = Field(2, ge=1, le=100)
    """Social study: random items per page in the ``MF + random items`` mitigation condition (``rec_random_k``)."""

    social_window: int = Field(1, ge=1, le=200)
    """Social study: genre entropy at round r is over the items a user watched in rounds ``r - window + 1 .. r``."""

    agreement_users: int = Field(200, ge=2, le=100_000)
    """Agreement: held-out users (each plays ``agreement_sessions`` sessions per recommender and user model)."""

    agreement_pool: int = Field(50, ge=2, le=10_000)
    """Agreement: candidates per user (RecAgent-v1's K): the user's real future items among never-seen negatives."""

    agreement_future: int = Field(10, ge=1, le=1000)
    """Agreement: each user's last items by time held out as its real future (all of them are in its pool)."""

    agreement_min_history: int = Field(10, ge=1)
    """Agreement: users keep at least this many items of history before the cut (others are not sampled)."""

    agreement_split: Literal["leave-last-out", "global"] = "leave-last-out"
    """Agreement: ``leave-last-out`` holds out each user's last ``agreement_future`` items (one user's history can
    postdate another's future); ``global`` cuts everyone at one time (``agreement_cut_quantile`` of the timestamps)
    and holds out each user's first ``agreement_future`` items after it (no history row postdates a future row;
    on MovieLens few users are active on both sides of a cut)."""

    agreement_cut_quantile: float = Field(0.9, gt=0.0, lt=1.0)
    """Agreement, ``global`` split: the cut's quantile of all interactions' timestamps."""

    agreement_pages: int = Field(4, ge=1, le=1000)
    """Agreement: pages per session. A session shows at most ``pages x page_size`` of the pool (20 of 50 by
    default), so what a recommender puts first matters; with the whole pool shown every ranking would look alike."""

    agreement_full_sessions: bool = True
    """Agreement: the simulated users see every page of every session, as the replayed real users do (the test runs
    them with ``user.full_sessions``: neither patience, a chosen leave nor the RecSim-style time budget ends a
    session early). Like with like: with leaving, the reward per page shown is over the pages a user stayed for,
    which the real side does not select, and on MovieLens-1M that cost the default users about half their agreement
    with uniform negatives (``docs/findings.md``). False: the users' own leaving, as in the envs."""

    agreement_sessions: int = Field(1, ge=1, le=1000)
    """Agreement: sessions each held-out user of a simulated user model plays per recommender (its return is their
    mean; the first starts in the same seeded state for every recommender). A simulated user draws its watches,
    patience and noise, so with one session its ranking of recommenders carries that sampling noise on top of the
    users'; the replayed real users are deterministic and always play one."""

    agreement_user_models: list[AgreementUserModel] = Field(
        default_factory=lambda: ["recsim", "embedding", "distilled", "llm", "llm+fit"]
    )
    """Agreement: simulated user models compared with the real users (``distilled`` needs a model for the dataset;
    ``llm+fit`` are the LLM agents with the page decision ``recagent-gym users fit-agreement`` fitted to the ranking
    on this dataset's train users: ``user.prior_weights`` where it names such a fit, else the fit shipped for the
    bundled data where it applies, else a fit on 60 other users made first; ``llm+prior`` uses a calibrate file:
    ``user.prior_weights`` where it is one, else the calibration shipped for the bundled data where it applies, else
    it calibrates on other users first; ``llm+prior-parts`` the same file's
    ``parts`` fit, the LLM's score and the embedding term each at its own weight). The ablations of the LLM agent's
    item score share the ``llm`` row's scores (no LLM call of their own): ``llm-only`` is the LLM's score alone
    (``user.score_embedding_weight=0``), ``llm-embedding-term`` the agent's embedding relevance alone
    (``user.score_llm_weight=0``)."""

    agreement_recommenders: list[
        Literal[
            "random",
            "popularity",
            "recent-popularity",
            "quality",
            "itemknn",
            "userknn",
            "mf",
            "mf-8",
            "mf-128",
            "bpr",
            "lightgcn",
            "ease",
            "gru4rec",
            "oracle",
            "anti-oracle",
        ]
    ] = Field(default_factory=lambda: list(AGREEMENT_RECOMMENDERS))
    """Agreement: the recommender zoo (``evaluation/agreement/zoo.py``), each fitted on the history only."""

    agreement_swapped: list[str] = Field(default_factory=list)
    """Agreement: recommenders (``itemknn``, ``mf``, ``lightgcn`` or a ``--policy`` name) that also play each session
    reading another held-out user's encoding (a fixed derangement of the users), as rows ``<name>~swapped``: the
    personalisation control. Real users lose hits when the recommender reads someone else's history; a user model
    that rewards personalisation as people do loses return by as much, in the same order."""

    sim2real_negatives: Literal["uniform", "popularity-matched"] = "uniform"
    """The negatives of the real offline metric that ``evaluate rl-comparison`` and ``users transfer`` report beside
    simulated returns (:mod:`~recagent_gym.runs.evaluation.agreement.sim2real`). Uniform negatives are mostly
    long-tail items (on the bundled data half have at most 2 ratings), so popularity alone finds the future among
    them; popularity-matched negatives are as popular as the future items, closer to RecAgent-v1's retrieved
    candidates (``runs/rl_recsim`` measures both in the README)."""

    agreement_real_metric: Literal["hit", "ndcg", "session_ndcg", "recall"] = "hit"
    """Agreement: the real side's metric whose ranking each user model's mean return is compared with. ``hit``
    (default): hit@k per page averaged over the session, i.e. the replayed real users' watches per page, the real
    counterpart of a simulated user's return under the same one-watch-per-page sessions; ``ndcg``: NDCG@k per page;
    ``session_ndcg``: NDCG of the session's pages read as one list; ``recall``: the share of the future items shown
    (``evaluation/agreement/run.py``)."""

    @field_validator("settings")
    @classmethod
    def _check_settings(cls, value: list[tuple[int, int]]) -> list[tuple[int, int]]:
        if not value:
            raise ValueError("at least one (a, b) setting is needed")
        for a, b in value:
            if a < 1 or b < 1:
                raise ValueError(f"setting ({a}, {b}): a and b must be >= 1")
        return value

    @model_validator(mode="after")
    def _check_history(self) -> EvaluationConfig:
        longest = max(max(a for a, _ in self.settings), max(self.sequence_lengths), self.preference_positives,
                      self.rating_held_out)  # fmt: skip
        if self.min_interactions <= longest:
            raise ValueError(
                f"min_interactions ({self.min_interactions}) must exceed the largest a, N, preference_positives or "
                f"rating_held_out ({longest}), "
                "so every sampled user keeps a training history"
            )
        return self

    @field_validator("efficiency_agents", "efficiency_keys", "efficiency_embedded_agents")
    @classmethod
    def _check_sizes(cls, value: list[int]) -> list[int]:
        if not value or any(n < 1 for n in value):
            raise ValueError("agent and key counts must be a non-empty list of numbers >= 1")
        return sorted(set(value))

    @field_validator("preference_ratios")
    @classmethod
    def _check_ratios(cls, value: list[int]) -> list[int]:
        if not value or any(m < 1 for m in value):
            raise ValueError("preference_ratios must be a non-empty list of ratios m >= 1")
        return sorted(set(value))

    @field_validator("sequence_lengths")
    @classmethod
    def _check_lengths(cls, value: list[int]) -> list[int]:
        if not value or any(n < 1 for n in value):
            raise ValueError("sequence_lengths must be a non-empty list of lengths >= 1")
        return value

    @field_validator("user_models")
    @classmethod
    def _check_models(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError(f"user_models lists a model twice: {value}")
        return value
