"""What an embedded ``score`` call decodes: the distinct token sequences (each prompt's head, each option's rest),
the option tokens each one scores, and where its canonical segments may start.

- **The prompt's last position decoded once for all its options.** Every option's first token is scored by the
  logits at the prompt's last position, so that position is its own segment (a *head*), decoded once for all the
  options after the same prompt; each option's further tokens are decoded after it (a *rest*: a title up to its
  year, about 6 tokens), and a one-token option (" Yes" / " No") needs the head alone. Before, every option decoded
  the prompt's last position again, with its logits (a row over the 262k-token vocabulary, the costly part).
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
    """The prompt and option tokenized together; each wanted position ``p`` scores ``full[p + 1]``."""


@dataclass
class ScoredSequence:
    tokens: list[int]
    """The tokens decoded: a prompt up to its first scored position (a *head*: its last position's logits score the
    first token of every option after it), or a prompt and one option minus its last token (a *rest*)."""
    wanted: list[int]
    """Positions whose logits score the targets' next tokens."""
    head: int
    """Tokens of the shared prompt part (kept resident for the next call)."""
    marks: list[int]
    """Segment starts named beside the blocks: the prompt's tail, its last token, the option's first."""
    targets: list[Target] = field(default_factory=list)


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
    """The sequences to decode (each distinct one once; a head before the rests that follow it) and the tokens read
    per prompt. An option's first token is scored by its head's last position (decoded once, as its own segment,
    for all options after the same head); its further tokens by its rest, whose segments start after the head."""
    by_key: dict[tuple[int, ...], ScoredSequence] = {}
    tails: dict[str, list[int]] = {}
    ordered: list[ScoredSequence] = []
    read_per_prompt: list[int] = []
    for i, prompt in enumerate(prompts):
        context = tokenize(prompt)
        tail = _tail_marks(prompt, context, tokenize, tail_lines, tails)
        read = len(context)
        for j, option in enumerate(continuations[i]):
            full = tokenize(prompt + option)
            start = max(1, min(common_prefix(context, full), len(full) - 1))  # first scored position
            marks = [m for m in tail if m < start - 1] + [start - 1]
            target = Target(i, j, full)
            _sequence(by_key, ordered, full[:start], [start - 1], start, marks).targets.append(target)
            if len(full) - start > 1:  # the option's further tokens, after the head
                rest = _sequence(by_key, ordered, full[:-1], list(range(start, len(full) - 1)), start, [*marks, start])
                rest.targets.append(target)
            read += len(full) - start
        read_per_prompt.append(read)
    return ordered, read_per_prompt


def _sequence(
    by_key: dict[tuple[int, ...], ScoredSequence],
    ordered: list[ScoredSequence],
    tokens: list[int],
    wanted: list[int],
    head: int,
    marks: list[int],
) -> ScoredSequence:
    key = (*tokens, -1, *wanted)  # the tokens and the positions scored (token ids are never negative)
    if key not in by_key:
        by_key[key] = ScoredSequence(tokens, wanted, head, marks)
        ordered.append(by_key[key])
    return by_key[key]


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
