"""The one check of an output folder before a command does any work: it is (or can become) a folder we can write.

Without it, ``simulate --out /etc/passwd`` or ``train --output-dir /proc/nope`` got as far as their first
``mkdir``, after loading data and models, and ended in a traceback. :func:`check_output_folder` is called by the
command line for every ``--out`` / ``--output-dir`` (:func:`recagent_gym.runs.cli.dispatch`) and by the commands for a
folder taken from the configuration (``train.output_dir``).

Permission bits do not say enough (root passes every ``os.access`` check, yet cannot create anything in ``/proc``),
so the check writes: it creates and at once removes one empty probe folder in the nearest folder that exists. Nothing
else is created, and nothing that existed is touched.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from recagent_gym.settings_section import ConfigError


def check_output_folder(path: str | Path, what: str) -> Path:
    """``path`` as a :class:`Path` if it is a folder we can write in, or can be created as one; otherwise a
    :class:`ConfigError` naming ``what`` (the option or key that gave it) and the reason."""
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
    return folder
