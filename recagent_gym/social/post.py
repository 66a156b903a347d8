"""One-to-many posts: many agents write their post in one batched ``generate`` (contract: ``prompts/post.py``), or
in the first chat turn's call of their round (:func:`chats_and_posts`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from recagent_gym.llm.protocol import LanguageModel, Usage
from recagent_gym.prompts import chat as chat_prompt
from recagent_gym.prompts import post as post_prompt
from recagent_gym.prompts.checked import Checked, generate_checked
from recagent_gym.social.chat import ChatResult, Speaker, chat_turns, run_chats


@dataclass
class PostResult:
    user_id: int
    text: str
    usage: Usage = field(default_factory=Usage)
    reasked: bool = False
    fallback: bool = False


def write_posts(
    llm: LanguageModel, authors: Sequence[Speaker], *, max_tokens: int, clock: str, seed: int
) -> list[PostResult]:
    checked = generate_checked(
        llm, _prompts(authors, clock), post_prompt.validate, seed=seed, max_tokens=max_tokens, stop=post_prompt.STOP
    )
    return _results(authors, checked)


def chats_and_posts(
    llm: LanguageModel,
    pairs: Sequence[tuple[Speaker, Speaker]],
    authors: Sequence[Speaker],
    *,
    turns: int,
    max_tokens: int,
    clock: str,
    chat_seed: int,
    post_seed: int,
    one_call: bool = False,
) -> tuple[list[ChatResult], list[PostResult]]:
    """A round's chats (:func:`~recagent_gym.social.chat.run_chats`) and posts (:func:`write_posts`).

    Turn by turn, a post is one line as an utterance is (the same stop and token cap), so the posts ride with the
    chats' first turn: ``turns`` sequential calls instead of ``turns + 1``. They are then asked with that turn's
    seed (``chat_seed``) instead of ``post_seed``; the chats' prompts and seeds are those of :func:`run_chats`
    alone, so every chat reads as it would without the posts. Whole chats in one reply (``one_call``) take
    another token cap and no stop: the posts keep their own call."""
    if not pairs or not authors or one_call or turns < 1 or chat_prompt.STOP != post_prompt.STOP:
        chats = (
            run_chats(llm, pairs, turns=turns, max_tokens=max_tokens, clock=clock, seed=chat_seed, one_call=one_call)
            if pairs
            else []
        )
        posts = write_posts(llm, authors, max_tokens=max_tokens, clock=clock, seed=post_seed) if authors else []
        return chats, posts
    beside = [(prompt, post_prompt.validate) for prompt in _prompts(authors, clock)]
    chats, checked = chat_turns(
        llm, pairs, turns=turns, max_tokens=max_tokens, clock=clock, seed=chat_seed, beside=beside
    )
    return chats, _results(authors, checked)


def _prompts(authors: Sequence[Speaker], clock: str) -> list[str]:
    return [
        post_prompt.build(
            profile=a.profile, memory=a.memory, name=a.name, recent=", ".join(a.recent) or "none", clock=clock
        )
        for a in authors
    ]


def _results(authors: Sequence[Speaker], checked: Sequence[Checked]) -> list[PostResult]:
    results = []
    for author, answer in zip(authors, checked, strict=True):
        fallback = answer.value is None
        text = post_prompt.fallback(recent_titles=author.recent) if fallback else answer.value
        results.append(PostResult(author.user_id, text, answer.usage, answer.reasked, fallback))
    return results
