"""``python -m tests._hardening_round3_cli ARGS``: ``simulate`` with the scripted model and hashing embedder (as
:mod:`tests._sim_fixtures`), whose model waits before its first batch until the file ``$ROUND3_GATE`` exists: the
test holds a run at a known point (its lock taken, nothing yet appended) while a second command tries the folder."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests._sim_fixtures import SlowScriptedLLM, make_embedder

GATE_TIMEOUT_S = 120.0


class GatedLLM(SlowScriptedLLM):
    """The scripted model; each batch first waits for the gate file (created by the test)."""

    def __init__(self, gate: Path) -> None:
        super().__init__()
        self.gate = gate

    def _wait(self) -> None:
        deadline = time.monotonic() + GATE_TIMEOUT_S
        while not self.gate.exists():
            if time.monotonic() > deadline:
                raise SystemExit(f"gate {self.gate} never opened")
            time.sleep(0.05)

    def generate(self, prompts: Sequence[str], **kwargs: Any) -> list:
        self._wait()
        return super().generate(prompts, **kwargs)

    def choose(self, prompts: Sequence[str], options: Sequence[Sequence[str]], **kwargs: Any) -> list:
        self._wait()
        return super().choose(prompts, options, **kwargs)


def main(argv: Sequence[str] | None = None) -> int:
    from recagent_gym.runs.cli import build_parser, dispatch
    from recagent_gym.runs.commands import simulate as commands

    args = build_parser().parse_args(argv)
    if args.command != "simulate":
        raise SystemExit(f"unsupported command {args.command}")
    gate = os.environ.get("ROUND3_GATE")
    llm = GatedLLM(Path(gate)) if gate else SlowScriptedLLM()
    args.func = lambda parsed: commands.run_simulate(parsed, llm=llm, embedder=make_embedder())
    return dispatch(args)


if __name__ == "__main__":
    sys.exit(main())
