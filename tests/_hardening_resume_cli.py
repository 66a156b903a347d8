"""``python -m tests._hardening_resume_cli ARGS``: the real command line with the hashing embedder in place of the
sentence-transformers model (seconds to load), for subprocess tests of what a command prints when it exits."""

from __future__ import annotations

import sys

from recagent_gym.llm import embedder
from recagent_gym.llm.testing import HashingEmbedder

if __name__ == "__main__":
    from recagent_gym.runs.cli import main

    embedder.SentenceEmbedder = lambda *args, **kwargs: HashingEmbedder(32)  # type: ignore[assignment,misc]
    sys.exit(main())
