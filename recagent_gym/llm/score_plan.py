"""What an embedded ``score`` call decodes: one token sequence per distinct (prompt + option minus its last token),
the continuation tokens each such sequence scores, and where its canonical segments may start.

- **One decode for options that share it.** The options of a Yes/No question are one token each, so the prompt
  alone is the sequence decoded for both: its last position's logits score every such option (they were decoded
  once per option, the second a recomputation of the same last segment, so the scores are bitwise those of before).
- **A segment start where a scored prompt's tail begins** (``llm.canonical_tail_lines``): the prompts of one user's
  candidates share everything but their last lines (``Movie: <candidate>`` / ``Watched:``), and canonical decoding
  reuses a resident prefix only up to a segment start, which was the last multiple of ``llm.canonical_block`` before
  the candidate (half a block recomputed per candidate on average). The start is found from the prompt's own text
  (the token position where its last ``tail_lines`` lines begin, when the text before them tokenizes to a prefix of
  the prompt's tokens), so a score stays a function of its prompt alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from recagent_gym.llm.llama_runtime import common_prefix


@dataclass
class Target:
    prompt: int
    option: int
    full: list[int]
    """The prompt and option tokenized together; the tokens from the sequence's ``start`` on are scored."""


@dataclass
class ScoredSequence:
    tokens: list[int]
    """``full[:-1]`` of its targets: the last token is only predicted, never needed in the cache."""
    start: int
    """First scored position of ``full`` (at least one context token precedes it)."""
    marks: list[int]
    """Segment starts named by the prompt (its tail), beside the first scored position."""
    targets: list[Target] = field(default_factory=list)

    @property
    def wanted(self) -> list[int]:
        return list(range(self.start - 1, len(self.tokens)))


def tail_offset(prompt: str, lines: int) -> int:
    """Character offset where the prompt's last ``lines`` lines begin (0: no such start inside the prompt)."""
    if lines < 1:
        return 0
    end = len(prompt.rstrip("\n"))
    cut = end
    for _ in range(lines):
        cut = prompt.rfind("\n", 0, cut)
        if cut < 0:
            return 0
    return cut + 1


def plan(
    prompts: Sequence[str],
    continuations: Sequence[Sequence[str]],
    tokenize: Callable[[str], list[int]],
    tail_lines: int,
) -> tuple[list[ScoredSequence], list[int]]:
    """The sequences to decode (distinct ones once, in first-seen order) and the tokens read per prompt."""
    by_key: dict[tuple[tuple[int, ...], int], ScoredSequence] = {}
    heads: dict[str, list[int]] = {}
    read_per_prompt: list[int] = []
    for i, prompt in enumerate(prompts):
        context = tokenize(prompt)
        marks = _tail_marks(prompt, context, tokenize, tail_lines, heads)
        read = len(context)
        for j, option in enumerate(continuations[i]):
            full = tokenize(prompt + option)
            start = max(1, min(common_prefix(context, full), len(full) - 1))
            key = (tuple(full[:-1]), start)
            seq = by_key.get(key)
            if seq is None:
                seq = by_key[key] = ScoredSequence(full[:-1], start, [m for m in marks if m < start])
            seq.targets.append(Target(i, j, full))
            read += len(full) - start
        read_per_prompt.append(read)
    return list(by_key.values()), read_per_prompt


def _tail_marks(
    prompt: str, context: list[int], tokenize: Callable[[str], list[int]], lines: int, heads: dict[str, list[int]]
) -> list[int]:
    cut = tail_offset(prompt, lines)
    if cut == 0:
        return []
    head = prompt[:cut]
    if head not in heads:
        heads[head] = tokenize(head)
    tokens = heads[head]
    if len(tokens) >= len(context) or context[: len(tokens)] != tokens:
        return []  # the head's tokens are not the prompt's (a merge across the line start): no tail mark
    return [len(tokens)]
