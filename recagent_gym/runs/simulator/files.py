"""Atomic file writes: a reader (or a resumed run) sees the old file or the new one, never a torn one.

The temporary file is ``.<name>.<pid>-<random>.tmp`` beside the target; a process killed mid-write leaves it
behind, and :func:`remove_stale_temp_files` (called when a run starts or resumes) deletes those whose writer is
gone. The result gets the permissions a plain ``open(path, "w")`` would give: the old file's mode when it is
replaced, else ``0o666`` less the umask (``mkstemp`` alone makes every file ``0600``).
"""

from __future__ import annotations

import os
import re
import stat
import tempfile
import threading
import time
from pathlib import Path

_TEMP_NAME = re.compile(r"^\..+\.(?:(?P<pid>\d+)-[A-Za-z0-9_]+|[A-Za-z0-9_]{8})\.tmp$")
LEGACY_TEMP_AGE_S = 3600.0
"""Temporary files without a writer's pid (written before pids were in the name) count as stale after this age."""
_umask_lock = threading.Lock()


def _umask() -> int:
    """The process umask, read without changing it where the platform allows (``os.umask`` swaps it)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _umask_lock:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def _mode_for(path: Path) -> int:
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return 0o666 & ~_umask()


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to a temporary file beside ``path``, sync it, then ``os.replace`` it over ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}-", suffix=".tmp", dir=path.parent)
    try:
        if hasattr(os, "fchmod"):  # POSIX; elsewhere mkstemp's mode is the platform's default
            os.fchmod(fd, _mode_for(path))
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True  # another thread of this process may be writing right now
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    return True


def remove_stale_temp_files(folder: Path) -> list[Path]:
    """Delete the temporary files :func:`atomic_write_text` left under ``folder`` (recursively) when its writer was
    killed; files of a live writer and every other file are kept. Returns what was deleted."""
    removed: list[Path] = []
    if not folder.is_dir():
        return removed
    now = time.time()
    for candidate in folder.rglob(".*.tmp"):
        match = _TEMP_NAME.match(candidate.name)
        if match is None or not candidate.is_file():
            continue
        pid = match.group("pid")
        alive = _alive(int(pid)) if pid is not None else now - candidate.stat().st_mtime <= LEGACY_TEMP_AGE_S
        if not alive:
            candidate.unlink(missing_ok=True)
            removed.append(candidate)
    return removed
