"""The round loop: activation, one action per active agent, sessions, social actions, outputs, checkpoint.

Each round (``simulation.interval_hours`` of simulated time):

1. a child generator is drawn from the run's generator (so a resumed run continues the same stream);
2. agents are activated (:mod:`.activation`); active agents choose what to do (the agent's ``take_action``: one
   batched ``choose`` with behaviour priors), a human player chooses from the terminal;
3. ``recommender`` agents run a session (:mod:`.sessions`), ``social`` agents chat or post (:mod:`.social_step`),
   the rest do nothing. With per-agent pipelines (``simulation.pipelines``, remote backends) each recommender agent
   runs its round as its own chain (pages; then its social notes, feelings and memory writes, prepared beside its
   pages) and the social agents theirs, all at once, so a round costs about the longest chain; the recommender
   learns the round's watches in agent order afterwards. Otherwise (the embedded model) the stages run in turn,
   each one batch for all agents: the social agents' calls beside the page loop (``overlap_social``), then the
   ended sessions' feelings and every memory touched this round in one batch;
4. the round's events are appended to the log, the interaction table and summary are rewritten, and the complete
   state is checkpointed atomically. A process killed at any moment loses at most the round in progress.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from recagent_gym.llm.protocol import Usage
from recagent_gym.llm.secrets import resolve_api_keys
from recagent_gym.llm.seeding import SEED_HIGH
from recagent_gym.llm.wrapping import close_model
from recagent_gym.recommenders.search import CatalogueSearch
from recagent_gym.runs.config import Config, config_from_dict, dump_config
from recagent_gym.runs.config.loader import apply_overrides
from recagent_gym.runs.simulator import checkpoint as ckpt
from recagent_gym.runs.simulator import run_paths
from recagent_gym.runs.simulator.clock import SimClock
from recagent_gym.runs.simulator.errors import SimulationError
from recagent_gym.runs.simulator.events import Event, EventLog
from recagent_gym.runs.simulator.export import export_interactions
from recagent_gym.runs.simulator.files import atomic_write_text, remove_stale_temp_files
from recagent_gym.runs.simulator.sessions import (
    DEFERRED_END_BATCH,
    HumanUser,
    SessionContext,
    Slot,
    close_sessions,
    finish_sessions,
    open_sessions,
    run_chain,
    run_sessions,
)
from recagent_gym.runs.simulator.social_step import apply_round_social, plan_round_social
from recagent_gym.runs.simulator.summary import summarise
from recagent_gym.runs.simulator.world import World, build_recommender_for, build_world
from recagent_gym.session import SessionKernel, SessionRules, SessionTables
from recagent_gym.session.activation import Activation
from recagent_gym.users.agent.profile_view import ProfileTexts
from recagent_gym.users.agent.social_round import (
    Delivery,
    SocialPlan,
    deliver,
    generate_social,
    precompress_deliveries,
)
from recagent_gym.users.profiles import Profile

log = logging.getLogger(__name__)

PROFILE_FIELDS: tuple[str, ...] = ("name", "gender", "age", "traits", "career", "interests", "features")
"""Profile fields an intervention may edit."""
PIPELINE_THREADS = 256
"""Most agent chains in flight at once (each waits on the backend, which bounds the requests in flight)."""
RESUMABLE_SECTIONS: tuple[str, ...] = ("llm", "recommender")
"""Sections an override may change on resume (with ``simulation.rounds``/``execution``/``progress``/``keep_*``)."""


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
        self.checkpoint_seconds: list[float] = []
        """Seconds of each round's log append, outputs and checkpoint (after the round's timer; not state)."""

    # -- agents ---------------------------------------------------------------------------------------------------

    def find_agent(self, who: str | int) -> int:
        """An agent's id from its name (case-insensitive) or its id (``3`` or ``"#3"``)."""
        text = str(who).strip()
        digits = text[1:] if text.startswith("#") else text
        if digits.isdigit() and 0 <= int(digits) < len(self.agents):
            return int(digits)
        matches = [u for u, n in enumerate(self.names) if n.lower() == text.lower()]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            raise SimulationError(f"agent name {text!r} is ambiguous (ids {matches}); pass '#<id>'")
        shown = ", ".join(self.names[:8])
        raise SimulationError(f"unknown agent {text!r}; agents are {shown}, ... ({len(self.agents)} in all)")

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
            self.checkpoint()  # round 0: the initial state, so a branch can start before any round
        for _ in range(todo):
            self.run_round()

    def run_round(self) -> None:
        sim = self.config.simulation
        started = time.perf_counter()
        usage_before = self.world.llm.total
        waves_before = self._waves()
        r, t = self.clock.round, self.clock.time_h
        rng = np.random.default_rng(int(self.rng.integers(0, SEED_HIGH)))
        human = () if self.human is None else (self.human.user_id,)
        active = [self.agents[i] for i in self.activation.draw(rng, force=human)]
        events: list[Event] = self._pending_events
        self._pending_events = []
        bar = tqdm(
            total=len(active), desc=f"round {r + 1}/{sim.rounds}", unit="agent", disable=not sim.progress, leave=False
        )
        try:
            choices = self._choose_actions(active, rng, t)
            if not self.config.social.enabled:  # the social media is closed: those who chose it stay idle
                choices = {u: "nothing" if c == "social" else c for u, c in choices.items()}
            recommender = [u for u in active if choices[u] == "recommender"]
            social = [u for u in active if choices[u] == "social" and u not in human]
            for u in active:
                if choices[u] == "nothing":
                    events.append(Event(r, t, "idle", u, self.names[u]))
                    bar.update(1)
            # The social agents' chats and posts are planned now, generated beside the sessions (their LLM calls
            # only: nothing read or written), and applied after them, so results do not depend on timing.
            plan = plan_round_social(self.model, social, rng, t, sim, exclude=human) if social else None
            if self._pipelined():
                events.extend(self._pipeline_round(recommender, plan, rng, r, t, bar))
                if plan is not None:
                    bar.update(len(social))
            else:
                with ThreadPoolExecutor(max_workers=1, thread_name_prefix="social") as pool:
                    replies = (
                        pool.submit(generate_social, self.model, plan) if plan is not None and self._overlap() else None
                    )
                    slots, session_events = self._sessions(recommender, rng, r, t, bar)
                    events.extend(session_events)
                    touched: set[int] = set()
                    if plan is not None:
                        answer = replies.result() if replies is not None else generate_social(self.model, plan)
                        social_events, applied = apply_round_social(self.model, plan, answer, r)
                        touched = applied.touched
                        events.extend(social_events)
                        bar.update(len(social))
                events.extend(finish_sessions(slots, self._context(r, t, bar), self.model, also=touched, time_h=t))
            if self.human is not None and choices.get(self.human.user_id) == "social":
                events.extend(self.human.social(self, r, t, rng))
                bar.update(1)
        finally:
            bar.close()
        spent = self.world.llm.total
        delta = Usage(
            calls=spent.calls - usage_before.calls,
            prompt_tokens=spent.prompt_tokens - usage_before.prompt_tokens,
            completion_tokens=spent.completion_tokens - usage_before.completion_tokens,
        )
        seconds = time.perf_counter() - started
        waves_after = self._waves()
        self.rounds.append(
            {
                "round": r,
                "time_h": t,
                "active": len(active),
                "counts": dict(Counter(e.kind for e in events)),
                "seconds": round(seconds, 3),
                "tokens": delta.total_tokens,
                "calls": delta.calls,
                "waves": round_waves(
                    waves_before, waves_after, pipelined=self._pipelined(), driver=threading.current_thread().name
                ),
            }
        )
        log.info(
            "round %d/%d (%s): %d active, %d events, %.1f s, %d tokens",
            r + 1,
            sim.rounds,
            self.clock.text(),
            len(active),
            len(events),
            seconds,
            delta.total_tokens,
        )
        self.clock.advance()
        started = time.perf_counter()
        self.log.append(events)
        self.checkpoint()
        self.checkpoint_seconds.append(round(time.perf_counter() - started, 3))

    def _choose_actions(self, active: Sequence[int], rng: np.random.Generator, t: float) -> dict[int, str]:
        agents = [u for u in active if self.human is None or u != self.human.user_id]
        use_llm = self.config.simulation.action_choice == "llm"
        choices = dict(zip(agents, self.model.take_action(agents, rng, t, use_llm=use_llm), strict=True))
        if self.human is not None and self.human.user_id in active:
            choices[self.human.user_id] = self.human.choose_action(self.clock.text())
        return choices

    def _pipelined(self) -> bool:
        """Whether this round runs per-agent pipelines (``simulation.pipelines``; never with a human player)."""
        mode = self.config.simulation.pipelines
        on = self.config.llm.backend == "openai" if mode == "auto" else mode == "on"
        return on and self.human is None and self.config.simulation.execution == "parallel"

    def _pipeline_round(
        self, users: Sequence[int], plan: SocialPlan | None, rng: np.random.Generator, r: int, t: float, bar: tqdm
    ) -> list[Event]:
        """Every recommender agent's chain (:func:`run_chain`) and the social agents' chain at once; events in
        agent order, then the social events (as the staged round writes them)."""
        seeds = [int(rng.integers(0, SEED_HIGH)) for _ in users]
        page_seeds = [int(rng.integers(0, SEED_HIGH)) for _ in users]  # each chain's random page items
        slots = open_sessions(self.kernel, users, [self.model] * len(users), seeds, t)
        events = [Event(r, t, "enter", s.user, self.names[s.user]) for s in slots]
        ctx = self._context(r, t, bar)
        in_session = frozenset(users)
        workers = max(2, min(len(users) + 1, PIPELINE_THREADS))
        # work ahead: each page may start a feeling and a compression per agent, and they must not queue (a queued
        # job lengthens its agent's chain), so the pool is several jobs per agent wide
        with (
            ThreadPoolExecutor(max_workers=workers, thread_name_prefix="agent") as pool,
            ThreadPoolExecutor(max_workers=min(4 * workers, PIPELINE_THREADS), thread_name_prefix="ahead") as ahead,
        ):
            social = pool.submit(self._social_chain, plan, r, in_session, ahead) if plan is not None else None

            def receive(user: int) -> None:  # an agent's social notes, after its last page and before its writes
                if social is not None:
                    _, deferred, compressing = social.result()
                    if user in compressing:
                        compressing[user].result()
                    deliver(self.model, user, deferred.get(user, ()), t)

            chains = [
                pool.submit(run_chain, self.kernel, slot, ctx, np.random.default_rng(seed), self.model, receive, ahead)
                for slot, seed in zip(slots, page_seeds, strict=True)
            ]
            results = [c.result() for c in chains]
            social_events = social.result()[0] if social is not None else []
        for result in results:
            events.extend(result.events)
            if ctx.observe is not None:  # the recommender learns the round's watches in agent order
                for info, done in result.observed:
                    ctx.observe(info, done)
        events.extend(social_events)
        events.extend(close_sessions(slots, ctx, self.model))
        return events

    def _social_chain(
        self, plan: SocialPlan, r: int, in_session: frozenset[int], ahead: ThreadPoolExecutor
    ) -> tuple[list[Event], dict[int, list[Delivery]], dict[int, Future[None]]]:
        """The social agents' chain: their chats and posts, delivered to everyone not in a session now, whose
        memories are then written; the deliveries for agents in a session are returned for their chains, with the
        compression of those notes started ahead (``ahead``) for each of them."""
        answer = generate_social(self.model, plan)
        events, applied = apply_round_social(self.model, plan, answer, r, defer=in_session)
        compressing = {
            u: ahead.submit(precompress_deliveries, self.model.memory(u), deliveries, plan.time_h)
            for u, deliveries in applied.deferred.items()
        }
        if applied.touched:
            self.model.memory_backend.flush([self.model.memory(u) for u in sorted(applied.touched)], plan.time_h)
        return events, applied.deferred, compressing

    def _waves(self) -> dict[str, int]:
        waves = getattr(self.world.llm, "waves", None)
        return waves() if callable(waves) else {}

    def _overlap(self) -> bool:
        """Whether the social agents' LLM calls run beside the sessions (``simulation.overlap_social``)."""
        mode = self.config.simulation.overlap_social
        return self.config.llm.backend == "openai" if mode == "auto" else mode == "on"

    def _context(self, r: int, t: float, bar: tqdm) -> SessionContext:
        def done(slot: Slot) -> None:
            self.interactions.extend(slot.watches)
            bar.update(1)

        return SessionContext(
            round_index=r,
            time_h=t,
            names=self.names,
            titles=self._title,
            page=self._page,
            observe=getattr(self.recommender, "observe", None),
            on_done=done,
        )

    def _sessions(
        self, users: Sequence[int], rng: np.random.Generator, r: int, t: float, bar: tqdm
    ) -> tuple[list[Slot], list[Event]]:
        """The page loop of every session (their end-of-session writes wait for :func:`finish_sessions`)."""
        if not users:
            return [], []
        human = None if self.human is None else HumanUser(self.human)
        responders = [human if human is not None and u == self.human.user_id else self.model for u in users]  # type: ignore[union-attr]
        seeds = [int(rng.integers(0, SEED_HIGH)) for _ in users]
        slots = open_sessions(self.kernel, users, responders, seeds, t)  # the simulator's clock: agents live by it
        events = [Event(r, t, "enter", s.user, self.names[s.user]) for s in slots]
        ctx = self._context(r, t, bar)
        groups = [slots] if self.config.simulation.execution == "parallel" else [[s] for s in slots]
        for group in groups:
            events.extend(run_sessions(self.kernel, group, ctx, rng))
        return slots, events

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
        """Release the language model (the embedded model's memory, a remote client, the cache connection)."""
        close = getattr(self.world.llm, "close", None)
        if close is not None:
            close()

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
        import json

        export_interactions(self.out, self.dataset, self.interactions)
        atomic_write_text(self.out / "summary.json", json.dumps(self.summary(), indent=2))

    def checkpoint(self) -> Path:
        """Rewrite the tables and summary, then write this round's checkpoint atomically.

        Queued events (interventions, interviews) are part of the state and go into the next round's log.
        """
        self.out.mkdir(parents=True, exist_ok=True)
        self.write_outputs()
        path = ckpt.checkpoint_path(self.out, self.clock.round)
        ckpt.save_checkpoint(path, self.payload())
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


