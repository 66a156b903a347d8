"""The run summary: event counts, most popular items, LLM tokens and calls, cost estimate, seconds per round."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from recagent_gym.data.schema import Dataset
from recagent_gym.llm.config import LLMConfig
from recagent_gym.llm.protocol import Usage


def cost_estimate(usage: Usage, llm: LLMConfig) -> float:
    """USD: the backend's own figure when it reports one, else tokens times the configured prices."""
    if usage.cost_usd > 0:
        return usage.cost_usd
    prompt = usage.prompt_tokens / 1000 * llm.cost_per_1k_prompt
    return prompt + usage.completion_tokens / 1000 * llm.cost_per_1k_completion


def summarise(
    *,
    dataset: Dataset,
    rounds: Sequence[dict[str, Any]],
    interactions: Sequence[dict[str, Any]],
    usage: Usage,
    llm: LLMConfig,
    agents: int,
    top_k: int = 10,
) -> dict[str, Any]:
    """``rounds``: one record per completed round (``counts``, ``seconds``, ``tokens``, ``active``)."""
    counts: Counter[str] = Counter()
    for record in rounds:
        counts.update(record.get("counts", {}))
    popular = Counter(int(r["item_id"]) for r in interactions).most_common(top_k)
    titles = dataset.items["title"]
    seconds = [float(r["seconds"]) for r in rounds]
    tokens = [int(r["tokens"]) for r in rounds]
    return {
        "dataset": dataset.name,
        "agents": agents,
        "rounds": len(rounds),
        "events": dict(sorted(counts.items())),
        "interactions": len(interactions),
        "active_per_round": [int(r["active"]) for r in rounds],
        "most_popular": [{"item_id": i, "title": str(titles.iat[i]), "watches": n} for i, n in popular],
        "llm": {
            "calls": usage.calls,
            "cached_calls": usage.cached_calls,
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "latency_s": round(usage.latency_s, 3),
            "cost_usd": round(cost_estimate(usage, llm), 6),
        },
        "seconds_per_round": seconds,
        "mean_seconds_per_round": sum(seconds) / len(seconds) if seconds else 0.0,
        "tokens_per_round": tokens,
        "mean_tokens_per_round": sum(tokens) / len(tokens) if tokens else 0.0,
    }
