"""Canonical decoding: every logit the embedded model returns is a function of its own token sequence alone.

llama.cpp's results move in the last bits (and a greedy choice or a Yes/No score by up to a fifth of a nat) with what
else is decoded in the same ``llama_decode`` call and with where the sequence's cells lie in the KV cache: a score
then depends on which other prompts shared its batch, which of them were cache hits, and which prefixes earlier calls
left resident (``benchmarks/probe_embedded_invariance.py``). Here each sequence is decoded on its own, in *segments*
fixed by the sequence alone:

- segment boundaries at every multiple of ``block`` tokens, plus ``marks`` the request names (the first scored
  position of a prompt-option pair, the end of a prompt before generation; every generated token is its own segment);
- one ``llama_decode`` per segment, holding that segment's tokens only, with exactly the sequence's earlier positions
  in the KV cache, in cells ``0..p-1`` (one sequence, id 0, nothing else resident).

A prefix stays resident between calls (the *chain*) and is reused up to the last boundary that the resident chain and
the new sequence share with every earlier boundary equal: the reused cells are then bitwise those that decoding the
new sequence from scratch would compute, so reuse changes speed, never a figure. The price against batched decoding
(:mod:`~recagent_gym.llm.llama_runtime`'s shared trie and prefix slots) is one decode per segment and sequence, and
the part of a block before a prompt's divergence recomputed per prompt (``benchmarks/bench_llm_embedded.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from recagent_gym.llm.llama_runtime import LlamaRuntime, common_prefix

OnLogits = Callable[[int, int], None]
"""``(position, batch index)``: the logits of that position are at that batch entry until the next decode."""


def boundaries(length: int, block: int, marks: Sequence[int] = ()) -> list[int]:
    """Segment starts of a sequence of ``length`` tokens: 0, every multiple of ``block``, and each mark inside."""
    points = set(range(0, length, block)) | {m for m in marks if 0 < m < length}
    return sorted(points)


class CanonicalDecoder:
    """Decodes one sequence at a time on ``runtime`` (which it owns: see the module docstring)."""

    def __init__(self, runtime: LlamaRuntime, block: int) -> None:
        if block < 1:
            raise ValueError(f"block must be >= 1, got {block}")
        self.rt = runtime
        self.block = block
        self._tokens: list[int] = []
        self._starts: list[int] = []
        self._epoch = -1
        self.forget()

    def forget(self) -> None:
        """Drop the resident chain (and anything else in the KV cache)."""
        self.rt.reset()
        self._tokens, self._starts = [], []
        self._epoch = self.rt.resets

    def _check_resident(self) -> None:
        if self._epoch != self.rt.resets:  # someone emptied the KV cache (LlamaRuntime.reset): the chain is gone
            self._tokens, self._starts = [], []
            self._epoch = self.rt.resets

    @property
    def length(self) -> int:
        """Tokens resident in the chain."""
        return len(self._tokens)

    def _reusable(self, tokens: Sequence[int], starts: list[int], first_wanted: int) -> int:
        """Longest resident prefix that this sequence's own decoding would have computed identically."""
        limit = min(common_prefix(tokens, self._tokens), first_wanted, len(tokens) - 1)
        keep = 0
        for mine, resident in zip(starts, [*self._starts, len(self._tokens)], strict=False):
            if mine != resident or mine > limit:
                break
            keep = mine
        return keep

    def decode(
        self, tokens: Sequence[int], wanted: Sequence[int], on_logits: OnLogits, marks: Sequence[int] = ()
    ) -> None:
        """Decode ``tokens`` (positions ``0..n-1``); ``on_logits(position, batch index)`` for each wanted position,
        right after the decode that computed it. The sequence stays resident for the next call."""
        tokens = list(tokens)
        if not tokens:
            raise ValueError("cannot decode an empty token sequence")
        self._check_resident()
        wanted_set = set(wanted)
        first_wanted = min(wanted_set) if wanted_set else len(tokens)
        starts = boundaries(len(tokens), self.block, [*marks, first_wanted])
        keep = self._reusable(tokens, starts, first_wanted)
        self._truncate(keep)
        self.rt.tokens_reused += keep
        ends = [*starts[1:], len(tokens)]
        for start, end in zip(starts, ends, strict=True):
            if end <= keep:
                continue
            self.rt.decode_one([(tokens[p], p, p in wanted_set) for p in range(start, end)])
            self._tokens, self._starts = tokens[:end], [s for s in starts if s < end]
            for p in range(start, end):
                if p in wanted_set:
                    on_logits(p, p - start)

    def extend(self, token: int, on_logits: OnLogits) -> None:
        """Decode one more token after the resident chain, as its own segment (generation)."""
        self._check_resident()
        p = len(self._tokens)
        self.rt.decode_one([(token, p, True)])
        self._tokens.append(token)
        self._starts.append(p)
        on_logits(p, 0)

    def _truncate(self, keep: int) -> None:
        if keep < len(self._tokens):
            self.rt.drop_positions(0, keep)
            self._tokens = self._tokens[:keep]
            self._starts = [s for s in self._starts if s < keep]


class OneAtATime:
    """The decoding calls :class:`~recagent_gym.llm.embedded.EmbeddedLLM` makes (``evaluate``, ``step``,
    ``finish``, ``clear_working`` of :class:`~recagent_gym.llm.llama_runtime.LlamaRuntime`) served by a
    :class:`CanonicalDecoder`, for requests of one sequence each."""

    def __init__(self, decoder: CanonicalDecoder) -> None:
        self.decoder = decoder

    def evaluate(
        self,
        sequences: Sequence[Sequence[int]],
        outputs: Sequence[Sequence[int]],
        on_output: Callable[[list[tuple[int, int]], int], None],
        *,
        reserve: int = 0,
        marks: Sequence[Sequence[int]] | None = None,
    ) -> None:
        """``marks``: segment starts the request names for its sequence (beside every block and its first wanted
        position), e.g. where a scored prompt's tail begins (:mod:`~recagent_gym.llm.score_plan`)."""
        if len(sequences) != 1:
            raise ValueError(f"canonical decoding takes one sequence per request, got {len(sequences)}")
        own = marks[0] if marks else ()
        self.decoder.decode(sequences[0], outputs[0], lambda pos, index: on_output([(0, pos)], index), marks=own)

    def step(self, entries: Sequence[tuple[int, int, int]], on_output: Callable[[int, int], None]) -> None:
        ((_, token, pos),) = entries
        if pos != self.decoder.length:
            raise ValueError(f"a generated token at position {pos} does not follow the {self.decoder.length} resident")
        self.decoder.extend(token, lambda _pos, index: on_output(0, index))

    def finish(self, keep: Sequence[tuple[int, Sequence[int]]], priority: int = 0) -> None:
        """Nothing to do: the sequence stays resident as the chain."""

    def clear_working(self) -> None:
        """After a failure the resident chain may not hold what it says: forget it."""
        self.decoder.forget()