def round_waves(before: dict[str, int], after: dict[str, int], *, pipelined: bool, driver: str = "MainThread") -> int:
    """The longest sequential chain of batched LLM calls in a round, from the per-thread wave counts: the busiest
    thread for the staged round (the social thread runs beside the main one); for per-agent pipelines, the main
    thread's calls (``driver``: the thread running the round; take action, before the chains) plus the longest
    chain's."""
    spent = {k: n - before.get(k, 0) for k, n in after.items() if n > before.get(k, 0)}
    if not pipelined:
        return max(spent.values(), default=0)
    main = spent.pop(driver, 0)
    return main + max(spent.values(), default=0)


# -- entry points -------------------------------------------------------------------------------------------------


def holds_run(folder: Path) -> bool:
    return (folder / "events.jsonl").exists() or (folder / ckpt.CHECKPOINT_DIR).is_dir()


def start(config: Config, out: Path, *, llm: Any = None, embedder: Any = None, human: Any = None) -> Simulation:
    """A fresh simulation writing into ``out`` (which must not hold a run already)."""
    out = Path(out)
    if holds_run(out):
        raise SimulationError(f"{out} already holds a simulation; resume it with --resume {out}, or pick a new --out")
    world = build_world(config, llm=llm, embedder=embedder)
    sim = Simulation(world, out)
    if human is not None:
        sim.human = human.bind(sim)
    remove_stale_temp_files(out)
    return sim


