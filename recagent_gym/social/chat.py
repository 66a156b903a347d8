"""One-to-one chats between friends about movies, many chats at once: one batched ``generate`` per turn.

Contract of each utterance: ``prompts/chat.py`` (validate, one re-ask, template fallback naming a recent movie).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from recagent_gym.llm.protocol import LanguageModel, Usage
from recagent_gym.prompts import chat as chat_prompt
from recagent_gym.prompts.checked import generate_checked


@dataclass(frozen=True)
class Speaker:
    """What one side of a chat brings: names, relevant profile, memory block, recent movie titles."""

    user_id: int
    name: str
    profile: str
    memory: str
    recent: tuple[str, ...]


@dataclass
class ChatResult:
    lines: list[tuple[int, str]] = field(default_factory=list)
    """``(user_id, utterance)`` in order."""
    usage: Usage = field(default_factory=Usage)
    reasked: int = 0
    fallbacks: int = 0

    def transcript(self, names: dict[int, str]) -> str:
        return "\n".join(f"{names[u]}: {text}" for u, text in self.lines)


def run_chats(
    llm: LanguageModel,
    pairs: Sequence[tuple[Speaker, Speaker]],
    *,
    turns: int,
    max_tokens: int,
    clock: str,
    seed: int,
) -> list[ChatResult]:
    """``turns`` utterances per chat, alternating and starting with the first speaker of each pair."""
    results = [ChatResult() for _ in pairs]
    for turn in range(turns):
        prompts = []
        for (a, b), result in zip(pairs, results, strict=True):
            speaker, friend = (a, b) if turn % 2 == 0 else (b, a)
            names = {a.user_id: a.name, b.user_id: b.name}
            prompts.append(
                chat_prompt.build(
                    profile=speaker.profile,
                    memory=speaker.memory,
                    name=speaker.name,
                    friend=friend.name,
                    recent=", ".join(speaker.recent) or "none",
                    clock=clock,
                    dialogue=[f"{names[u]}: {t}" for u, t in result.lines],
                )
            )
        checked = generate_checked(
            llm, prompts, chat_prompt.validate, seed=seed + 10 * turn, max_tokens=max_tokens, stop=chat_prompt.STOP
        )
        for (a, b), result, answer in zip(pairs, results, checked, strict=True):
            speaker = a if turn % 2 == 0 else b
            text = answer.value
            if text is None:
                text = chat_prompt.fallback(recent_titles=speaker.recent, turn=turn // 2)
                result.fallbacks += 1
            result.reasked += int(answer.reasked)
            result.usage = result.usage + answer.usage
            result.lines.append((speaker.user_id, text))
    return results
