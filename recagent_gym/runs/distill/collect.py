"""``recagent-gym users collect``: the LLM users' page decisions over diverse pages, appended to Parquet logs.

The sessions are stepped by the session kernel with its rules (:mod:`~recagent_gym.runs.distill.sessions`): a
batch of sessions is one kernel step after another, one ``respond_batch`` per step across the batch.

Resumable: the plan of sessions is fixed by the seed, finished sessions are read back from the logs and skipped,
and each batch of sessions is one new part file, so an interrupted run loses at most the batch in flight. The LLM
calls go through the configured stack, so ``llm.cache_path`` (response cache) is reused across runs. With a trained
RecAgent-v1 policy (``policy``), the ``policy`` source's sessions show the pages that policy chooses
(:mod:`~recagent_gym.runs.distill.policy_pages`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from recagent_gym.data.schema import Dataset
from recagent_gym.runs.distill import logs
from recagent_gym.runs.distill.pages import SOURCES, PageSources
from recagent_gym.runs.distill.policy_pages import SOURCE as POLICY_SOURCE
from recagent_gym.runs.distill.sessions import (
    PLAN_VERSION,
    SessionPlan,
    plan_sessions,
    reward_function,
    run_sessions,
    session_kernel,
)
from recagent_gym.users.distilled.errors import DistillError
from recagent_gym.users.protocol import UserModel

log = logging.getLogger(__name__)


def collect(
    model: UserModel,
    dataset: Dataset,
    out: str | Path,
    *,
    sessions: int,
    sources: Sequence[str] = SOURCES,
    page_size: int = 5,
    max_pages: int = 10,
    batch: int = 8,
    seed: int = 0,
    config: Any = None,
    model_name: str = "",
    policy: str | Path | None = None,
    users: str | None = None,
    progress: bool = True,
) -> int:
    """Run the planned sessions not yet in ``out``; returns the number of decision rows written (``policy``: a
    RecAgent-v1 ``policy.zip``, required by and only with the ``policy`` source; ``users``: how the LLM users score
    items, recorded in ``collect.json``, and logs collected with other users are refused)."""
    known = (*SOURCES, POLICY_SOURCE)
    unknown = sorted(set(sources) - set(known))
    if unknown:
        raise DistillError(f"unknown page source(s) {', '.join(unknown)}; expected some of {', '.join(known)}")
    if (POLICY_SOURCE in sources) != (policy is not None):
        raise DistillError("the 'policy' page source and --policy go together: give both or neither")
    if sessions < 1 or batch < 1 or max_pages < 1:
        raise DistillError(f"sessions, batch and max_pages must be >= 1, got {sessions}, {batch} and {max_pages}")
    policy_sessions = None  # built first: a bad --policy writes nothing
    if policy is not None:
        from recagent_gym.runs.distill.policy_pages import PolicySessions

        policy_sessions = PolicySessions(model, dataset, config, policy, max_pages=max_pages)
    meta = {
        "dataset": dataset.name,
        "sources": list(sources),
        "seed": seed,
        "page_size": page_size,
        "max_pages": max_pages,
        "model": model_name,
        "plan": PLAN_VERSION,
        **({"policy": str(policy)} if policy is not None else {}),
        **({"users": users} if users is not None else {}),
    }
    previous = logs.read_meta(out)
    if previous and "plan" not in previous:  # logs of the first plan (users in another order): not resumable
        previous = {**previous, "plan": 1}
    clash = {k: (previous[k], v) for k, v in meta.items() if k in previous and previous[k] != v}
    if clash:
        raise DistillError(f"{out} holds logs collected with other settings {clash}; use another --out")
    done = logs.done_sessions(out)  # every part checked before collect.json is touched
    if done and users is not None and "users" not in previous:
        log.warning("%s: its %d sessions were collected before collect.json recorded how the users score items; "
                    "they may come from other agents than these (%s)", out, len(done), users)  # fmt: skip
    logs.write_meta(out, {**meta, "sessions": max(sessions, int(previous.get("sessions", 0)))})
    todo = [p for p in plan_sessions(range(dataset.n_users), list(sources), sessions, seed) if p.session_id not in done]
    page_sources = PageSources(dataset, page_size=page_size, config=config, seed=seed)
    kernel = session_kernel(dataset, config, page_size=page_size, max_pages=max_pages)
    reward = reward_function(config)
    written = 0
    bar = _bar(len(todo), len(done), progress)
    while todo:
        chunk: list[SessionPlan] = []
        seen: set[int] = set()
        for plan in todo:  # one session per user in a batch
            if plan.user_id not in seen and len(chunk) < batch:
                chunk.append(plan)
                seen.add(plan.user_id)
        taken = {p.session_id for p in chunk}
        todo = [p for p in todo if p.session_id not in taken]
        batched = [p for p in chunk if p.source != POLICY_SOURCE]
        rows = run_sessions(model, batched, page_sources, kernel, reward, seed=seed) if batched else []
        if policy_sessions is not None:  # the env steps one session at a time
            rows += policy_sessions.run([p for p in chunk if p.source == POLICY_SOURCE], seed)
        logs.write_part(out, rows)
        written += len(rows)
        bar.update(len(chunk))
    bar.close()
    log.info("collected %d decisions into %s (%d sessions were already there)", written, out, len(done))
    return written


def _bar(total: int, initial: int, enabled: bool) -> Any:
    from tqdm import tqdm

    return tqdm(total=total + initial, initial=initial, unit="session", disable=not enabled, desc="collect")
