"""Plain-data views of a simulation for the page: agents with status, system state, usage, chart series.

All functions only read the simulation; the controller calls them while it holds the simulation's lock.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from recagent_gym.llm.protocol import Usage
from recagent_gym.runs.simulator.summary import cost_estimate

if TYPE_CHECKING:
    from recagent_gym.runs.simulator.runner import Simulation

STATUS_OF_KIND: dict[str, str] = {
    "enter": "recommender",
    "page": "recommender",
    "watch": "recommender",
    "search": "recommender",
    "next": "recommender",
    "leave": "recommender",
    "feeling": "recommender",
    "chat": "social",
    "post": "social",
    "social_none": "social",
    "idle": "idle",
}
"""What an agent was doing in a round, from the kinds of its events there (inactive agents are ``idle``)."""


def agent_statuses(n_agents: int, events: Sequence[dict[str, Any]], round_index: int) -> list[str]:
    """Each agent's status in round ``round_index`` (the last completed one): recommender, social or idle.

    A chat's partner is ``social`` too.
    """
    status = ["idle"] * n_agents
    for event in events:
        if event.get("round") != round_index:
            continue
        kind = STATUS_OF_KIND.get(str(event.get("kind")))
        agent = event.get("agent")
        if kind is None or agent is None or not 0 <= int(agent) < n_agents:
            continue
        if kind != "idle":
            status[int(agent)] = kind
        partner = event.get("extra", {}).get("with")
        if event.get("kind") == "chat" and partner is not None and 0 <= int(partner) < n_agents:
            status[int(partner)] = "social"
    return status


def genre_entropy(genre_lists: Sequence[Sequence[str]]) -> float:
    """Shannon entropy (bits) of the genre distribution of some watched items (each item counts once per genre)."""
    counts = Counter(g for genres in genre_lists for g in genres)
    total = sum(counts.values())
    if total == 0:
        return 0.0
    return float(-sum(n / total * math.log2(n / total) for n in counts.values()))


def round_series(sim: Simulation) -> dict[str, list[float]]:
    """Per completed round: watches, and the genre entropy of that round's watched items."""
    genres = sim.dataset.items["genres"]
    by_round: dict[int, list[int]] = {}
    for row in sim.interactions:
        by_round.setdefault(int(row["round"]), []).append(int(row["item_id"]))
    rounds = [int(r["round"]) for r in sim.rounds]
    return {
        "round": [r + 1 for r in rounds],
        "watches": [float(len(by_round.get(r, []))) for r in rounds],
        "entropy": [round(genre_entropy([genres.iat[i] for i in by_round.get(r, [])]), 4) for r in rounds],
    }


def usage_view(usage: Usage, sim: Simulation) -> dict[str, Any]:
    return {
        "calls": usage.calls,
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "tokens": usage.total_tokens,
        "cost_usd": round(cost_estimate(usage, sim.config.llm), 6),
    }


def agents_view(sim: Simulation, events: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    last = sim.clock.round - 1
    statuses = agent_statuses(len(sim.agents), events, last)
    watched = Counter(int(row["user_id"]) for row in sim.interactions)
    out = []
    for user, profile in enumerate(sim.model.profiles):
        out.append(
            {
                "id": user,
                "name": profile.name,
                "gender": profile.gender,
                "age": profile.age,
                "traits": profile.traits,
                "career": profile.career,
                "interests": list(profile.interests),
                "features": list(profile.features),
                "friends": [int(f) for f in sim.model.friends(user)],
                "status": statuses[user],
                "watched": watched.get(user, 0),
                "edited": str(user) in sim.profile_edits,
            }
        )
    return out


def system_view(sim: Simulation, top_k: int = 5) -> dict[str, Any]:
    popular = Counter(int(row["item_id"]) for row in sim.interactions).most_common(top_k)
    titles = sim.dataset.items["title"]
    sim_config = sim.config.simulation
    return {
        "dataset": sim.dataset.name,
        "run": sim.out.name,
        "users": sim.dataset.n_users,
        "items": sim.dataset.n_items,
        "interactions": len(sim.interactions),
        "dataset_interactions": len(sim.dataset.interactions),
        "round": sim.clock.round,
        "rounds": sim_config.rounds,
        "clock": sim.clock.text(),
        "recommender": sim.config.recommender.model,
        "execution": sim_config.execution,
        "llm_backend": sim.config.llm.backend,
        "most_popular": [{"item": i, "title": str(titles.iat[i]), "watches": n} for i, n in popular],
    }


def snapshot(sim: Simulation, events: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Everything of the page that changes only between rounds or with an intervention."""
    return {
        "agents": agents_view(sim, events),
        "system": system_view(sim),
        "charts": round_series(sim),
    }


def agent_view(sim: Simulation, profile: dict[str, Any], lines: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One agent's panel: its ``profile`` (from the snapshot), its last 20 watches and its last 30 log lines."""
    user = profile["id"]
    titles = sim.dataset.items["title"]
    watches = [
        {
            "item": int(r["item_id"]),
            "title": str(titles.iat[int(r["item_id"])]),
            "rating": r["rating"],
            "round": int(r["round"]) + 1,
        }
        for r in list(sim.interactions)
        if int(r["user_id"]) == user
    ]
    texts = [line["text"] for line in lines if line["agent"] == user]
    return {**profile, "watches": watches[-20:], "log": texts[-30:]}
