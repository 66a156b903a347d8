"""The embedded ``score`` call's plan (``llm/score_plan.py``): options that share a decoded sequence are scored from
one decode, and a scored prompt's tail (its last lines) starts a canonical segment, so one user's candidates reuse
their whole shared prefix; scores stay a function of the prompt alone."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from recagent_gym.llm.config import LLMConfig
from recagent_gym.llm.embedded import EmbeddedLLM
from recagent_gym.llm.score_plan import plan, tail_offset


def chars(text: str) -> list[int]:
    """A tokenizer of one token per character, with a BOS token (0)."""
    return [0, *map(ord, text)]


def merging(text: str) -> list[int]:
    """Like :func:`chars`, but a newline followed by ``M`` is one token (a merge across a line start)."""
    tokens = [0]
    k = 0
    while k < len(text):
        if text.startswith("\nM", k):
            tokens.append(-1)
            k += 2
        else:
            tokens.append(ord(text[k]))
            k += 1
    return tokens


def test_tail_offset_is_where_the_last_lines_begin() -> None:
    prompt = "profile\nshots\nMovie: Heat\nWatched:"
    assert prompt[tail_offset(prompt, 2) :] == "Movie: Heat\nWatched:"
    assert prompt[tail_offset(prompt, 1) :] == "Watched:"
    ended = prompt + "\n"
    assert ended[tail_offset(ended, 1) :] == "Watched:\n"  # a final newline does not make an empty line
    assert tail_offset(prompt, 0) == 0 and tail_offset("one line", 1) == 0 and tail_offset("a\nb", 2) == 0


def test_one_token_options_share_one_sequence_with_a_mark_at_the_tail() -> None:
    prompts = ["Ann likes horror.\nMovie: Alien\nWatched:", "Ann likes horror.\nMovie: Heat\nWatched:"]
    sequences, read = plan(prompts, [[" Y", " N"], [" Y", " N", " Maybe"]], chars, tail_lines=2)
    head = len(chars("Ann likes horror.\n"))
    # " Y" and " N" are one token after the prompt: one sequence each prompt; " Maybe" its own
    assert [(len(s.targets), s.marks) for s in sequences] == [(2, [head]), (2, [head]), (1, [head])]
    assert [(t.prompt, t.option) for t in sequences[1].targets] == [(1, 0), (1, 1)]
    first = sequences[0]
    assert first.tokens == [*chars(prompts[0]), ord(" ")]  # prompt + option minus its last token
    assert first.wanted == [len(first.tokens) - 2, len(first.tokens) - 1]  # the two tokens of " Y" / " N"
    assert read[0] == len(chars(prompts[0])) + 2 * 2  # the prompt, then each option's two scored tokens


def test_no_mark_when_the_head_does_not_tokenize_to_a_prefix_of_the_prompt() -> None:
    prompts = ["Ann likes horror.\nMovie: Alien\nWatched:"]
    (merged,), _ = plan(prompts, [[" Y"]], merging, tail_lines=2)
    assert merged.marks == []  # "\nM" is one token: the tail's first token starts before the line does
    (blocks_only,), _ = plan(prompts, [[" Y"]], chars, tail_lines=0)
    assert blocks_only.marks == []


@pytest.fixture(scope="module")
def llm() -> Iterator[EmbeddedLLM]:
    model = EmbeddedLLM(LLMConfig(n_threads=2, kv_size=2048, canonical_block=64))
    yield model
    model.close()


@pytest.mark.embedded_llm
@pytest.mark.slow
def test_a_users_next_candidate_decodes_only_its_tail(llm: EmbeddedLLM) -> None:
    profile = "Ann, 34, likes horror and sci-fi films and dislikes musicals. " * 6 + "\n"
    prompts = [profile + f"Movie: {title}\nWatched:" for title in ("Alien (1979)", "Heat (1995)")]
    llm.forget_prefixes()
    first = llm.choose(prompts[:1], [[" Yes", " No"]])[0].scores
    reused = llm.stats["tokens_reused"]
    second = llm.choose(prompts[1:], [[" Yes", " No"]])[0].scores
    head = len(llm._rt.tokenize(profile))
    assert head % 64 != 0 and head > 64  # the block start before the tail is not the tail's start
    assert llm.stats["tokens_reused"] - reused == head  # everything before "Movie:", not the last block start
    llm.forget_prefixes()
    assert llm.choose(prompts[1:], [[" Yes", " No"]])[0].scores == second  # the same score decoded alone
    assert first != second
