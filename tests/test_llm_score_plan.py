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


def test_options_share_the_prompts_last_position_and_one_token_options_need_nothing_else() -> None:
    prompts = ["Ann likes horror.\nMovie: Alien\nWatched:", "Ann likes horror.\nMovie: Heat\nWatched:"]
    sequences, read = plan(prompts, [["Y", "N"], ["Y", "N", " Maybe"]], chars, tail_lines=2)
    tail = len(chars("Ann likes horror.\n"))
    first, second = (len(chars(p)) for p in prompts)
    # one head per prompt (its last position scores every option's first token), one rest for the long option
    assert [(len(s.tokens), s.wanted, s.marks, len(s.targets)) for s in sequences] == [
        (first, [first - 1], [tail, first - 1], 2),
        (second, [second - 1], [tail, second - 1], 3),
        (second + 5, list(range(second, second + 5)), [tail, second - 1, second], 1),
    ]
    rest = sequences[2]
    assert rest.tokens == chars(prompts[1] + " Mayb") and rest.head == second  # the option minus its last token
    assert [(t.prompt, t.option) for t in sequences[1].targets] == [(1, 0), (1, 1), (1, 2)]
    assert read == [first + 2, second + 2 + 6]  # the prompt, then each option's scored tokens


def test_the_same_head_in_two_prompts_is_decoded_once() -> None:
    prompt = "Ann likes horror.\nMovies:"
    sequences, _ = plan([prompt, prompt], [[" Alien"], [" Heat"]], chars, tail_lines=2)
    assert [len(s.targets) for s in sequences] == [2, 1, 1]  # the shared head, then each title's rest
    assert sequences[0].tokens == chars(prompt)


def test_no_mark_when_the_head_does_not_tokenize_to_a_prefix_of_the_prompt() -> None:
    prompts = ["Ann likes horror.\nMovie: Alien\nWatched:"]
    (merged,), _ = plan(prompts, [["Y"]], merging, tail_lines=2)
    last = len(merged.tokens) - 1
    assert merged.marks == [last]  # "\nM" is one token: the tail's first token starts before the line does
    (blocks_only,), _ = plan(prompts, [["Y"]], chars, tail_lines=0)
    assert blocks_only.marks == [len(blocks_only.tokens) - 1]


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


@pytest.mark.embedded_llm
@pytest.mark.slow
def test_title_options_decode_the_prompts_last_position_once_and_score_as_alone(llm: EmbeddedLLM) -> None:
    prompt = "Movies Ann loved, one per line, oldest first:\n- Alien (1979)\n- Heat (1995)\n-"
    options = [" The Thing (1982)\n", " Notting Hill (1999)\n", " Seven (1995)\n"]
    tokens = llm._rt.tokenize(prompt)
    lengths = [len(llm._rt.tokenize(prompt + option)) - len(tokens) for option in options]
    assert min(lengths) > 1  # several tokens each: a rest after the head
    llm.forget_prefixes()
    decoded = llm.stats["tokens_decoded"]
    (together,) = llm.choose([prompt], [options])
    # the prompt once (its last position's logits score every title's first token), then each title's other tokens
    assert llm.stats["tokens_decoded"] - decoded == len(tokens) + sum(n - 1 for n in lengths)
    alone = []
    for option in options:
        llm.forget_prefixes()
        alone.append(llm.choose([prompt], [[option]])[0].scores[0])  # type: ignore[index]
    assert together.scores == tuple(alone)
