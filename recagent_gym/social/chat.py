"""One-to-one chats between friends about movies, many chats at once.

``one_call`` (remote models): each whole chat is ONE reply (``prompts/chat_dialogue.py``), all chats in one batched
``generate``; otherwise one batched ``generate`` per turn (``prompts/chat.py``): turn k of every chat of the round
in one call, with the call's seed ``seed + 10 * k``. Prompts of the same shape (a one-line utterance: the round's
posts) may ride with the first turn (``beside`` of :func:`chat_turns`), so a round with chats and posts costs one
call fewer. Each contract: validate, one re-ask, template fallback naming a recent movie (counted).

A chat's lines depend only on its own prompts and the turn's seed, never on the other chats or prompts in the
batch: the backends derive a prompt's sampling seed from the call's seed and the prompt itself (the scripted test
double answers by prompt alone).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from recagent_gym.llm.protocol import LanguageModel, Usage
from recagent_gym.prompts import chat as chat_prompt
from recagent_gym.prompts import chat_dialogue
from recagent_gym.prompts.checked import Checked, generate_checked


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


Validate = Callable[[str, str], Any]
"""``validate(text, prompt) -> value | None`` of a prompt contract (``None``: invalid)."""


def run_chats(
    llm: LanguageModel,
    pairs: Sequence[tuple[Speaker, Speaker]],
    *,
    turns: int,
    max_tokens: int,
    clock: str,
    seed: int,
    one_call: bool = False,
) -> list[ChatResult]:
    """``turns`` utterances per chat, alternating and starting with the first speaker of each pair."""
    if one_call:
        return _whole_chats(llm, pairs, turns=turns, max_tokens=max_tokens, clock=clock, seed=seed)
    return chat_turns(llm, pairs, turns=turns, max_tokens=max_tokens, clock=clock, seed=seed)[0]


def chat_turns(
    llm: LanguageModel,
    pairs: Sequence[tuple[Speaker, Speaker]],
    *,
    turns: int,
    max_tokens: int,
    clock: str,
    seed: int,
    beside: Sequence[tuple[str, Validate]] = (),
) -> tuple[list[ChatResult], list[Checked]]:
    """The chats turn by turn, one batched ``generate`` per turn (newline stop, ``max_tokens``), with the prompts of
    ``beside`` (each with its own validator) in the first turn's call; returns the chats and ``beside``'s answers.
    Needs at least one pair."""
    results = [ChatResult() for _ in pairs]
    extra: list[Checked] = []
    for turn in range(turns):
        asks = [(prompt, chat_prompt.validate) for prompt in _turn_prompts(pairs, results, turn, clock)]
        if turn == 0:
            asks += list(beside)
        checked = generate_each(llm, asks, seed=seed + 10 * turn, max_tokens=max_tokens, stop=chat_prompt.STOP)
        if turn == 0:
            checked, extra = checked[: len(pairs)], checked[len(pairs) :]
        for (a, b), result, answer in zip(pairs, results, checked, strict=True):
            speaker = a if turn % 2 == 0 else b
            text = answer.value
            if text is None:
                text = chat_prompt.fallback(recent_titles=speaker.recent, turn=turn // 2)
                result.fallbacks += 1
            result.reasked += int(answer.reasked)
            result.usage = result.usage + answer.usage
            result.lines.append((speaker.user_id, text))
    return results, extra


def _turn_prompts(
    pairs: Sequence[tuple[Speaker, Speaker]], results: Sequence[ChatResult], turn: int, clock: str
) -> list[str]:
    """Each chat's prompt for ``turn`` (the first speaker on even turns), with the dialogue so far."""
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
    return prompts


def _side(speaker: Speaker) -> dict[str, str]:
    return {
        "name": speaker.name,
        "profile": speaker.profile,
        "memory": speaker.memory,
        "recent": ", ".join(speaker.recent) or "none",
    }


def _whole_chats(
    llm: LanguageModel, pairs: Sequence[tuple[Speaker, Speaker]], *, turns: int, max_tokens: int, clock: str, seed: int
) -> list[ChatResult]:
    """Every chat as one reply; a chat whose reply is unusable after its re-ask gets the template lines."""
    results = []
    prompts = [chat_dialogue.build(first=_side(a), second=_side(b), turns=turns, clock=clock) for a, b in pairs]
    answers = []
    for (a, b), prompt in zip(pairs, prompts, strict=True):  # one validator per pair (it knows the names)
        answers.append((prompt, chat_dialogue.validate_for(first=a.name, second=b.name, turns=turns)))
    checked = generate_each(llm, answers, seed=seed, max_tokens=max_tokens * turns)
    for (a, b), answer in zip(pairs, checked, strict=True):
        result = ChatResult(usage=answer.usage, reasked=int(answer.reasked))
        if answer.value is None:
            result.fallbacks = 1
            for turn in range(turns):
                speaker = a if turn % 2 == 0 else b
                result.lines.append(
                    (speaker.user_id, chat_prompt.fallback(recent_titles=speaker.recent, turn=turn // 2))
                )
        else:
            result.lines = [((a, b)[who].user_id, line) for who, line in chat_dialogue.read(answer.value)]
        results.append(result)
    return results


def generate_each(
    llm: LanguageModel,
    asks: Sequence[tuple[str, Validate]],
    *,
    seed: int,
    max_tokens: int,
    stop: Sequence[str] = (),
) -> list[Checked]:
    """:func:`generate_checked` over prompts that each have their own validator (one batch, one re-ask batch)."""
    validators = {prompt: validate for prompt, validate in asks}

    def validate(text: str, prompt: str) -> Any:
        return validators[prompt](text, prompt)

    return generate_checked(llm, [p for p, _ in asks], validate, seed=seed, max_tokens=max_tokens, stop=stop)
