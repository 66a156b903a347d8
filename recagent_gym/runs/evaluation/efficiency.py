"""Efficiency (the paper's Fig. 6): seconds per simulated round against the number of agents and of API keys.

``local-server`` points run the real simulator with ``llm.backend=openai`` against
:class:`~recagent_gym.llm.local_server.LocalServer` on 127.0.0.1, which adds a fixed latency to every request and
serves at most ``efficiency_per_key_concurrency`` requests per key at once (a provider's per-key rate limit); the
client gets ``k`` fake keys (round-robin) and ``max_concurrency = k x per-key concurrency``, so extra keys buy
throughput exactly as in the paper. ``embedded`` points run Gemma 3 270M in-process (no keys).

What runs is what ``simulate`` runs: ``evaluate efficiency`` reads the ``simulate_paper`` configuration unless
``--config`` names another (MF retraining, random items and friends as the paper's run), and every table names the
configuration; every agent is active in every round (``evaluation.efficiency_all_active``), as in the paper's
seconds-per-round figure. The agents' memory embeds with all-MiniLM-L6-v2 by default
(``evaluation.efficiency_embedder``, in ``llm.embedder_precision``; ``hashing`` is the explicit cheap stand-in), with
the same memory, prompts and shared embedding cache. The server answers like a model that follows the prompts' formats
(:func:`~recagent_gym.llm.local_server.plausible_reply`) and, asked what an agent does with its free time, picks
"do nothing" with probability :data:`IDLE_ODDS` (:class:`ActiveAgentServer`), so idle agent-rounds are as rare as
an active agent's model makes them. Every table names the embedder and the client concurrency.

Measured per point: each round's wall seconds (the simulator's own ``rounds`` record: activation, LLM calls,
sessions, social actions; the checkpoint written after it is timed apart, ``checkpoint_s``), LLM calls and tokens
per round, the server's request count and requests per key, **requests per agent-round** (server requests / active
agents summed over rounds), **prompt tokens per request**, the **longest sequential chain per round** (``waves``:
batched LLM calls of the busiest thread, :meth:`~recagent_gym.llm.accounting.UsageMeter.waves`; with per-agent
pipelines the take-action call plus the longest agent chain, :func:`~recagent_gym.runs.simulator.runner.round_waves`),
the **chain per agent** (estimated from its events: take action, one decision per page, one query per search, one
feeling call if it watched, one memory summary; mean and max over agent-rounds), the **CPU floor** (``--cpu-floor``:
the same point again at zero latency, so what is left is this process's CPU and the loopback server) and the
process's **peak memory** (max RSS after the point, its CPU-floor run included; the process's peak so far, so a
point run after a larger one shows that one's). **Time per behaviour** is the sum of the ``latency_s`` of the
events of that kind in the event log, i.e. the LLM latency the agent's usage accounting attributes to the event:
*page decision* (``watch``, ``next``, ``leave``, ``search``), ``chat``, ``post``. Calls outside events (take-action
choice, memory writing) appear only in the all-calls row; concurrent calls overlap, so latencies sum to more than
wall time.
"""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pandas as pd
from tqdm import tqdm

from recagent_gym.runs.config import Config
from recagent_gym.runs.config.evaluation_section import EvaluationConfig
from recagent_gym.runs.evaluation.efficiency_server import ActiveAgentServer, ServerProcess

Backend = Literal["local-server", "embedded"]
EMBEDDER_NAMES: dict[str, str] = {
    "minilm": "all-MiniLM-L6-v2 (as `simulate` runs)",
    "hashing": "hashing stand-in (no embedding cost; not what `simulate` runs)",
}
BEHAVIOURS: dict[str, tuple[str, ...]] = {
    "page decision": ("watch", "next", "leave", "search"),
    "chat": ("chat",),
    "post": ("post",),
}
"""Behaviour types reported, and the event kinds that make each."""


