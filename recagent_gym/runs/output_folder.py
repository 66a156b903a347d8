"""The one check of an output folder before a command does any work, and the one lock that keeps it to one writer.

:func:`check_output_folder` is called by the command line for every ``--out`` / ``--output-dir``
(:func:`recagent_gym.runs.cli.dispatch`), by the commands for a folder taken from the configuration
(``train.output_dir``) and by ``simulate --resume`` / ``sim-intervene`` for the run they continue in place. Without
it, ``simulate --out /etc/passwd`` got as far as its first ``mkdir``, after loading data and models, and ended in a
traceback. Permission bits do not say enough (root passes every ``os.access`` check, yet cannot create anything in
``/proc``), so the check writes: it creates and at once removes one empty probe folder in the nearest folder that
exists.

**One writer per folder.** While a command runs (inside :func:`one_writer`, which the command line opens around
every command), the same call also takes an exclusive advisory lock (``fcntl.flock``) on :data:`LOCK_NAME` inside
the folder, creating the folder for it. A second process that asks for a folder held by another is refused with
:class:`FolderInUseError` before it writes anything: two ``users collect --out T`` or two ``simulate --resume T``
at once used to append the same rows twice. The kernel drops the lock when the process ends, killed or not, so a
stale lock file never blocks a later run. On a normal exit the lock file is removed, and so is the folder if the
command created it and left it empty. A folder inside one already held needs no lock of its own. Outside
:func:`one_writer` (the library used from Python) nothing is locked.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from recagent_gym.errors import RecAgentError
from recagent_gym.settings_section import ConfigError

log = logging.getLogger(__name__)

LOCK_NAME = ".recagent-gym.lock"
"""The lock file inside a held folder (it holds the writer's process id, for the refusal message)."""


class FolderInUseError(RecAgentError):
    """Another process writes the output folder a command asked for."""

    label = "folder in use"


def check_output_folder(path: str | Path, what: str, *, lock: bool = True) -> Path:
    """``path`` as a :class:`Path` if it is a folder we can write in, or can be created as one; otherwise a
    :class:`ConfigError` naming ``what`` (the option or key that gave it) and the reason. Inside :func:`one_writer`
    the folder is also created and locked for this process (:class:`FolderInUseError` if another holds it), unless
    ``lock`` is False: a folder of pages that many commands each write one file of (``--results-page``)."""
    folder = Path(path)
    if not str(path).strip():
        raise ConfigError(f"{what}: the output folder is an empty path")
    existing = folder
    while not existing.exists() and existing != existing.parent:
        if existing.is_symlink():  # a dangling link: mkdir would fail on it
            raise ConfigError(f"{what}: output folder {folder}: {existing} is a broken symbolic link")
        existing = existing.parent
    if not existing.is_dir():
        where = "is a file" if existing == folder else f"lies under {existing}, which is not a folder"
        raise ConfigError(f"{what}: output folder {folder} {where}")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".recagent-gym-probe-", dir=existing))
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ConfigError(f"{what}: cannot write the output folder {folder} ({existing}: {reason})") from None
    with _GUARD:
        locks = _ACTIVE[-1] if _ACTIVE else None
    if locks is not None and lock:
        locks.hold(folder, what)
    return folder


@dataclass
class _Held:
    folder: Path
    fd: int
    created: list[Path]
    """Folders made for the lock, deepest first: removed on release if the command left them empty."""


@dataclass
class FolderLocks:
    """The folders one command holds, released together (:func:`one_writer`)."""

    held: list[_Held] = field(default_factory=list)

    def covers(self, folder: Path) -> bool:
        return any(h.folder == folder or h.folder in folder.parents for h in self.held)

    def hold(self, path: Path, what: str) -> None:
        folder = path.resolve()
        if self.covers(folder):
            return
        for _ in range(5):  # another writer may remove its empty folder or lock file between our steps
            created = [p for p in (folder, *folder.parents) if not p.exists()]
            try:
                folder.mkdir(parents=True, exist_ok=True)
                fd = os.open(folder / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
            except FileNotFoundError:
                continue
            except OSError as exc:
                for made in created:  # nothing left behind
                    with contextlib.suppress(OSError):
                        made.rmdir()
                raise ConfigError(f"{what}: cannot lock the output folder {path} ({exc.strerror})") from None
            if self._take(fd, folder, path, what):
                with contextlib.suppress(OSError):  # the process id only names the writer in a refusal
                    os.ftruncate(fd, 0)
                    os.write(fd, f"{os.getpid()}\n".encode())
                self.held.append(_Held(folder, fd, created))
                return
        raise FolderInUseError(f"{what}: {path} is being created or removed by another process; try again")

    @staticmethod
    def _take(fd: int, folder: Path, path: Path, what: str) -> bool:
        """Lock ``fd``: True if it is still the folder's lock file (a releasing writer may have unlinked it)."""
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = ""
            with contextlib.suppress(OSError):
                pid = os.pread(fd, 32, 0).decode(errors="replace").strip()
            os.close(fd)
            owner = f" (process {pid})" if pid.isdigit() else ""
            raise FolderInUseError(
                f"{what}: {path} is being written by another recagent-gym command{owner}; wait for it to end or "
                "use another folder"
            ) from None
        except OSError as exc:  # a file system without locks (some network mounts): run, but say so
            log.warning("cannot lock %s (%s): another command could write it at the same time", path, exc)
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(folder / LOCK_NAME))
        except FileNotFoundError:
            same = False
        if not same:
            os.close(fd)
        return same

    def release(self) -> None:
        while self.held:
            held = self.held.pop()
            with contextlib.suppress(OSError):
                (held.folder / LOCK_NAME).unlink()  # unlinked while still locked: no one can take a stale file
            os.close(held.fd)
            for folder in held.created:
                with contextlib.suppress(OSError):
                    folder.rmdir()  # only an empty folder goes


_ACTIVE: list[FolderLocks] = []
_GUARD = threading.Lock()


@contextlib.contextmanager
def one_writer() -> Iterator[FolderLocks]:
    """Every output folder checked inside the block is locked for this process until the block ends."""
    locks = FolderLocks()
    with _GUARD:
        _ACTIVE.append(locks)
    try:
        yield locks
    finally:
        with _GUARD:
            _ACTIVE.remove(locks)
        locks.release()
