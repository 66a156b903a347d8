"""``recagent-gym users collect``: the LLM users' page decisions over diverse pages, appended to Parquet logs.

Resumable: the plan of sessions is fixed by the seed, finished sessions are read back from the logs and skipped,
and each batch of sessions is one new part file, so an interrupted run loses at most the batch in flight. The LLM
calls go through the configured stack, so ``llm.cache_path`` (response cache) is reused across runs.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from recagent_gym.data.schema import Dataset
from recagent_gym.recommenders.search import CatalogueSearch
from recagent_gym.users.distilled import logs
from recagent_gym.users.distilled.errors import DistillError
from recagent_gym.users.distilled.harness import plan_sessions, run_sessions
from recagent_gym.users.distilled.pages import SOURCES, PageSources
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
    progress: bool = True,
) -> int:
    """Run the planned sessions not yet in ``out``; returns the number of decision rows written."""
    unknown = sorted(set(sources) - set(SOURCES))
    if unknown:
        raise DistillError(f"unknown page source(s) {', '.join(unknown)}; expected some of {', '.join(SOURCES)}")
    if sessions < 1 or batch < 1:
        raise DistillError(f"sessions and batch must be >= 1, got {sessions} and {batch}")
    meta = {
        "dataset": dataset.name,
        "sources": list(sources),
        "seed": seed,
        "page_size": page_size,
        "max_pages": max_pages,
        "model": model_name,
    }
    previous = logs.read_meta(out)
    clash = {k: (previous[k], v) for k, v in meta.items() if k in previous and previous[k] != v}
    if clash:
        raise DistillError(f"{out} holds logs collected with other settings {clash}; use another --out")
    logs.write_meta(out, {**meta, "sessions": max(sessions, int(previous.get("sessions", 0)))})
    done = logs.done_sessions(out)
    todo = [p for p in plan_sessions(range(dataset.n_users), list(sources), sessions, seed) if p.session_id not in done]
    page_sources = PageSources(dataset, page_size=page_size, config=config, seed=seed)
    search = CatalogueSearch(dataset)
    written = 0
    bar = _bar(len(todo), len(done), progress)
    while todo:
        chunk, seen = [], set()
        for plan in todo:  # one session per user in a batch
            if plan.user_id not in seen and len(chunk) < batch:
                chunk.append(plan)
                seen.add(plan.user_id)
        taken = {p.session_id for p in chunk}
        todo = [p for p in todo if p.session_id not in taken]
        rows = run_sessions(model, chunk, page_sources, search, max_pages=max_pages, seed=seed)
        logs.write_part(out, rows)
        written += len(rows)
        bar.update(len(chunk))
    bar.close()
    log.info("collected %d decisions into %s (%d sessions were already there)", written, out, len(done))
    return written


def _bar(total: int, initial: int, enabled: bool) -> Any:
    from tqdm import tqdm

    return tqdm(total=total + initial, initial=initial, unit="session", disable=not enabled, desc="collect")
