"""Starting, resuming and branching a simulation run (the round loop itself: :mod:`.simulation`).

A run folder holds ``config.yaml``, the event log (``events.jsonl``, ``events.log``), the interaction tables, the
summary and ``checkpoints/`` (one JSON file per round plus the vector file their arrays live in). :func:`start`
begins a fresh run; :func:`resume` continues one from a checkpoint, in place or as a branch in another folder;
:func:`save_intervention` saves an edited world the same two ways.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from recagent_gym.llm.secrets import resolve_api_keys
from recagent_gym.llm.wrapping import close_model
from recagent_gym.runs.config import Config, config_from_dict, dump_config
from recagent_gym.runs.config.loader import apply_overrides
from recagent_gym.runs.output_folder import check_output_folder
from recagent_gym.runs.simulator import checkpoint as ckpt
from recagent_gym.runs.simulator import run_paths
from recagent_gym.runs.simulator.errors import SimulationError
from recagent_gym.runs.simulator.events import EventLog
from recagent_gym.runs.simulator.files import atomic_write_text, remove_stale_temp_files
from recagent_gym.runs.simulator.round_modes import PIPELINE_THREADS
from recagent_gym.runs.simulator.round_record import round_waves
from recagent_gym.runs.simulator.simulation import PROFILE_FIELDS, Simulation
from recagent_gym.runs.simulator.world import World, build_world

__all__ = [
    "PIPELINE_THREADS",
    "PROFILE_FIELDS",
    "RESUMABLE_SECTIONS",
    "Simulation",
    "holds_run",
    "resume",
    "resume_config",
    "round_waves",
    "save_intervention",
    "start",
]

RESUMABLE_SECTIONS: tuple[str, ...] = ("llm", "recommender")
"""Sections an override may change on resume (with ``simulation.rounds``/``execution``/``progress``/``keep_*``)."""


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
    if not dry:  # one writer per run: a second resume of the same run is refused here, before it reads on
        check_output_folder(target, "--resume" if in_place else "--out")
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
    check_output_folder(source if out is None else Path(out), "checkpoint" if out is None else "--out")
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