def resume(
    spec: str | Path,
    out: Path | None = None,
    overrides: Sequence[str] = (),
    *,
    llm: Any = None,
    embedder: Any = None,
    human: Any = None,
    dry: bool = False,
) -> Simulation:
    """Continue from a checkpoint (a file or a run folder); into another ``out`` for a branch.

    Everything is validated and built before any file is written (``dry`` writes nothing at all: interviews and
    interventions). Continuing in place only cuts the event log back to the checkpoint's offsets (what a killed
    process appended after it); a branch copies the log up to them and never touches the source run.
    """
    path, payload = ckpt.load_checkpoint(spec)
    source = path.parent.parent
    target = source if out is None else Path(out)
    in_place = target.resolve() == source.resolve()
    if in_place and not dry and ckpt.find_latest(source).resolve() != path.resolve():
        raise SimulationError(
            f"{path} is not the latest checkpoint of {source}; continue an earlier round into a new --out (a branch)"
        )
    if not in_place and holds_run(target):
        raise SimulationError(f"{target} already holds a simulation; a branch needs an empty --out")
    if not dry:  # what the run keeps of its log must be whole (a dry load neither reads nor writes it)
        EventLog(source).verify(payload["state"]["log_offsets"])
    sim = _load(path, payload, target, overrides, llm, embedder)
    if human is not None:
        sim.human = human.bind(sim)
    if dry:
        return sim
    remove_stale_temp_files(target)
    if in_place:
        sim.log.restore(payload["state"]["log_offsets"])
        sim.write_outputs()
    else:
        _start_branch(sim, source, payload)
    return sim