@dataclass
class EfficiencyRun:
    """One simulation: ``keys`` is 0 for the embedded model."""

    backend: str
    agents: int
    keys: int
    rounds: list[dict[str, Any]]
    """The simulator's per-round records (``seconds``, ``active``, ``calls``, ``tokens``, ...)."""
    behaviour: dict[str, dict[str, float]] = field(default_factory=dict)
    """Per behaviour type: ``events`` and ``latency_s`` (plus ``all LLM calls``: ``calls`` and ``latency_s``)."""
    requests: int = 0
    """HTTP requests the local server received (0 for the embedded model)."""
    key_counts: list[int] = field(default_factory=list)
    """Requests per key as the server saw them."""
    prompt_tokens: int = 0
    checkpoint_s: list[float] = field(default_factory=list)
    agent_chains: list[int] = field(default_factory=list)
    """Estimated sequential LLM calls of each agent-round (see the module docstring)."""
    peak_rss_mb: float = math.nan
    cpu_floor_s: float = math.nan
    """Mean seconds per round of the same point at zero latency (``--cpu-floor``)."""
    process_cpu_s: float = math.nan
    """CPU seconds of this whole process (every thread: simulation, embedding, the loopback server unless it runs in
    its own process; checkpoints included) over the simulation's rounds, with the embedder's process when it runs in
    one (``llm.embedder_process``): on a shared machine other processes' load changes it far less than the wall
    time."""
    server_cpu_s: float = math.nan
    """CPU seconds of the local server's own process over the rounds (``efficiency_server_process``); NaN when it
    ran in this process (its CPU is then part of ``process_cpu_s``)."""
    texts_embedded: int = 0
    embed_cpu_s: float = math.nan
    """Texts the memory embedder embedded over the whole simulation and the CPU seconds of its calls (MiniLM: the
    calling threads' time; NaN for embedders that do not count it)."""

    @property
    def seconds(self) -> list[float]:
        return [float(r["seconds"]) for r in self.rounds]

    @property
    def mean_seconds(self) -> float:
        return sum(self.seconds) / len(self.seconds) if self.rounds else math.nan


@dataclass
class EfficiencyResult:
    dataset: str
    latency_ms: float
    per_key_concurrency: int
    runs: list[EfficiencyRun]
    embedder: str = "minilm"
    """The agents' memory embedder (``evaluation.efficiency_embedder``): ``minilm``, as ``simulate`` runs, or
    ``hashing`` (with its precision, e.g. ``minilm-bf16``, when the run names it)."""
    config_name: str = "defaults"
    """The configuration the points ran (``simulate_paper`` for the command's default), named in every table."""

    def rows(self) -> list[dict[str, Any]]:
        """One row per simulation (the main table)."""
        out = []
        for run in self.runs:
            n = max(len(run.rounds), 1)
            out.append(
                {
                    "config": self.config_name,
                    "backend": run.backend,
                    "embedder": self.embedder,
                    "concurrency": run.keys * self.per_key_concurrency if run.keys else "-",
                    "agents": run.agents,
                    "keys": run.keys if run.keys else "-",
                    "rounds": len(run.rounds),
                    "seconds_per_round": round(run.mean_seconds, 3),
                    "active_per_round": round(sum(r["active"] for r in run.rounds) / n, 2),
                    "llm_calls_per_round": round(sum(r["calls"] for r in run.rounds) / n, 1),
                    "tokens_per_round": round(sum(r["tokens"] for r in run.rounds) / n, 1),
                    "server_requests": run.requests,
                    "requests_per_key": "/".join(str(c) for c in run.key_counts) or "-",
                    "requests_per_agent_round": _ratio(run.requests or calls(run), active(run)),
                    "idle_share": _ratio(idle(run), active(run)),
                    "prompt_tokens_per_request": _ratio(run.prompt_tokens, calls(run), 1),
                    "waves_per_round": round(sum(r.get("waves", 0) for r in run.rounds) / n, 1),
                    "max_waves_per_round": max((r.get("waves", 0) for r in run.rounds), default=0),
                    "agent_chain_mean": _ratio(sum(run.agent_chains), len(run.agent_chains), 1),
                    "agent_chain_max": max(run.agent_chains, default=0),
                    "cpu_floor_s_per_round": round(run.cpu_floor_s, 3),
                    "process_cpu_s_per_round": round(run.process_cpu_s / n, 3),
                    "server_cpu_s_per_round": round(run.server_cpu_s / n, 3),
                    "texts_embedded_per_round": round(run.texts_embedded / n, 1),
                    "embed_cpu_s_per_round": round(run.embed_cpu_s / n, 3),
                    "checkpoint_s": round(sum(run.checkpoint_s) / max(len(run.checkpoint_s), 1), 3),
                    "peak_rss_mb": round(run.peak_rss_mb, 1),
                }
            )
        return out

    def round_rows(self) -> list[dict[str, Any]]:
        """Seconds of every round of every simulation (seconds per round as rounds grow)."""
        return [
            {"config": self.config_name, "backend": run.backend, "agents": run.agents, "keys": run.keys,
             "round": int(r["round"]) + 1,
             "seconds": float(r["seconds"]), "active": int(r["active"]), "calls": int(r["calls"])}
            for run in self.runs for r in run.rounds
        ]  # fmt: skip

    def behaviour_rows(self) -> list[dict[str, Any]]:
        """LLM latency per behaviour type and simulation."""
        out = []
        for run in self.runs:
            for name, stats in run.behaviour.items():
                count = stats.get("events", stats.get("calls", 0.0))
                out.append(
                    {"config": self.config_name, "backend": run.backend, "agents": run.agents, "keys": run.keys,
                     "behaviour": name,
                     "count": int(count), "latency_s": round(stats["latency_s"], 3),
                     "mean_latency_s": round(stats["latency_s"] / count, 4) if count else math.nan}
                )  # fmt: skip
        return out

    def markdown(self) -> str:
        lines = [
            f"## Efficiency on {self.dataset}, configuration `{self.config_name}`",
            "",
            f"Configuration `{self.config_name}`, all agents active in every round. Local server latency "
            f"{self.latency_ms:g} ms per request, at most {self.per_key_concurrency} requests "
            "in service per key (client concurrency: keys x that; see `recagent_gym/runs/evaluation/efficiency.py`); "
            f"memory embedder: {EMBEDDER_NAMES.get(self.embedder, self.embedder)}. Paper (GPT-3.5, one key): about "
            "220 s per round for 10 agents and 1.9 h for 100 agents.",
            "",
            _markdown_table(self.rows()),
            "",
            f"### Time per behaviour (sum of the events' LLM latency), configuration `{self.config_name}`",
            "",
            _markdown_table(self.behaviour_rows()),
        ]
        return "\n".join(lines) + "\n"

    def write(self, out_dir: str | Path, config: Config, evaluation: EvaluationConfig) -> dict[str, Path]:
        """``table.md``, ``table.csv``, ``rounds.csv``, ``behaviour.csv``, ``plot.png`` and ``config.yaml``."""
        from recagent_gym.runs.evaluation.report import redacted_yaml

        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        names = ("table.md", "table.csv", "rounds.csv", "behaviour.csv", "plot.png", "config.yaml")
        paths = {name: out / name for name in names}
        paths["table.md"].write_text(self.markdown(), encoding="utf-8")
        pd.DataFrame(self.rows()).to_csv(paths["table.csv"], index=False)
        pd.DataFrame(self.round_rows()).to_csv(paths["rounds.csv"], index=False)
        pd.DataFrame(self.behaviour_rows()).to_csv(paths["behaviour.csv"], index=False)
        from recagent_gym.runs.evaluation.efficiency_plot import plot_efficiency

        plot_efficiency(self, paths["plot.png"])
        paths["config.yaml"].write_text(redacted_yaml(config, evaluation), encoding="utf-8")
        return paths


