"""The ``policy`` page source of ``users collect``: pages a trained RecAgent-v1 policy chooses for the LLM users.

A policy's pages depend on what the user did on the previous ones, so its sessions run through RecAgent-v1 itself
(whose steps are the session kernel's), with the LLM users behind a
:class:`~recagent_gym.runs.distill.sessions.Recorder` that writes each decision as the same row the other sources
give (``source == "policy"``). The env describes items as the policy was trained to see them: its item features and
candidate retriever come from an env of the policy's training users (``policy.json``'s ``user_model``, default
``distilled``; ``candidate_mix`` likewise), and ``n_candidates`` from the policy's observation space. Sessions of
this source run one at a time (the env steps one session), so they cost more LLM time per decision than the batched
sources. This is the collection step of a DAgger loop: collect on the policy's own pages, re-distil, retrain.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from recagent_gym.data.schema import Dataset
from recagent_gym.llm.seeding import derive_seed
from recagent_gym.runs.distill.sessions import Recorder, SessionPlan, finish_rows
from recagent_gym.users.distilled.errors import DistillError

SOURCE = "policy"


class PolicySessions:
    """Runs ``policy``-source sessions: the loaded policy on RecAgent-v1 with ``model`` (the LLM users) recorded."""

    def __init__(self, model: Any, dataset: Dataset, config: Any, policy_path: str | Path, *, max_pages: int) -> None:
        from recagent_gym.runs.make_env import SharedCandidates
        from recagent_gym.runs.policies.policy_files import load_policy, read_meta, same_space, trained_env

        path = Path(policy_path)
        if not path.is_file():
            raise DistillError(f"--policy {path}: no such file (a policy.zip written by 'users transfer')")
        meta = read_meta(path, required=False)  # optional here: the zip's spaces say what the policy needs
        if meta and trained_env(meta) != "RecAgent-v1":
            raise DistillError(f"--policy {path}: trained on {trained_env(meta)}; the policy source needs RecAgent-v1")
        if not isinstance(meta.get("user_model", ""), str) or not isinstance(meta.get("candidate_mix"), dict | None):
            raise DistillError(f"--policy {path}: its policy.json's user_model or candidate_mix is not a name / mix")
        self.policy = load_policy(path, "ppo")
        space = getattr(self.policy.observation_space, "spaces", {})
        if "candidates" not in space or len(getattr(space["candidates"], "shape", ())) != 2:
            raise DistillError(f"--policy {path}: not an item-scoring policy (its observation has no candidates)")
        cfg = config.model_copy(deep=True)
        cfg.env.max_pages = max_pages
        cfg.env.user_model_reset_on_seed = False  # the users' state runs on across sources, as in the other sessions
        cfg.train.n_candidates = int(space["candidates"].shape[0])
        cfg.train.candidate_mix = meta.get("candidate_mix", cfg.train.candidate_mix)
        users = np.arange(dataset.n_users)
        shared = SharedCandidates(cfg, dataset, users, trained_on=meta.get("user_model", "distilled"))
        self.recorder = Recorder(model)
        self.env = shared.make_env(cfg, dataset, users, self.recorder)
        if not same_space(self.env.observation_space, self.policy.observation_space):
            raise DistillError(f"--policy {path}: trained on another observation than RecAgent-v1 gives here "
                               "(another dataset or item features)")  # fmt: skip

    def run(self, plans: Sequence[SessionPlan], seed: int) -> list[dict[str, Any]]:
        """One session per plan, the policy acting deterministically; the decision rows, ratings filled in."""
        rows: list[dict[str, Any]] = []
        for plan in plans:
            self.recorder.track([plan])
            rows_of = self.recorder.rows[plan.user_id]
            reset_seed = derive_seed(seed, "policy session", plan.session_id)
            obs, _ = self.env.reset(seed=reset_seed, options={"user_id": plan.user_id})
            done = False
            while not done:
                action, _ = self.policy.predict(obs, deterministic=True)
                before = len(rows_of)
                obs, reward, terminated, truncated, _ = self.env.step(action)
                if len(rows_of) > before:  # the step's reward on its first row, as the kernel-stepped sources
                    rows_of[before]["reward"] = float(reward)
                done = bool(terminated or truncated)
            self.recorder.inner.write_ended()  # the env may defer writes (user.session_end_batch): ratings now
            rows += finish_rows(self.recorder.inner, plan.user_id, rows_of)
        self.recorder.track([])
        return rows
