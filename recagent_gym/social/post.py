"""One-to-many posts: many agents write their post in one batched ``generate`` (contract: ``prompts/post.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from recagent_gym.llm.protocol import LanguageModel, Usage
from recagent_gym.prompts import post as post_prompt
from recagent_gym.prompts.checked import generate_checked
from recagent_gym.social.chat import Speaker


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
    prompts = [
        post_prompt.build(
            profile=a.profile, memory=a.memory, name=a.name, recent=", ".join(a.recent) or "none", clock=clock
        )
        for a in authors
    ]
    checked = generate_checked(
        llm, prompts, post_prompt.validate, seed=seed, max_tokens=max_tokens, stop=post_prompt.STOP
    )
    results = []
    for author, answer in zip(authors, checked, strict=True):
        fallback = answer.value is None
        text = post_prompt.fallback(recent_titles=author.recent) if fallback else answer.value
        results.append(PostResult(author.user_id, text, answer.usage, answer.reasked, fallback))
    return results
