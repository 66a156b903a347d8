"""LLM calls and tokens per observation written to memory: deferred (batched over agents) vs inline.

    .venv/bin/python benchmarks/bench_memory_writes.py [--agents 4]

Embedded Gemma 3 270M + the packaged MiniLM; three observations per agent, then (deferred) one flush for all
agents. Prints the totals and the figures per observation. Not a timed test.
"""

from __future__ import annotations

import argparse
import time

from recagent_gym.llm.config import LLMConfig
from recagent_gym.llm.embedded import EmbeddedLLM
from recagent_gym.llm.embedder import SentenceEmbedder
from recagent_gym.memory.agent_memory import AgentMemory
from recagent_gym.memory.config import MemoryConfig
from recagent_gym.memory.writer import flush_memories

OBSERVATIONS = (
    "{n} watched Heat (1995), a tense crime thriller about a bank robbery crew, and rated it 5 out of 5.",
    "{n} browsed the second page and saw Balto (1995), GoldenEye (1995), Sudden Death (1995). {n} left without "
    "watching anything.",
    "{n} chatted with Bob about movies. Bob said The Usual Suspects (1995) is the best crime thriller he has seen.",
)
NAMES = ("Ann", "Ben", "Cid", "Dee", "Eve", "Fay", "Gus", "Hal")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=4, choices=range(1, len(NAMES) + 1))
    args = parser.parse_args()
    llm, embedder = EmbeddedLLM(LLMConfig()), SentenceEmbedder()
    for mode, names in (("deferred", NAMES[: args.agents]), ("inline", NAMES[:1])):
        config = MemoryConfig(write_mode=mode, reflection_threshold=1.5)
        memories = [AgentMemory(config, llm, embedder, name, seed=i) for i, name in enumerate(names)]
        start = time.perf_counter()
        reports = []
        for t, text in enumerate(OBSERVATIONS):
            for memory in memories:
                report = memory.observe(text.format(n=memory.agent_name), float(t))
                if report is not None:
                    reports.append(report)
        if mode == "deferred":
            reports.append(flush_memories(memories, float(len(OBSERVATIONS))))
        wall = time.perf_counter() - start
        total = reports[0]
        for report in reports[1:]:
            total = total + report
        n = total.observations
        print(
            f"{mode:8s} agents={len(memories)} observations={n}: per observation {total.llm_calls / n:.2f} batched "
            f"calls, {total.prompts / n:.2f} prompts, {total.usage.prompt_tokens / n:.0f} prompt tokens, "
            f"{total.usage.completion_tokens / n:.1f} completion tokens, {wall / n:.2f} s "
            f"(re-asks {total.reasks}, fallbacks {total.fallbacks}, reflections {total.reflections})"
        )


if __name__ == "__main__":
    main()
