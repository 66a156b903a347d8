"""The simulation: a population of LLM agents living round by round with a recommender and a social network.

Each round (``simulation.interval_hours`` of simulated time):

1. a child generator is drawn from the run's generator (so a resumed run continues the same stream);
2. agents are activated (:mod:`recagent_gym.session.activation`); active agents choose what to do (the agent's
   ``take_action``: one batched ``choose`` with behaviour priors), a human player chooses from the terminal;
3. ``recommender`` agents run a session, ``social`` agents chat or post (:mod:`.social_step`), the rest do nothing,
   as per-agent pipelines (remote backends) or as stages batched across agents (the embedded model):
   :mod:`.round_modes`;
4. the round's events are appended to the log, the interaction files are brought up to date, and the complete state
   is checkpointed atomically (:meth:`Simulation.checkpoint`). A process killed at any moment loses at most the round
   in progress.

Starting, resuming and branching a run: :mod:`.runner`.
"""

from __future__ import annotations

import gc
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from recagent_gym.llm.protocol import Usage
from recagent_gym.llm.seeding import SEED_HIGH
from recagent_gym.recommenders.search import CatalogueSearch
from recagent_gym.runs.config import dump_config
from recagent_gym.runs.simulator import checkpoint as ckpt
from recagent_gym.runs.simulator import run_paths
from recagent_gym.runs.simulator.checkpoint_vectors import VectorStore
from recagent_gym.runs.simulator.clock import SimClock
from recagent_gym.runs.simulator.errors import SimulationError
from recagent_gym.runs.simulator.events import Event, EventLog
from recagent_gym.runs.simulator.export import InteractionExport
from recagent_gym.runs.simulator.files import atomic_write_text
from recagent_gym.runs.simulator.round_modes import pipelined_round, staged_round
from recagent_gym.runs.simulator.round_record import RoundMeter
from recagent_gym.runs.simulator.sessions import DEFERRED_END_BATCH, SessionContext, Slot
from recagent_gym.runs.simulator.social_step import plan_round_social
from recagent_gym.runs.simulator.summary import summarise
from recagent_gym.runs.simulator.world import World, build_recommender_for
from recagent_gym.session import SessionKernel, SessionRules, SessionTables
from recagent_gym.session.activation import Activation
from recagent_gym.users.agent.profile_view import ProfileTexts
from recagent_gym.users.prior_default import keep_weights
from recagent_gym.users.profiles import Profile

log = logging.getLogger(__name__)

PROFILE_FIELDS: tuple[str, ...] = ("name", "gender", "age", "traits", "career", "interests", "features")
"""Profile fields an intervention may edit."""


