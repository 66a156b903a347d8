"""``recagent-gym llm check``: one free generation and one constrained choice on the configured backend."""

from __future__ import annotations

import argparse
import time
from typing import Any

from recagent_gym.llm.protocol import LLMError

CHECK_PROMPT = "The best film I have ever seen is"
CHOICE_PROMPT = "Question: Is a comedy usually meant to be funny?\nAnswer (Yes or No):"
CHOICE_OPTIONS = (" Yes", " No")


def register(subparsers: Any) -> None:
    from recagent_gym.runs.cli import add_config_arguments

    llm = subparsers.add_parser("llm", help="language-model backends")
    llm_sub = llm.add_subparsers(dest="llm_command", required=True)
    check = llm_sub.add_parser("check", help="one generation and one choice on the configured backend")
    add_config_arguments(check)
    check.add_argument("--max-tokens", type=int, default=24, help="tokens for the free generation")
    check.set_defaults(func=run_check)


def run_check(args: argparse.Namespace) -> int:
    from recagent_gym.llm.factory import build_llm
    from recagent_gym.runs.config import load_config

    cfg = load_config(args.config, args.overrides).llm
    started = time.perf_counter()
    try:
        llm = build_llm(cfg)
    except LLMError as exc:
        print(f"llm check: could not start backend {cfg.backend}: {exc}")
        return 1
    print(f"backend   {cfg.backend}  ({llm.name}), ready in {time.perf_counter() - started:.2f} s")
    try:
        (generation,) = llm.generate([CHECK_PROMPT], max_tokens=args.max_tokens, stop=["\n"], seed=cfg.seed)
        (choice,) = llm.choose([CHOICE_PROMPT], [list(CHOICE_OPTIONS)], seed=cfg.seed)
    except LLMError as exc:
        print(f"llm check: FAILED: {type(exc).__name__}: {exc}")
        return 1
    finally:
        closer = getattr(llm, "close", None)
        if callable(closer):
            closer()
    g, c = generation.usage, choice.usage
    print(f"generate  {generation.text.strip()!r}")
    print(f"          latency {g.latency_s:.2f} s, tokens {g.prompt_tokens} prompt + {g.completion_tokens} completion")
    scores = ", ".join(f"{s:.2f}" for s in choice.scores) if choice.scores else "n/a"
    print(f"choose    {choice.option.strip()!r} among {[o.strip() for o in CHOICE_OPTIONS]} (scores {scores})")
    print(f"          latency {c.latency_s:.2f} s, tokens {c.prompt_tokens} prompt + {c.completion_tokens} completion")
    total = llm.total
    print(f"total     {total.calls} calls, {total.total_tokens} tokens, ${total.cost_usd:.4f} estimated")
    return 0