def calls(run: EfficiencyRun) -> int:
    return sum(int(r["calls"]) for r in run.rounds)


def active(run: EfficiencyRun) -> int:
    return sum(int(r["active"]) for r in run.rounds)


def idle(run: EfficiencyRun) -> int:
    """Agent-rounds that did nothing (``idle`` events)."""
    return sum(int(r.get("counts", {}).get("idle", 0)) for r in run.rounds)


def _ratio(a: float, b: float, digits: int = 2) -> float:
    return round(a / b, digits) if b else math.nan


def agent_chains(events: Sequence[dict[str, Any]], llm_take_action: bool) -> list[int]:
    """Estimated sequential LLM calls of each agent in each round (see the module docstring): the take-action
    choice, one decision per page, one query per search, one chat or post, one feeling call if it watched (its
    feelings are one batch), and one memory summary if anything happened."""
    steps: dict[tuple[int, int], dict[str, int]] = {}
    for e in events:
        if e.get("agent") is None:
            continue
        counts = steps.setdefault((int(e["round"]), int(e["agent"])), {})
        counts[e["kind"]] = counts.get(e["kind"], 0) + 1
    chains = []
    for counts in steps.values():
        acted = sum(counts.get(k, 0) for k in ("page", "search", "chat", "post"))
        chain = (1 if llm_take_action else 0) + acted + (1 if counts.get("feeling") else 0) + (1 if acted else 0)
        chains.append(chain)
    return chains


def peak_rss_mb() -> float:
    """The process's peak resident memory so far (MB)."""
    import resource
    import sys

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def _markdown_table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "(no rows)"
    heads = list(rows[0])
    lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    lines += ["| " + " | ".join(str(r[h]) for h in heads) + " |" for r in rows]
    return "\n".join(lines)


