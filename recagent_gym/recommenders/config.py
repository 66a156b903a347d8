"""Configuration of the recommender used by the simulator and the evaluations."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from recagent_gym.settings_section import Section


class RecommenderConfig(Section):
    model: Literal["random", "popularity", "mf"] = "mf"
    """Recommender model: random, most popular, or matrix factorisation."""

    rec_random_k: int = Field(0, ge=0)
    """Random items mixed into every page (the paper's ``rec_random_k``)."""

    mf_dim: int = Field(32, ge=1)
    """Embedding size of the MF model."""

    mf_epochs: int = Field(5, ge=1)
    """Training epochs of the MF model."""

    mf_lr: float = Field(0.01, gt=0.0)
    """Learning rate of the MF model."""

    mf_weight_decay: float = Field(1e-5, ge=0.0)
    """L2 regularisation of the MF model."""

    retrain_every: int = Field(0, ge=0)
    """Retrain the MF model from simulated interactions every N sessions (the paper's real-time training); 0 never."""

    mf_retrain: Literal["incremental", "full"] = "incremental"
    """How an online retrain trains: ``incremental`` (the default) continues from the current factors on the
    interactions observed since the last retrain plus a random replay of the older ones (``mf_replay`` per new one),
    ``mf_incremental_epochs`` epochs, so its cost follows the new interactions, not the dataset; ``full`` trains
    ``mf_epochs`` epochs on the whole dataset plus every observed interaction (seconds per retrain on MovieLens-1M).
    Both learn every observed watch before the next recommendation; ``benchmarks/bench_mf_retrain.py`` compares
    their held-out recall."""

    mf_incremental_epochs: int = Field(5, ge=1)
    """Epochs of an incremental retrain over its new interactions and their replay."""

    mf_replay: int = Field(4, ge=0)
    """Older interactions (dataset and earlier simulated ones, drawn uniformly) replayed per new interaction in an
    incremental retrain, so the factors of users and items that did not act are kept in place."""

    torch_threads: int = Field(1, ge=1)
    """Torch threads for the small MF model (1 thread is far faster than 2 for layers this small)."""

    mf_loss: Literal["bpr", "mse"] = "bpr"
    """MF objective: Bayesian personalised ranking on implicit feedback, or squared error on ratings."""

    mf_batch_size: int = Field(1024, ge=1)
    """Interactions per MF training batch."""
