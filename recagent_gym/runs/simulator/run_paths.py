"""A run's own files (the LLM response cache, the request record) found from wherever a command runs.

A fresh run places its relative run files in its folder (``Config.in_run_folder``), as paths relative to the
working directory it was started from (``outputs/sim/llm_cache.sqlite``). Stored like that, a checkpoint resumed
from another directory pointed at a new, empty cache there and ignored the run's own. So a checkpoint stores a run
file inside the run's folder relative to that folder (``llm_cache.sqlite``) and any other one absolute, and marks
this with ``"paths": "run-folder"``; a resume turns them into absolute paths under the folder the checkpoint was
found in. Checkpoints of earlier builds (no mark) hold paths relative to the start directory: they are matched
against the run folder's own path (``outputs/sim/x`` in ``/home/me/outputs/sim``), else read as before.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from recagent_gym.llm.config import RUN_FILES

MARK = "run-folder"
"""The checkpoint's ``paths`` value: relative run files are relative to the run's folder."""
_SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")


def _llm_sections(config: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The configuration's LLM sections (the run's, and the judge's where there is one), to edit in place."""
    if isinstance(config.get("llm"), dict):
        yield config["llm"]
    evaluation = config.get("evaluation")
    judge = evaluation.get("judge_llm") if isinstance(evaluation, dict) else None
    if isinstance(judge, dict):
        yield judge


def _map_run_files(config: dict[str, Any], change: Callable[[str], str]) -> dict[str, Any]:
    """A copy of ``config`` (the LLM sections copied, the rest shared) with ``change`` applied to each run file."""
    out = {**config}
    if isinstance(out.get("llm"), dict):
        out["llm"] = {**out["llm"]}
    if isinstance(out.get("evaluation"), dict):
        out["evaluation"] = {**out["evaluation"]}
        if isinstance(out["evaluation"].get("judge_llm"), dict):
            out["evaluation"]["judge_llm"] = {**out["evaluation"]["judge_llm"]}
    for section in _llm_sections(out):
        for key in RUN_FILES:
            if isinstance(section.get(key), str):
                section[key] = change(section[key])
    return out


def portable_path(path: str, folder: Path) -> str:
    """``path`` relative to the run ``folder`` when it lies inside it, else absolute."""
    absolute = Path(path).resolve()
    root = Path(folder).resolve()
    return absolute.relative_to(root).as_posix() if absolute.is_relative_to(root) else str(absolute)


def placed_path(path: str, folder: Path, *, legacy: bool = False) -> str:
    """``path`` from a checkpoint as an absolute path: relative ones lie in the run ``folder``."""
    given = Path(path)
    if given.is_absolute():
        return str(given)
    root = Path(folder).resolve()
    if not legacy:
        return str(root / given)
    parts, tail = given.parts, root.parts
    for k in range(len(parts) - 1, 0, -1):  # ``outputs/sim/cache`` of a run now in ``.../outputs/sim``
        if tail[-k:] == parts[:k]:
            return str(root.joinpath(*parts[k:]))
    return str(given.resolve())  # as earlier builds read it: from the working directory


def portable(config: dict[str, Any], folder: Path) -> dict[str, Any]:
    """A copy of ``config`` (plain data) with its run files as :func:`portable_path` gives them."""
    return _map_run_files(config, lambda p: portable_path(p, folder))


def placed(config: dict[str, Any], folder: Path, *, legacy: bool = False) -> dict[str, Any]:
    """A copy of ``config`` (plain data, from a checkpoint) with its run files as :func:`placed_path` gives them."""
    return _map_run_files(config, lambda p: placed_path(p, folder, legacy=legacy))


def run_files(config: dict[str, Any]) -> list[Path]:
    """The run files ``config`` names (absolute once :func:`placed`)."""
    return [Path(section[key]) for section in _llm_sections(config) for key in RUN_FILES if section.get(key)]


@contextlib.contextmanager
def removed_on_failure(paths: list[Path]) -> Iterator[None]:
    """Delete those of ``paths`` (with SQLite's side files and the folders made for them) that the block created,
    if it fails: a refused resume leaves nothing behind."""
    watched = [Path(str(p) + side) for p in paths for side in ("", *_SQLITE_SIDE_FILES)]
    new_files = [p for p in watched if not p.exists()]
    new_dirs = sorted({d for p in paths for d in Path(p).parents if not d.exists()}, key=lambda d: -len(d.parts))
    try:
        yield
    except BaseException:
        for path in new_files:
            path.unlink(missing_ok=True)
        for folder in new_dirs:  # deepest first; only the empty ones this block made
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise
