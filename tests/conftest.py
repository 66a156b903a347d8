"""Test-session settings: offline model hubs, quiet tokenizers, deterministic thread counts."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("MPLBACKEND", "Agg")

pytest_plugins = ["tests._llm_fixtures"]  # the embedded LLM and the sentence embedder, loaded once per session