def save_intervention(sim: Simulation, spec: str | Path, out: Path | None) -> Path:
    """Save an edited world (loaded with ``resume(..., dry=True)``) in place or as a branch in ``out``."""
    path, payload = ckpt.load_checkpoint(spec)
    source = path.parent.parent
    if out is None or Path(out).resolve() == source.resolve():
        if ckpt.find_latest(source).resolve() != path.resolve():
            raise SimulationError(
                f"{path} is not the latest checkpoint of {source}; save the edit with --out (a branch)"
            )
        sim.out, sim.log = source, EventLog(source)
        return sim.checkpoint()
    if holds_run(Path(out)):
        raise SimulationError(f"{out} already holds a simulation; a branch needs an empty --out")
    EventLog(source).verify(payload["state"]["log_offsets"])  # the branch copies it
    sim.out, sim.log = Path(out), EventLog(Path(out))
    return _start_branch(sim, source, payload)


def _start_branch(sim: Simulation, source: Path, payload: dict[str, Any]) -> Path:
    sim.out.mkdir(parents=True, exist_ok=True)
    sim.log.restore(payload["state"]["log_offsets"], EventLog(source))
    atomic_write_text(sim.out / "config.yaml", dump_config(sim.config))
    return sim.checkpoint()  # the branch starts with its own copy of the state it branched from