class Simulation:
    """A population of LLM agents living round by round with a recommender and a social network."""

    def __init__(self, world: World, out: Path, *, human: Any = None) -> None:
        self.world = world
        self.config = world.config
        self.dataset = world.dataset
        self.model = world.user_model
        self.recommender = world.recommender
        self.out = Path(out)
        sim = self.config.simulation
        self.agents = list(range(self.dataset.n_users))
        self.names = [p.name for p in self.model.profiles]
        self.rng = np.random.default_rng(np.random.SeedSequence(sim.seed).spawn(3)[2])
        counts = np.bincount(self.dataset.interactions["user_id"].to_numpy(), minlength=self.dataset.n_users)
        self.activation = Activation.build(sim, counts, np.random.default_rng(np.random.SeedSequence(sim.seed + 1)))
        self.clock = SimClock(sim.interval_hours)
        self.interactions: list[dict[str, Any]] = []
        self.rounds: list[dict[str, Any]] = []
        self.profile_edits: dict[str, dict[str, Any]] = {}
        self.log = EventLog(self.out)
        self.human = human
        env = self.config.env
        rules = SessionRules(
            page_size=sim.page_size,
            max_pages=sim.max_pages,
            history_length=env.history_length,
            duplicate_rule=env.duplicate_rule,
            social=False,  # the simulator's rounds run the social media themselves
            end_batch=DEFERRED_END_BATCH,  # a round's ended sessions are written together (sessions.py)
        )
        self.kernel = SessionKernel(SessionTables.build(self.dataset), CatalogueSearch(self.dataset), rules)
        self._pending_events: list[Event] = []
        self._export: InteractionExport | None = None
        self._vectors: VectorStore | None = None
        self.checkpoint_seconds: list[float] = []
        """Seconds of each round's log append, outputs and checkpoint (after the round's timer; not state)."""

    # -- agents ---------------------------------------------------------------------------------------------------

    def find_agent(self, who: str | int) -> int:
        """An agent's id from its name (case-insensitive) or its id (``3`` or ``"#3"``)."""
        text = str(who).strip()
        digits = text[1:] if text.startswith("#") else text
        # isdecimal, not isdigit ('²' is a digit int() refuses); a bounded length (int() refuses 4,300+ digits)
        if digits.isdecimal() and len(digits) <= 18 and int(digits) < len(self.agents):
            return int(digits)
        matches = [u for u, n in enumerate(self.names) if n.lower() == text.lower()]
        if len(matches) == 1:
            return matches[0]
        shown = repr(text) if len(text) <= 60 else repr(text[:60]) + f"... ({len(text)} characters)"
        if len(matches) > 1:
            raise SimulationError(f"agent name {shown} is ambiguous (ids {matches}); pass '#<id>'")
        names = ", ".join(self.names[:8])
        raise SimulationError(f"unknown agent {shown}; agents are {names}, ... ({len(self.agents)} in all)")

    def edit_profile(self, who: str | int, **fields: Any) -> int:
        """Change profile fields of one agent (its prompts use them from now on); recorded in the checkpoint."""
        unknown = set(fields) - set(PROFILE_FIELDS)
        if unknown:
            raise SimulationError(f"cannot edit profile fields {sorted(unknown)}; editable: {PROFILE_FIELDS}")
        user = self.find_agent(who)
        edits = self.profile_edits.setdefault(str(user), {})
        for key, value in fields.items():
            edits[key] = list(value) if isinstance(value, tuple | list) else value
        self._apply_profile_edits()
        self._pending_events.append(
            Event(
                self.clock.round,
                self.clock.time_h,
                "intervention",
                user,
                self.names[user],
                text=f"profile of {self.names[user]} edited: {fields}",
            )
        )
        return user

    def _apply_profile_edits(self) -> None:
        for key, edits in self.profile_edits.items():
            user = int(key)
            current = asdict(self.model.profiles[user])
            current.update({k: tuple(v) if k in ("interests", "features") else v for k, v in edits.items()})
            self.model.profiles[user] = Profile(**current)
        self.model.profile_text = ProfileTexts(self.model.profiles)  # cached texts are stale now
        self.names = [p.name for p in self.model.profiles]

    def note(self, event: Event) -> None:
        """Queue an event (intervention, interview) for the log; written with the next checkpoint."""
        self._pending_events.append(event)

    def swap_recommender(self, name: str) -> None:
        """Replace the recommender by a fresh ``name`` model (trained on the dataset and the simulated watches)."""
        config = self.config.model_copy(deep=True)
        config.recommender.model = name  # type: ignore[assignment]  # validated by the section
        self.config = self.world.config = config
        self.recommender = self.world.recommender = build_recommender_for(config, self.dataset, self._seed())
        observe = getattr(self.recommender, "observe", None)
        if observe is not None and self.interactions:
            for row in self.interactions:
                observe({"user_id": row["user_id"], "item": row["item_id"], "rating": row["rating"]}, False)
        self._pending_events.append(
            Event(self.clock.round, self.clock.time_h, "intervention", text=f"recommender swapped to {name}")
        )

    # -- the loop -------------------------------------------------------------------------------------------------

    def run(self, rounds: int | None = None) -> None:
        """Run ``rounds`` more rounds (default: until ``simulation.rounds`` rounds are done)."""
        target = self.config.simulation.rounds
        todo = target - self.clock.round if rounds is None else min(rounds, max(0, target - self.clock.round))
        if self.clock.round == 0 and not self.rounds:
            self.out.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self.out / "config.yaml", dump_config(self.config))
            if self.config.user.model == "llm":  # the run folder keeps the behavioural prior's weights
                keep_weights(self.config, self.dataset, self.out, llm=getattr(self.model, "llm", None))
            self.checkpoint()  # round 0: the initial state, so a branch can start before any round
        settle_heap()
        for _ in range(todo):
            self.run_round()

    def run_round(self) -> None:
        """One round (see the module docstring), then its log, files and checkpoint (timed apart)."""
        meter = RoundMeter(self.world.llm)
        r, t = self.clock.round, self.clock.time_h
        rng = np.random.default_rng(int(self.rng.integers(0, SEED_HIGH)))
        human = () if self.human is None else (self.human.user_id,)
        active = [self.agents[i] for i in self.activation.draw(rng, force=human)]
        events, self._pending_events = self._pending_events, []
        bar = tqdm(total=len(active), desc=f"round {r + 1}/{self.config.simulation.rounds}", unit="agent",
                   disable=not self.config.simulation.progress, leave=False)  # fmt: skip
        try:
            events.extend(self._live(active, rng, bar))
        finally:
            bar.close()
        record = meter.record(r, t, active, events, pipelined=self.pipelined())
        self.rounds.append(record)
        log.info("round %d/%d (%s): %d active, %d events, %.1f s, %d tokens", r + 1, self.config.simulation.rounds,
                 self.clock.text(), len(active), len(events), record["seconds"], record["tokens"])  # fmt: skip
        self.clock.advance()
        started = time.perf_counter()
        self.log.append(events)
        self.checkpoint()
        self.checkpoint_seconds.append(round(time.perf_counter() - started, 3))

    def _live(self, active: Sequence[int], rng: np.random.Generator, bar: tqdm) -> list[Event]:
        """What the active agents do this round: their choices, idle events, sessions and social actions."""
        r, t = self.clock.round, self.clock.time_h
        human = () if self.human is None else (self.human.user_id,)
        choices = self._choose_actions(active, rng, t)
        if not self.config.social.enabled:  # the social media is closed: those who chose it stay idle
            choices = {u: "nothing" if c == "social" else c for u, c in choices.items()}
        recommender = [u for u in active if choices[u] == "recommender"]
        social = [u for u in active if choices[u] == "social" and u not in human]
        idle = [u for u in active if choices[u] == "nothing"]
        events = [Event(r, t, "idle", u, self.names[u]) for u in idle]
        bar.update(len(idle))
        # The social agents' chats and posts are planned now, generated beside the sessions (their LLM calls
        # only: nothing read or written), and applied after them, so results do not depend on timing.
        cfg = self.config.simulation
        plan = plan_round_social(self.model, social, rng, t, cfg, exclude=human) if social else None
        mode = pipelined_round if self.pipelined() else staged_round
        events.extend(mode(self, recommender, plan, rng, bar))
        bar.update(len(social))
        if self.human is not None and choices.get(self.human.user_id) == "social":
            events.extend(self.human.social(self, r, t, rng))
            bar.update(1)
        return events

    def _choose_actions(self, active: Sequence[int], rng: np.random.Generator, t: float) -> dict[int, str]:
        agents = [u for u in active if self.human is None or u != self.human.user_id]
        use_llm = self.config.simulation.action_choice == "llm"
        choices = dict(zip(agents, self.model.take_action(agents, rng, t, use_llm=use_llm), strict=True))
        if self.human is not None and self.human.user_id in active:
            choices[self.human.user_id] = self.human.choose_action(self.clock.text())
        return choices

    def pipelined(self) -> bool:
        """Whether this round runs per-agent pipelines (``simulation.pipelines``; never with a human player)."""
        mode = self.config.simulation.pipelines
        on = self.config.llm.backend == "openai" if mode == "auto" else mode == "on"
        return on and self.human is None and self.config.simulation.execution == "parallel"

    def overlaps_social(self) -> bool:
        """Whether the social agents' LLM calls run beside the sessions (``simulation.overlap_social``)."""
        mode = self.config.simulation.overlap_social
        return self.config.llm.backend == "openai" if mode == "auto" else mode == "on"

    def session_context(self, bar: tqdm) -> SessionContext:
        """What the sessions of this round need from the simulation (clock, names, pages, the recommender)."""

        def done(slot: Slot) -> None:
            self.interactions.extend(slot.watches)
            bar.update(1)

        return SessionContext(
            round_index=self.clock.round,
            time_h=self.clock.time_h,
            names=self.names,
            titles=self._title,
            page=self._page,
            observe=getattr(self.recommender, "observe", None),
            on_done=done,
        )

    def _page(self, slot: Slot, rng: np.random.Generator) -> tuple[np.ndarray, set[int]]:
        """The recommender's page with ``rec_random_k`` of its last slots replaced by random unseen items."""
        size = self.config.simulation.page_size
        page, _ = self.recommender.predict(slot.obs, deterministic=True)
        page = np.asarray(page, dtype=np.int64).reshape(-1)[:size].copy()
        k = min(self.config.recommender.rec_random_k, size)
        if k == 0:
            return page, set()
        seen = slot.lane.session.seen  # type: ignore[union-attr]
        kept = set(page[: size - k].tolist())
        picks: list[int] = []
        unseen = int((~seen).sum())
        while len(picks) < k and len(picks) + len(kept) < unseen:
            item = int(rng.integers(0, len(seen)))
            if not seen[item] and item not in kept and item not in picks:
                picks.append(item)
        if picks:
            page[size - len(picks) :] = picks
        return page, set(picks)

    def _title(self, item: int) -> str:
        return self.dataset.title(int(item))

    def _seed(self) -> int:
        return int(np.random.SeedSequence([self.config.simulation.seed, self.clock.round]).generate_state(1)[0])

    def close(self) -> None:
        """Release the language model (the embedded model's memory, a remote client, the cache connection) and the
        embedder's process (``llm.embedder_process``), and hand the heap back to the garbage collector
        (:func:`settle_heap`)."""
        for owner in (self.world.llm, self.world.own_embedder):
            close = getattr(owner, "close", None)
            if close is not None:
                close()
        gc.unfreeze()

    # -- outputs and state ----------------------------------------------------------------------------------------

    def summary(self) -> dict[str, Any]:
        return summarise(
            dataset=self.dataset,
            rounds=self.rounds,
            interactions=self.interactions,
            usage=self.world.llm.total,
            llm=self.config.llm,
            agents=len(self.agents),
        )

    def write_outputs(self) -> None:
        """Bring ``interactions.csv``, the RecBole files and ``summary.json`` up to date (the tables by appending the
        rows since the last write where this process wrote them; whole otherwise)."""
        if self._export is None or self._export.folder != self.out:
            self._export = InteractionExport(self.out, self.dataset)
        self._export.write(self.interactions)
        atomic_write_text(self.out / "summary.json", json.dumps(self.summary(), indent=2))

    def checkpoint(self) -> Path:
        """Bring the tables and summary up to date, then write this round's checkpoint atomically; its float arrays
        go to the run's vector file, only those not stored before (:mod:`.checkpoint_vectors`).

        Queued events (interventions, interviews) are part of the state and go into the next round's log.
        """
        self.out.mkdir(parents=True, exist_ok=True)
        self.write_outputs()
        path = ckpt.checkpoint_path(self.out, self.clock.round)
        if self._vectors is None or self._vectors.path.parent != path.parent:
            self._vectors = VectorStore(path.parent)
        ckpt.save_checkpoint(path, self.payload(), self._vectors)
        self._prune()
        return path

    def payload(self) -> dict[str, Any]:
        cache = self.config.llm.cache_path
        return {
            "format": ckpt.FORMAT,
            "version": ckpt.VERSION,
            "round": self.clock.round,
            "config": run_paths.portable(self.config.redacted(), self.out),
            "dataset": {
                "name": self.dataset.name,
                "n_users": self.dataset.n_users,
                "n_items": self.dataset.n_items,
                "n_interactions": len(self.dataset.interactions),
            },
            "llm_cache": {
                "path": cache and run_paths.portable_path(cache, self.out),
                "mode": self.config.llm.cache_mode,
            },
            "paths": run_paths.MARK,
            "state": self.get_state(),
        }

    def _prune(self) -> None:
        keep = self.config.simulation.keep_checkpoints
        if keep:
            files = sorted((self.out / ckpt.CHECKPOINT_DIR).glob("round_*.json"))
            for old in files[:-keep]:
                old.unlink(missing_ok=True)

    def get_state(self) -> dict[str, Any]:
        graph = self.world.graph
        return {
            "rng": self.rng.bit_generator.state,
            "activation": self.activation.get_state(),
            "clock": self.clock.get_state(),
            "user_model": self.model.get_state(),
            "profile_edits": self.profile_edits,
            "graph": graph.get_state() if graph is not None else None,
            "recommender": {"model": self.config.recommender.model, "state": self.recommender.get_state()},
            "interactions": self.interactions,
            "rounds": self.rounds,
            "usage": asdict(self.world.llm.total),
            "log_offsets": self.log.offsets(),
            "pending_events": [asdict(e) for e in self._pending_events],
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self.rng.bit_generator.state = state["rng"]
        self.activation = Activation.from_state(state["activation"])
        self.clock = SimClock.from_state(state["clock"])
        self.model.set_state(state["user_model"])
        self.profile_edits = {str(k): dict(v) for k, v in state["profile_edits"].items()}
        self._apply_profile_edits()
        if state["graph"] is not None and self.world.graph is not None:
            self.world.graph.set_state(state["graph"])
        self.interactions = [dict(row) for row in state["interactions"]]
        rec = state["recommender"]
        if rec["model"] == self.config.recommender.model:
            self.recommender.set_state(rec["state"])
        else:  # the config swapped the recommender: a fresh one learns the simulated watches
            self.swap_recommender(self.config.recommender.model)
        self.rounds = [dict(r) for r in state["rounds"]]
        self.world.llm.total = Usage(**state["usage"])
        self._pending_events = self._pending_events + [Event(**e) for e in state.get("pending_events", [])]


def settle_heap() -> None:
    """Collect the garbage of the set-up, then move every object alive now (the dataset, models, memories: they
    live as long as the run) out of the cyclic garbage collector's sight (``gc.freeze``). Its full collections
    otherwise scan that heap again and again, stopping every thread for up to half a second at 1,000 agents,
    while all the round's requests wait on the event loop (``docs/speed.md``). Acyclic garbage is still freed at
    once; :meth:`Simulation.close` unfreezes."""
    gc.collect()
    gc.freeze()
