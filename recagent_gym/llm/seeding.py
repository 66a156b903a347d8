"""Per-call seeds derived from a base seed, so every LLM call is reproducible without shared global state."""

from __future__ import annotations

import hashlib


def derive_seed(*parts: object) -> int:
    """A 32-bit seed fixed by ``parts`` (stable across processes and Python versions, unlike ``hash``)."""
    text = "\x1f".join(repr(part) for part in parts)
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=4).digest(), "little")


SEED_HIGH = 2**31 - 1
"""Exclusive upper bound of every seed drawn in the package (``rng.integers(0, SEED_HIGH)``): LLM call seeds (the
backends take 32-bit seeds) and child generator seeds alike."""
