"""The dashboard's controller: one simulation, a worker thread that runs its rounds, and every request's action.

Concurrency: ``lock`` guards the simulation. The worker holds it for one round at a time; requests that change the
simulation are refused with :class:`Busy` while a run is in progress (pause first), so they never wait behind a
round or interleave with one. The page reads a snapshot refreshed after every round and every change.

Failures: requests are validated before anything changes, and every change is checkpointed at once (as
``sim-intervene`` does). An unexpected failure inside a round or a change reloads the latest checkpoint, so the
simulation is exactly what it was before the failed round or request; the error is shown in the page.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, get_args

import numpy as np

from recagent_gym.recommenders.config import RecommenderConfig
from recagent_gym.runs.config import Config, ConfigError
from recagent_gym.runs.config.simulation_section import SimulationConfig
from recagent_gym.runs.dashboard import views
from recagent_gym.runs.dashboard.checkpoint_list import checkpoint_file, list_checkpoints
from recagent_gym.runs.dashboard.event_feed import EventFeed
from recagent_gym.runs.dashboard.human_answers import fit_to_question
from recagent_gym.runs.dashboard.refusals import Busy, DashboardError, Failed, NotFound
from recagent_gym.runs.dashboard.requests import HumanAction
from recagent_gym.runs.dashboard.web_human import NotAsked, WebHuman
from recagent_gym.runs.simulator import checkpoint as ckpt
from recagent_gym.runs.simulator import runner
from recagent_gym.runs.simulator.errors import SimulationError
from recagent_gym.runs.simulator.events import Event
from recagent_gym.runs.simulator.social_step import deliver_post

log = logging.getLogger(__name__)

RECOMMENDERS: tuple[str, ...] = get_args(RecommenderConfig.model_fields["model"].annotation)
LOCK_WAIT_S = 5.0
"""How long a change waits for the lock (held briefly by snapshot refreshes) before answering busy."""
KNOWN_ERRORS = (SimulationError, ckpt.CheckpointError, ConfigError)


class Dashboard:
    """Runs one simulation at a time in the background for the web API (see the module docstring)."""

    def __init__(self, config: Config, root: Path, *, llm: Any = None, embedder: Any = None) -> None:
        self.config = config
        self.root = Path(root)
        self._llm, self._embedder = llm, embedder
        self.lock = threading.RLock()
        self.human = WebHuman()
        self.sim: runner.Simulation | None = None
        self.running = False
        self.error: str | None = None
        """The last failure of a round (cleared by the next start)."""
        self.epoch = 0
        """Bumped whenever the simulation object is replaced (reset, load): the page then reloads its log."""
        self._pause = threading.Event()
        self._worker: threading.Thread | None = None
        self.feed = EventFeed()
        """The run's events and the page's log lines."""
        self._interviews = 0
        self._snapshot: dict[str, Any] = {}
        self._replace(self._fresh(), "new simulation")

    # -- simulations ----------------------------------------------------------------------------------------------

    def _next_run_dir(self) -> Path:
        k = 1
        while (self.root / f"run-{k:03d}").exists():
            k += 1
        return self.root / f"run-{k:03d}"

    def _fresh(self) -> runner.Simulation:
        sim = runner.start(self.config, self._next_run_dir(), llm=self._llm, embedder=self._embedder)
        sim.run(0)  # the round-0 checkpoint: what a failure before the first round restores
        return sim

    def _replace(self, sim: runner.Simulation, why: str, kind: str = "notice") -> None:
        with self.lock:
            old, self.sim = self.sim, sim
            if old is not None and old is not sim:
                old.human = None
                if self._llm is None:  # an injected model belongs to the caller
                    old.close()
            self.human.unbind()
            self.epoch += 1
            self.feed.clear()
            self.feed.read(sim.log.jsonl)
            self.notice(f"{why}: {sim.out.name}, round {sim.clock.round} ({sim.dataset.n_users} agents)", kind)
            self._refresh()

    def _restore(self, sim: runner.Simulation, why: str) -> None:
        """Reload ``sim``'s latest checkpoint in place after a failure (the state before the failed step)."""
        try:
            restored = runner.resume(sim.out, None, (), llm=self._llm, embedder=self._embedder)
        except Exception as exc:  # the original failure is reported either way
            log.exception("restoring %s failed", sim.out)
            self.error = f"{why}; restoring the latest checkpoint failed too ({exc}): reset the simulation"
            self.notice(self.error, "error")
            return
        self._replace(restored, f"{why}; restored the latest checkpoint", "error")

    # -- the event log --------------------------------------------------------------------------------------------

    def notice(self, text: str, kind: str = "notice") -> None:
        """A dashboard message in the page's log (``notice`` or ``error``)."""
        self.feed.notice(text, kind)

    def _refresh(self) -> None:
        with self.lock:
            assert self.sim is not None
            self._snapshot = {**views.snapshot(self.sim, self.feed.events), "checkpoints": self.checkpoints()}

    # -- reading --------------------------------------------------------------------------------------------------

    @property
    def status(self) -> str:
        if self.running:
            if self.human.question is not None:
                return "waiting_for_human"
            return "pausing" if self._pause.is_set() else "running"
        assert self.sim is not None
        return "ready" if self.sim.clock.round == 0 else "paused"

    def state(self, since: int = 0) -> dict[str, Any]:
        """The page's view; ``since``: log lines already shown (of this ``epoch``)."""
        sim = self.sim
        assert sim is not None
        lines = self.feed.lines
        return {
            **self._snapshot,
            "status": self.status,
            "error": self.error,
            "epoch": self.epoch,
            "usage": views.usage_view(sim.world.llm.total, sim),
            "human": self.human.view(),
            "recommenders": list(RECOMMENDERS),
            "log": {"next": len(lines), "lines": lines[since:]},
        }

    def agent(self, who: str) -> dict[str, Any]:
        sim = self.sim
        assert sim is not None
        user = self._find(sim, who)
        profile = next(a for a in self._snapshot["agents"] if a["id"] == user)
        return views.agent_view(sim, profile, self.feed.lines)

    def checkpoints(self) -> list[dict[str, Any]]:
        return list_checkpoints(self.root, self.sim.out if self.sim is not None else None)

    # -- run control ----------------------------------------------------------------------------------------------

    @staticmethod
    def _find(sim: runner.Simulation, who: str | int) -> int:
        try:
            return sim.find_agent(who)
        except SimulationError as exc:
            raise NotFound(str(exc)) from exc

    @contextmanager
    def _idle(self) -> Iterator[runner.Simulation]:
        """The simulation, for a change; refused while a run is in progress."""
        busy = "a run is in progress: pause it and wait for the current round to finish"
        if self.running:
            raise Busy(busy)
        if not self.lock.acquire(timeout=LOCK_WAIT_S):
            raise Busy("the simulation is busy; try again")
        try:
            if self.running:
                raise Busy(busy)
            assert self.sim is not None
            yield self.sim
        finally:
            self.lock.release()

    @contextmanager
    def _change(self, sim: runner.Simulation, what: str) -> Iterator[None]:
        """Apply a validated change and checkpoint it; any failure restores the latest checkpoint."""
        try:
            yield
            sim.checkpoint()
        except Exception as exc:
            log.exception("%s failed", what)
            message = f"{what} failed ({type(exc).__name__}: {exc})"
            self._restore(sim, message)
            raise (DashboardError(message) if isinstance(exc, KNOWN_ERRORS) else Failed(message)) from exc
        self._refresh()

    def _set_simulation(self, sim: runner.Simulation, **fields: Any) -> None:
        section = SimulationConfig.model_validate({**sim.config.simulation.model_dump(), **fields})
        sim.config = sim.world.config = sim.config.model_copy(update={"simulation": section})

    def start(self, rounds: int | None = None) -> str:
        """Run ``rounds`` more rounds in the background (default: up to ``simulation.rounds``)."""
        with self._idle() as sim:
            total = sim.config.simulation.rounds
            todo = rounds if rounds is not None else total - sim.clock.round
            if todo < 1:
                raise DashboardError(f"all {total} rounds of simulation.rounds are done: ask for a number of rounds")
            if sim.clock.round + todo > total:
                self._set_simulation(sim, rounds=sim.clock.round + todo)
            self.running, self.error = True, None
            self._pause.clear()
            self._worker = threading.Thread(target=self._work, args=(todo,), name="dashboard-worker", daemon=True)
            self._worker.start()
            return f"running {todo} round(s) from round {sim.clock.round + 1}"

    def pause(self) -> str:
        if not self.running:
            return "nothing is running"
        self._pause.set()
        waiting = " (the human player is being asked: answer or give up)" if self.human.question else ""
        return "pausing after the current round" + waiting

    def _work(self, todo: int) -> None:
        try:
            for _ in range(todo):
                if self._pause.is_set():
                    break
                with self.lock:
                    sim = self.sim
                    assert sim is not None
                    number = sim.clock.round + 1
                    try:
                        sim.run_round()
                    except Exception as exc:
                        log.exception("round %d failed", number)
                        self.error = f"round {number} failed ({type(exc).__name__}: {exc})"
                        self._restore(sim, self.error)
                        break
                    self.feed.read(sim.log.jsonl)
                    record = sim.rounds[-1]
                    self.notice(
                        f"round {number} done: {record['active']} active, {sum(record['counts'].values())} events, "
                        f"{record['seconds']:.1f} s, {record['tokens']} tokens"
                    )
                    self._refresh()
        finally:
            with self.lock:
                self.running = False
                self._pause.clear()
            self._refresh()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the current run ends; True when nothing runs any more."""
        worker = self._worker
        if worker is not None:
            worker.join(timeout)
        return not self.running

    def reset(self) -> str:
        with self._idle():
            self._replace(self._fresh(), "reset: new simulation")
            return "a new simulation is ready"

    def set_mode(self, execution: str) -> str:
        with self._idle() as sim, self._change(sim, "changing the execution mode"):
            self._set_simulation(sim, execution=execution)
        self.notice(f"execution mode: {execution}")
        return f"execution mode is {execution}"

    # -- interventions --------------------------------------------------------------------------------------------

    def edit_profile(self, who: str, fields: dict[str, Any]) -> dict[str, Any]:
        if not fields:
            raise DashboardError("nothing to edit: give at least one profile field")
        with self._idle() as sim:
            user = self._find(sim, who)
            with self._change(sim, "editing the profile"):
                sim.edit_profile(user, **fields)
            self.notice(f"profile of {sim.names[user]} (#{user}) edited: {', '.join(sorted(fields))}")
            return next(a for a in self._snapshot["agents"] if a["id"] == user)

    def inject_post(self, author: str, text: str) -> str:
        with self._idle() as sim:
            user = self._find(sim, author)
            t, r = sim.clock.time_h, sim.clock.round
            with self._change(sim, "injecting the post"):
                friends = deliver_post(sim.model, user, text, t)
                sim.note(Event(r, t, "intervention", user, sim.names[user], text=f"injected post: {text}"))
            self.notice(f"injected post by {sim.names[user]}, read by {len(friends)} friend(s): {text}")
            return f"post delivered to {len(friends)} friend(s) of {sim.names[user]}"

    def interview(self, who: str, question: str) -> dict[str, Any]:
        with self._idle() as sim:
            user = self._find(sim, who)
            name, t, r = sim.names[user], sim.clock.time_h, sim.clock.round
            # Its own stream: interviewing must not shift the simulation's random draws.
            seq = np.random.SeedSequence([sim.config.simulation.seed, r, user, self._interviews])
            with self._change(sim, "the interview"):
                answer = sim.model.interview(user, question, np.random.default_rng(seq), t)
                sim.note(Event(r, t, "interview", user, name, text=f"Q: {question} A: {answer}"))
            self._interviews += 1
            self.notice(f"interview of {name}: Q: {question} A: {answer}")
            return {"agent": user, "name": name, "question": question, "answer": answer}

    def swap_recommender(self, model: str) -> str:
        if model not in RECOMMENDERS:
            raise DashboardError(f"unknown recommender {model!r}; expected one of {', '.join(RECOMMENDERS)}")
        with self._idle() as sim, self._change(sim, "swapping the recommender"):
            sim.swap_recommender(model)
        self.notice(f"recommender swapped to {model}")
        return f"recommender is now {model}"

    # -- checkpoints ----------------------------------------------------------------------------------------------

    def save(self) -> dict[str, Any]:
        with self._idle() as sim:
            with self._change(sim, "saving the checkpoint"):
                pass  # ``_change`` writes it
            path = ckpt.checkpoint_path(sim.out, sim.clock.round)
            ident = f"{sim.out.name}/{path.stem}"
            self.notice(f"checkpoint saved: {ident}")
            return {"id": ident, "path": str(path)}

    def load(self, ident: str) -> str:
        path = checkpoint_file(self.root, ident)
        with self._idle():
            source = path.parent.parent
            latest = ckpt.find_latest(source).resolve() == path.resolve()
            out = None if latest else self._next_run_dir()
            try:
                sim = runner.resume(path, out, (), llm=self._llm, embedder=self._embedder)
            except KNOWN_ERRORS as exc:
                raise DashboardError(f"cannot load {ident}: {exc}") from exc
            how = "continued" if latest else f"branched into {out.name if out else ''}"
            self._replace(sim, f"loaded {ident} ({how})")
            return f"loaded {ident}: {how}"

    # -- human play -----------------------------------------------------------------------------------------------

    def play(self, who: str) -> str:
        with self._idle() as sim:
            user = self._find(sim, who)
            self.human.unbind()
            self.human.who = f"#{user}"
            sim.human = self.human.bind(sim)
            self.notice(f"a human now plays {sim.names[user]} (#{user}): active every round")
            return f"you play {sim.names[user]}; run a round and answer in the play panel"

    def stop_playing(self) -> str:
        with self._idle() as sim:
            if sim.human is None:
                raise DashboardError("nobody is being played")
            name = self.human.name
            sim.human = None
            self.human.unbind()
            self.notice(f"the human stopped playing {name}")
            return f"{name} is an LLM agent again"

    def act(self, action: HumanAction) -> str:
        """The human's answer to the pending question, checked against it (the page's items, the friends)."""
        action = fit_to_question(action, self.human.question, self.human.name)
        try:
            self.human.answer(action.line(), action.question_kinds())
        except NotAsked as exc:
            raise Busy(str(exc)) from exc
        return "gave up" if action.kind == "give_up" else f"answered {action.kind}"

    def close(self) -> None:
        """Stop the worker (the human's pending question is answered with end of input) and release the model."""
        self.human.close()
        self._pause.set()
        self.wait(timeout=60)
        with self.lock:
            if self.sim is not None and self._llm is None:
                self.sim.close()