def _load(
    path: Path, payload: dict[str, Any], out: Path, overrides: Sequence[str], llm: Any, embedder: Any
) -> Simulation:
    legacy = payload.get("paths") != run_paths.MARK
    saved = run_paths.placed(payload["config"], path.parent.parent, legacy=legacy)
    config = resume_config(saved, overrides, str(path), out)
    # The run files (cache, record) a refused resume would create are removed again: it leaves nothing behind.
    with run_paths.removed_on_failure(run_paths.run_files(config.model_dump())):
        world = build_world(config, llm=llm, embedder=embedder)
        try:
            return _loaded(world, path, payload, out)
        except BaseException:
            close_model(world.llm)
            raise


def _loaded(world: World, path: Path, payload: dict[str, Any], out: Path) -> Simulation:
    expected = payload["dataset"]
    actual = {"name": world.dataset.name, "n_users": world.dataset.n_users, "n_items": world.dataset.n_items}
    for key, value in actual.items():
        if expected.get(key) != value:
            raise ckpt.CheckpointError(f"checkpoint {path}: dataset {key} is {expected.get(key)!r}, now {value!r}")
    sim = Simulation(world, out)
    try:
        sim.set_state(payload["state"])
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        # the components' own states: the schema checked their outer shape only
        raise ckpt.CheckpointError(f"checkpoint {path}: state does not load ({type(exc).__name__}: {exc})") from exc
    return sim


def resume_config(saved: dict[str, Any], overrides: Sequence[str], source: str, out: Path) -> Config:
    """The checkpoint's configuration with ``overrides``; only run-control keys may change. Relative run files an
    override names lie in the run folder ``out``, as for a fresh run.

    API keys are never taken from the checkpoint (it holds them redacted): they come from ``--set llm.api_keys=...``
    or the environment variable ``llm.api_key_env``, as for a fresh run. A run started with keys in
    ``llm.api_keys`` that gets none now is refused with a clear error instead of sending a placeholder key.
    """
    data = dict(saved)
    llm = dict(data.get("llm", {}))
    saved_keys = len(llm.get("api_keys") or [])
    llm["api_keys"] = []  # "***" in the checkpoint: never sent anywhere
    data["llm"] = llm
    base = config_from_dict(data, source)
    changed = config_from_dict(apply_overrides(data, overrides), f"{source} with overrides {list(overrides)}")
    allowed_sim = {"rounds", "execution", "progress", "keep_checkpoints"}
    before, after = base.model_dump(), changed.model_dump()
    for section, values in after.items():
        if section in RESUMABLE_SECTIONS:
            continue
        for key, value in values.items():
            if before[section][key] != value and not (section == "simulation" and key in allowed_sim):
                raise SimulationError(
                    f"{section}.{key} cannot change on resume (it shaped the saved state); "
                    f"resumable: {', '.join(RESUMABLE_SECTIONS)}, simulation.{{{', '.join(sorted(allowed_sim))}}}"
                )
    if saved_keys and changed.llm.backend == "openai" and not resolve_api_keys(changed.llm):
        raise SimulationError(
            f"this run used {saved_keys} API key(s) from llm.api_keys, which checkpoints never store: pass them "
            f"again with --set llm.api_keys=[...] or set the environment variable {changed.llm.api_key_env}"
        )
    return changed.in_run_folder(out)
