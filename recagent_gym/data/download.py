"""Download MovieLens-1M / -100K from GroupLens over HTTPS, verify the archive, and unpack it atomically.

The archive is checked against both the MD5 that GroupLens publishes beside it (``<name>.zip.md5``) and its SHA-256
(as pinned by several independent projects); a mismatch deletes the download and raises. The archive is unpacked
into a temporary folder beside the target and renamed into place only when complete, so a failure never leaves a
partial ``DIR/<name>/`` behind. ``RECAGENT_GYM_MOVIELENS_URL`` (or ``url=``) overrides the base URL, e.g. for a
mirror; a mirror serving other bytes needs its own ``sha256=``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from tqdm import tqdm

from recagent_gym.data.schema import DataError

logger = logging.getLogger(__name__)

BASE_URL = "https://files.grouplens.org/datasets/movielens"
URL_ENV = "RECAGENT_GYM_MOVIELENS_URL"
_CHUNK = 1 << 16


@dataclass(frozen=True)
class Archive:
    """An official archive: its folder name inside the zip, checksums, and files that must be in it."""

    name: str
    md5: str | None
    sha256: str | None
    required: tuple[str, ...]


ARCHIVES: dict[str, Archive] = {
    "ml-1m": Archive(
        "ml-1m",
        md5="c4d9eecfca2ab87c1945afe126590906",
        sha256="a6898adb50b9ca05aa231689da44c217cb524e7ebd39d264c56e2832f2c54e20",
        required=("movies.dat", "ratings.dat", "users.dat"),
    ),
    "ml-100k": Archive(
        "ml-100k",
        md5="0e33842e24a9c977be4e0107933c0723",
        sha256="50d2a982c66986937beb9ffb3aa76efe955bf3d5c6b761f4e3a7cd717c6a3229",
        required=("u.data", "u.item", "u.user"),
    ),
}


class DownloadError(DataError):
    """The download failed, or the archive is corrupt or not the expected one."""


def download(
    name: str,
    directory: str | Path = ".",
    *,
    url: str | None = None,
    sha256: str | None = None,
    force: bool = False,
    progress: bool = True,
    timeout_s: float = 60.0,
) -> Path:
    """Fetch ``<name>.zip`` and unpack it to ``directory/<name>``; returns that folder.

    ``url`` is the full archive URL (default: ``$RECAGENT_GYM_MOVIELENS_URL/<name>.zip``, else GroupLens).
    ``sha256`` replaces the pinned checksums (needed for a mirror that serves other bytes). An existing
    ``directory/<name>`` is kept unless ``force``.
    """
    if name not in ARCHIVES:
        raise DownloadError(f"unknown dataset {name!r} (known: {', '.join(ARCHIVES)})")
    spec = ARCHIVES[name]
    if sha256 is not None:
        spec = Archive(spec.name, md5=None, sha256=sha256.lower(), required=spec.required)
    directory = Path(directory).expanduser()
    target = directory / spec.name
    if target.exists() and not force:
        logger.info("%s already exists; pass force=True (--force) to download again", target)
        return target
    base = os.environ.get(URL_ENV) or BASE_URL
    source = url or f"{base.rstrip('/')}/{spec.name}.zip"
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{spec.name}-", dir=directory) as tmp:
        archive = Path(tmp) / f"{spec.name}.zip"
        _fetch(source, archive, progress=progress, timeout_s=timeout_s)
        _verify(archive, spec, source)
        unpacked = Path(tmp) / "unpacked"
        folder = _unpack(archive, unpacked, spec, source)
        if target.exists():
            shutil.rmtree(target)
        folder.rename(target)
    logger.info("%s unpacked to %s", source, target)
    return target


def _fetch(source: str, dest: Path, *, progress: bool, timeout_s: float) -> None:
    request = urllib.request.Request(source, headers={"User-Agent": "recagent-gym"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response, dest.open("wb") as out:
            length = response.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
            received = 0
            with tqdm(total=total, unit="B", unit_scale=True, desc=dest.name, disable=not progress) as bar:
                while chunk := response.read(_CHUNK):
                    out.write(chunk)
                    received += len(chunk)
                    bar.update(len(chunk))
            if total is not None and received != total:
                raise DownloadError(f"{source}: got {received} of {total} bytes (connection cut?)")
    except urllib.error.HTTPError as exc:
        raise DownloadError(f"{source}: HTTP {exc.code} {exc.reason}") from exc
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise DownloadError(f"{source}: download failed ({reason})") from exc


def _verify(archive: Path, spec: Archive, source: str) -> None:
    md5, sha = hashlib.md5(usedforsecurity=False), hashlib.sha256()
    with archive.open("rb") as f:
        while chunk := f.read(_CHUNK):
            md5.update(chunk)
            sha.update(chunk)
    for algorithm, expected, got in (("MD5", spec.md5, md5.hexdigest()), ("SHA-256", spec.sha256, sha.hexdigest())):
        if expected is not None and got != expected:
            raise DownloadError(
                f"{source}: {algorithm} checksum mismatch (expected {expected}, got {got}); the download was deleted"
            )


def _unpack(archive: Path, dest: Path, spec: Archive, source: str) -> Path:
    """Extract safely (no absolute or ``..`` member paths) and return the folder holding the required files."""
    try:
        with zipfile.ZipFile(archive) as zf:
            for member in zf.namelist():
                path = PurePosixPath(member)
                if path.is_absolute() or ".." in path.parts or "\\" in member:
                    raise DownloadError(f"{source}: unsafe path {member!r} in the archive")
            broken = zf.testzip()
            if broken is not None:
                raise DownloadError(f"{source}: corrupt member {broken!r} in the archive")
            zf.extractall(dest)
    except zipfile.BadZipFile as exc:
        raise DownloadError(f"{source}: not a valid zip archive ({exc})") from exc
    folder = dest / spec.name if (dest / spec.name).is_dir() else dest
    missing = [f for f in spec.required if not (folder / f).is_file()]
    if missing:
        raise DownloadError(f"{source}: the archive has no {spec.name}/{missing[0]} (missing: {missing})")
    return folder