def behaviour_times(events: Sequence[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Event count and summed ``latency_s`` per behaviour type of :data:`BEHAVIOURS` (see the module docstring)."""
    out: dict[str, dict[str, float]] = {}
    for name, kinds in BEHAVIOURS.items():
        chosen = [e for e in events if e["kind"] in kinds]
        out[name] = {"events": float(len(chosen)), "latency_s": float(sum(e.get("latency_s", 0.0) for e in chosen))}
    return out


def simulation_config(
    base: Config, *, agents: int, rounds: int, backend: Backend, base_url: str | None = None, keys: int = 0,
    concurrency: int = 1, all_active: bool = False,
) -> Config:  # fmt: skip
    """``base`` with the simulation size and the LLM backend of one efficiency point (quiet, same seed); with
    ``all_active`` every agent is active in every round."""
    from pydantic import SecretStr

    size: dict[str, Any] = {"agents": agents, "rounds": rounds, "progress": False}
    if all_active:
        threshold = max(agents, base.simulation.active_threshold)
        size.update(activation="uniform", active_prob=1.0, active_threshold=threshold)
    sim = base.simulation.model_copy(update=size)
    if agents < 2:  # fitting the Pareto shape to the activity counts needs two agents or more
        sim = sim.model_copy(update={"fit_activity": False})
    if backend == "local-server":
        fake = [SecretStr(f"local-key-{k}") for k in range(keys)]  # the server only counts them
        llm = base.llm.model_copy(
            update={"backend": "openai", "base_url": base_url, "api_keys": fake, "max_concurrency": concurrency,
                    "cache_mode": "off", "cache_path": None, "model": base.llm.model or "latency-server"}
        )  # fmt: skip
    else:
        # no response cache (``simulate_paper`` keeps one): a rerun into the same folder would time its look-ups
        llm = base.llm.model_copy(update={"backend": "embedded", "cache_mode": "off", "cache_path": None})
    # The simulator picks its users itself, so the env's activation weights are unused; ``uniform`` avoids the
    # Pareto fit, which needs two users or more (a 1-agent point would fail in the env's reset otherwise).
    env = base.env.model_copy(update={"activation": "uniform"})
    return base.model_copy(update={"simulation": sim, "llm": llm, "env": env})


def run_point(
    config: Config, out: Path, *, llm: Any = None, embedder: Any = None, server: Any = None, backend: str, keys: int
) -> EfficiencyRun:
    """One simulation of ``config`` into ``out``; the server (if any) is read for its counters."""
    from recagent_gym.llm.protocol import Usage
    from recagent_gym.runs.simulator import runner

    texts_before, cpu_before = getattr(embedder, "texts_embedded", 0), getattr(embedder, "cpu_s", math.nan)
    sim = runner.start(config, out, llm=llm, embedder=embedder)
    server_cpu = getattr(server, "cpu_s", lambda: math.nan)
    cpu_started, server_started = time.process_time(), server_cpu()
    child_started = getattr(embedder, "process_cpu_s", 0.0)  # the embedder's own process (llm.embedder_process)
    try:
        sim.run()
        process_cpu_s = time.process_time() - cpu_started + getattr(embedder, "process_cpu_s", 0.0) - child_started
        server_cpu_s = server_cpu() - server_started
        events = sim.log.read()
        total: Usage = sim.world.llm.total
    finally:
        if llm is None:  # a model passed in belongs to the caller (e.g. one shared loaded model)
            sim.close()
    behaviour = behaviour_times(events)
    behaviour["all LLM calls"] = {"calls": float(total.calls), "latency_s": float(total.latency_s)}
    llm_choice = config.simulation.action_choice == "llm"
    return EfficiencyRun(
        backend=backend,
        agents=config.simulation.agents,
        keys=keys,
        rounds=[dict(r) for r in sim.rounds],
        behaviour=behaviour,
        requests=server.request_count if server is not None else 0,
        # every key, those that got no request included (the server lists the keys it saw)
        key_counts=(server.key_counts + [0] * keys)[:keys] if server is not None else [],
        prompt_tokens=int(total.prompt_tokens),
        checkpoint_s=list(sim.checkpoint_seconds),
        agent_chains=agent_chains(events, llm_choice),
        peak_rss_mb=peak_rss_mb() + getattr(embedder, "peak_rss_mb", 0.0),
        process_cpu_s=process_cpu_s,
        server_cpu_s=server_cpu_s,
        texts_embedded=getattr(embedder, "texts_embedded", 0) - texts_before,
        embed_cpu_s=getattr(embedder, "cpu_s", math.nan) - cpu_before,
    )


def make_embedder(kind: str, precision: str = "fp32", *, process: bool = False) -> Any:
    """``hashing`` (the stand-in) or ``minilm`` (in a process of its own when ``process``: ``llm.embedder_process``)."""
    if kind == "hashing":
        from recagent_gym.llm.testing import HashingEmbedder

        return HashingEmbedder()
    from recagent_gym.runs.simulator.world import minilm

    return minilm(precision, process=process)


def embedder_label(kind: str, embedder: Any) -> str:
    """``kind`` with the precision MiniLM runs in and where (``minilm-bf16``, ``minilm-fp32-own-process``), as the
    tables name it."""
    precision = getattr(embedder, "precision", None)
    where = "-own-process" if getattr(embedder, "own_process", False) else ""
    return f"{kind}-{precision}{where}" if precision else kind


def run_efficiency(
    config: Config,
    evaluation: EvaluationConfig,
    *,
    backend: Backend = "local-server",
    out: str | Path | None = None,
    progress: bool = True,
    llm_factory: Callable[[], Any] | None = None,
    cpu_floor: bool = False,
    config_name: str = "defaults",
) -> EfficiencyResult:
    """Every (agents, keys) point of ``evaluation`` (``efficiency_*`` fields); simulations go under ``out/runs``.

    ``llm_factory`` (embedded backend only) supplies the model, e.g. one shared loaded model in tests.
    ``cpu_floor`` (local server only): each point runs again at zero latency (its mean seconds per round).
    ``config_name``: what the tables call ``config``.
    """
    runs_root = Path(out) / "runs" if out is not None else Path(tempfile.mkdtemp(prefix="efficiency-"))
    embedder = make_embedder(evaluation.efficiency_embedder, config.llm.embedder_precision,
                             process=config.llm.embedder_process)  # fmt: skip
    all_active = evaluation.efficiency_all_active
    if backend == "local-server":
        points = [(n, k) for k in evaluation.efficiency_keys for n in evaluation.efficiency_agents]
    else:
        points = [(n, 0) for n in evaluation.efficiency_embedded_agents]
    runs: list[EfficiencyRun] = []
    bar = tqdm(points, desc=f"efficiency ({backend})", unit="point", disable=not progress)
    for agents, keys in bar:
        bar.set_postfix(agents=agents, keys=keys or "-")
        folder = runs_root / (f"agents{agents}_keys{keys}" if keys else f"agents{agents}_embedded")
        if backend == "local-server":
            concurrency = keys * evaluation.efficiency_per_key_concurrency
            latencies = [evaluation.efficiency_latency_ms] + ([0.0] if cpu_floor else [])
            for latency_ms in latencies:
                server_class = ServerProcess if evaluation.efficiency_server_process else ActiveAgentServer
                with server_class(
                    latency_s=latency_ms / 1000.0,
                    per_key_concurrency=evaluation.efficiency_per_key_concurrency,
                    choice="random",
                    reply=None,  # format-following answers: requests counted are the prompts', not re-asks
                    seed=evaluation.seed,
                ) as server:
                    point = simulation_config(
                        config, agents=agents, rounds=evaluation.efficiency_rounds, backend=backend,
                        base_url=server.base_url, keys=keys, concurrency=concurrency, all_active=all_active,
                    )  # fmt: skip
                    where = folder if latency_ms == latencies[0] else folder.with_name(folder.name + "_latency0")
                    measured = run_point(point, where, embedder=embedder, server=server, backend=backend, keys=keys)
                if latency_ms == latencies[0]:
                    run = measured
                else:
                    run.cpu_floor_s = measured.mean_seconds
                    run.peak_rss_mb = max(run.peak_rss_mb, measured.peak_rss_mb)
        else:
            point = simulation_config(
                config, agents=agents, rounds=evaluation.efficiency_rounds, backend=backend, all_active=all_active
            )
            llm = llm_factory() if llm_factory is not None else None
            run = run_point(point, folder, llm=llm, embedder=embedder, backend=backend, keys=0)
        runs.append(run)
        bar.set_postfix(agents=agents, keys=keys or "-", s_per_round=f"{run.mean_seconds:.2f}")
    bar.close()
    close = getattr(embedder, "close", None)  # the embedder's own process, if it has one
    if close is not None:
        close()
    return EfficiencyResult(
        dataset=config.data.dataset,
        latency_ms=evaluation.efficiency_latency_ms if backend == "local-server" else 0.0,
        per_key_concurrency=evaluation.efficiency_per_key_concurrency,
        runs=runs,
        embedder=embedder_label(evaluation.efficiency_embedder, embedder),
        config_name=config_name,
    )
