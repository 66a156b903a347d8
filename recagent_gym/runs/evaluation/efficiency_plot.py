"""The efficiency evaluation's figure (:mod:`.efficiency` writes it as ``plot.png``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def plot_efficiency(result: Any, path: str | Path) -> None:
    """``result``: an :class:`~.efficiency.EfficiencyResult`. Left: seconds per round vs agents, one line per key
    count. Right: seconds of each round of the simulations with the most agents, one line per key count (every round
    of every simulation is in ``rounds.csv``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right, chain) = plt.subplots(1, 3, figsize=(17, 4.5))
    for keys in sorted({r.keys for r in result.runs}):
        runs = sorted((r for r in result.runs if r.keys == keys), key=lambda r: r.agents)
        label = f"{keys} key{'s' if keys > 1 else ''}" if keys else "embedded model"
        left.plot([r.agents for r in runs], [r.mean_seconds for r in runs], marker="o", label=label)
    left.set_xlabel("agents")
    left.set_ylabel("seconds per round")
    left.set_title("seconds per round vs agents")
    left.legend(fontsize=8)
    largest = max(r.agents for r in result.runs)
    for run in (r for r in result.runs if r.agents == largest):
        tag = f"{run.keys} key{'s' if run.keys > 1 else ''}" if run.keys else "embedded model"
        right.plot(range(1, len(run.rounds) + 1), run.seconds, marker="o", label=tag)
    right.xaxis.get_major_locator().set_params(integer=True)
    right.set_xlabel("round")
    right.set_ylabel("seconds")
    right.set_title(f"seconds per round as rounds grow ({largest} agents)")
    right.legend(fontsize=8)
    for keys in sorted({r.keys for r in result.runs}):
        runs = sorted((r for r in result.runs if r.keys == keys), key=lambda r: r.agents)
        rows = {row["agents"]: row for row in result.rows() if row["keys"] == (keys or "-")}
        xs = [r.agents for r in runs]
        chain.plot(xs, [rows[x]["waves_per_round"] for x in xs], marker="o", label=f"round chain (keys {keys or '-'})")
        chain.plot(xs, [rows[x]["requests_per_agent_round"] for x in xs], marker="s", ls="--",
                   label=f"requests per agent-round (keys {keys or '-'})")  # fmt: skip
    chain.set_xlabel("agents")
    chain.set_title("sequential LLM waves per round; requests per agent-round")
    chain.legend(fontsize=7)
    fig.suptitle(f"Efficiency on {result.dataset}, config {result.config_name} (latency {result.latency_ms:g} ms)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
