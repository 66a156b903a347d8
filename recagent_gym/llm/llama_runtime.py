"""A llama.cpp context driven through the low-level API, evaluating shared prefixes once.

The high-level ``llama_cpp.Llama`` keeps one sequence and recomputes a prompt for each continuation. Here the KV
cache is *unified* (every sequence shares one pool of cells) so that:

- many token sequences sharing a prefix are decoded as a trie: each trie node is one batch entry tagged with every
  sequence passing through it, so a 600-token few-shot prefix followed by ten candidate lines costs 600 + 10 x
  (line length) token evaluations, not 10 x 600;
- after a call, the prompts' prefixes stay resident in a few *slots* (sequence ids ``0..n_slots-1``); a later call
  whose prompt starts the same way copies the cached cells into its working sequence (``llama_memory_seq_cp``, no
  recomputation) and decodes only the new tail.

Which prefixes stay: a new prefix replaces the resident one of its *family* (one it extends, or that shares at least
half of it: the same user's next page, whose memory lines differ but whose profile and examples do not), else an
empty slot, else the least recently used slot of the lowest *priority*. A prefix never displaces one of higher
priority: page decisions keep their prefixes at a higher priority than the feelings, memory and social prompts that
run between two pages (see :meth:`recagent_gym.llm.embedded.EmbeddedLLM.prefix_priority`), so with several users
in session (a vector env) those prompts do not push the users' prefixes out. At most ``high_slots`` slots (a
quarter of them left over, at least one) hold a raised priority; past that a new raised prefix replaces the least
recently used raised one (an ended session's: users in session reuse theirs every page, stale ones are dropped).

llama.cpp requires sequences that share a token in one batch to hold the same positions in memory before it (they
are "coupled"); :meth:`LlamaRuntime.evaluate` lowers the reused prefix lengths until that holds.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from recagent_gym.llm.protocol import LLMError

log = logging.getLogger(__name__)

OutputCallback = Callable[[list[tuple[int, int]], int], None]
"""``(wants, batch index)``: the ``(sequence index, position)`` pairs served by the logits at that batch entry,
called right after the decode that produced them (the logits are overwritten by the next decode)."""


_LOG_CALLBACK: object = None
_llama_log = logging.getLogger("recagent_gym.llm.llama_cpp")


def _route_llama_logs(lib: object) -> None:
    """Send llama.cpp's own messages (a screenful per model load) to a logger: errors stay errors, the rest debug."""
    global _LOG_CALLBACK
    if _LOG_CALLBACK is not None:
        return

    def forward(level: int, text: bytes, _user_data: object) -> None:
        message = text.decode("utf-8", errors="replace").rstrip()
        if message:
            _llama_log.log(logging.ERROR if level == 4 else logging.DEBUG, "%s", message)  # ggml: 4 = error

    _LOG_CALLBACK = lib.llama_log_callback(forward)  # type: ignore[attr-defined]
    lib.llama_log_set(_LOG_CALLBACK, ctypes.c_void_p(0))  # type: ignore[attr-defined]


class KVCacheFull(LLMError):
    """The KV cache has no room for a batch even after evicting every resident prefix."""


@dataclass
class _Node:
    token: int
    depth: int
    children: dict[int, int] = field(default_factory=dict)
    seqs: list[int] = field(default_factory=list)
    """Every working sequence passing through this node."""
    wants: list[tuple[int, int]] = field(default_factory=list)
    """(sequence, position) pairs that need the logits computed at this node."""


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two token lists."""
    n = min(len(a), len(b))
    if n == 0:
        return 0
    # numpy comparison is ~50x faster than a Python loop on 600-token prompts
    diff = np.flatnonzero(np.asarray(a[:n], dtype=np.int64) != np.asarray(b[:n], dtype=np.int64))
    return int(diff[0]) if diff.size else n


class LlamaRuntime:
    """One loaded GGUF model and one context with ``n_slots`` resident prefixes and ``max_working`` sequences."""

    def __init__(
        self,
        model_path: str | Path,
        *,
        kv_size: int,
        n_batch: int,
        n_threads: int,
        n_slots: int,
        max_working: int,
        seed: int,
    ) -> None:
        import llama_cpp

        self._lib = llama_cpp
        _route_llama_logs(llama_cpp)
        llama_cpp.llama_backend_init()
        n_seq_max = n_slots + max_working
        limit = int(llama_cpp.llama_max_parallel_sequences())
        if n_seq_max > limit:
            raise LLMError(f"{n_slots} prefix slots + {max_working} working sequences exceed llama.cpp's {limit}")
        if n_batch < n_seq_max:
            # llama.cpp aborts the process (GGML_ASSERT) when a context has more sequences than batch outputs
            raise LLMError(
                f"n_batch {n_batch} must be at least prefix_slots + max_sequences = {n_seq_max} (llm.n_batch)"
            )
        self.n_slots = n_slots
        self.max_working = max_working
        self.kv_size = kv_size
        self.n_batch = n_batch
        self.seed = seed

        mparams = llama_cpp.llama_model_default_params()
        mparams.n_gpu_layers = 0
        self._model = llama_cpp.llama_model_load_from_file(str(model_path).encode("utf-8"), mparams)
        if not self._model:
            raise LLMError(f"llama.cpp could not load the model file {model_path}")
        self._vocab = llama_cpp.llama_model_get_vocab(self._model)
        self.n_vocab = int(llama_cpp.llama_vocab_n_tokens(self._vocab))

        cparams = llama_cpp.llama_context_default_params()
        cparams.n_ctx = kv_size
        cparams.n_batch = n_batch
        cparams.n_ubatch = n_batch
        cparams.n_seq_max = n_seq_max
        cparams.n_threads = n_threads
        cparams.n_threads_batch = n_threads
        cparams.kv_unified = True  # sequences share cells: a shared prefix is stored (and computed) once
        cparams.swa_full = True  # Gemma 3's sliding-window layers must keep whole prefixes for reuse
        cparams.no_perf = True
        self._ctx = llama_cpp.llama_init_from_model(self._model, cparams)
        if not self._ctx:
            llama_cpp.llama_model_free(self._model)
            raise LLMError(f"llama.cpp could not create a context of {kv_size} cells for {model_path}")
        self._mem = llama_cpp.llama_get_memory(self._ctx)
        self._batch = llama_cpp.llama_batch_init(n_batch, 0, n_seq_max)
        self._slots: list[list[int]] = [[] for _ in range(n_slots)]
        self._slot_tick = [0] * n_slots
        self._slot_priority = [0] * n_slots
        self.high_slots = n_slots - max(1, n_slots // 4)
        """Most slots holding a prefix of raised priority (the rest stay for priority-0 prompts)."""
        self._tick = 0
        self.lock = threading.RLock()
        """Held by callers for a whole request: a llama.cpp context is not thread-safe."""
        self.tokens_decoded = 0
        self.tokens_reused = 0
        self.resets = 0  # times reset() emptied the KV cache: a prefix tracked elsewhere is gone

    # -- tokens ---------------------------------------------------------------------------------------------------

    def tokenize(self, text: str, *, add_bos: bool = True) -> list[int]:
        data = text.encode("utf-8")
        capacity = len(data) + 8
        buf = (self._lib.llama_token * capacity)()
        n = self._lib.llama_tokenize(self._vocab, data, len(data), buf, capacity, add_bos, False)
        if n < 0:  # pragma: no cover - capacity is always enough: a token covers at least one byte
            raise LLMError(f"tokenizer needs {-n} tokens for a text of {len(data)} bytes")
        return list(buf[:n])

    def piece(self, token: int) -> bytes:
        buf = ctypes.create_string_buffer(64)
        n = self._lib.llama_token_to_piece(self._vocab, token, buf, 64, 0, False)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = self._lib.llama_token_to_piece(self._vocab, token, buf, -n, 0, False)
        return buf.raw[:n]

    def is_eog(self, token: int) -> bool:
        return bool(self._lib.llama_vocab_is_eog(self._vocab, token))

    # -- logits ---------------------------------------------------------------------------------------------------

    def logits(self, batch_index: int) -> np.ndarray:
        """A view of the logits row of one batch entry (valid until the next decode)."""
        ptr = self._lib.llama_get_logits_ith(self._ctx, batch_index)
        if not ptr:
            raise LLMError(f"llama.cpp has no logits for batch entry {batch_index}")
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))

    def log_softmax_at(self, batch_index: int, token: int) -> float:
        row = self.logits(batch_index)
        top = float(row.max())
        return float(row[token]) - top - float(np.log(np.exp(row - top, dtype=np.float64).sum()))

    # -- decoding -------------------------------------------------------------------------------------------------

    def _decode(self, entries: Sequence[tuple[int, int, Sequence[int], bool]]) -> None:
        """Decode ``(token, position, sequence ids, wants logits)`` entries (at most ``n_batch``)."""
        batch = self._batch
        for i, (token, pos, seq_ids, want) in enumerate(entries):
            batch.token[i] = token
            batch.pos[i] = pos
            batch.n_seq_id[i] = len(seq_ids)
            row = batch.seq_id[i]
            for j, seq in enumerate(seq_ids):
                row[j] = seq
            batch.logits[i] = want
        batch.n_tokens = len(entries)
        status = self._lib.llama_decode(self._ctx, batch)
        if status == 1:
            raise KVCacheFull("no free KV-cache cells for the batch")
        if status != 0:
            raise LLMError(f"llama_decode failed with status {status}")
        self.tokens_decoded += len(entries)

    def decode_one(self, entries: Sequence[tuple[int, int, bool]]) -> None:
        """Decode ``(token, position, wants logits)`` entries of sequence 0 alone (``llm/canonical_decode.py``)."""
        self._decode([(token, pos, (0,), want) for token, pos, want in entries])

    def drop_positions(self, seq: int, start: int) -> None:  # forget sequence seq's cells from position start on
        self._lib.llama_memory_seq_rm(self._mem, seq, start, -1)

    def _seq(self, index: int) -> int:
        return self.n_slots + index

    def clear_working(self) -> None:
        for k in range(self.max_working):
            self._lib.llama_memory_seq_rm(self._mem, self._seq(k), -1, -1)

    def reset(self) -> None:
        """Forget every resident prefix and working sequence."""
        self._lib.llama_memory_clear(self._mem, True)
        self.resets += 1
        self._slots = [[] for _ in range(self.n_slots)]
        self._slot_priority = [0] * self.n_slots

    def _resident_cells(self) -> int:
        """Upper bound on cells held by the slots (shared prefixes between slots counted once where adjacent)."""
        total = 0
        previous: list[int] = []
        for tokens in sorted(self._slots):
            total += len(tokens) - common_prefix(tokens, previous)
            previous = tokens
        return total

    def _evict_for(self, cells: int, keep: set[int]) -> None:
        """Drop slots (lowest priority first, then least recently used; not those in ``keep``) until ``cells`` more
        fit, with a margin."""
        budget = int(self.kv_size * 0.95)
        order = sorted((r for r in range(self.n_slots) if r not in keep), key=self._eviction_rank)
        for slot in order:
            if self._resident_cells() + cells <= budget:
                return
            if self._slots[slot]:
                self._lib.llama_memory_seq_rm(self._mem, slot, -1, -1)
                self._slots[slot] = []
        if cells > budget:
            raise KVCacheFull(f"a batch needing {cells} KV cells exceeds the cache of {self.kv_size} (llm.kv_size)")

    def evaluate(
        self,
        sequences: Sequence[Sequence[int]],
        outputs: Sequence[Sequence[int]],
        on_output: OutputCallback,
        *,
        reserve: int = 0,
        marks: Sequence[Sequence[int]] | None = None,
    ) -> None:
        """Decode ``sequences`` into working sequences ``0..n-1``, each shared prefix once (``marks`` unused).

        ``outputs[k]`` lists the positions of sequence ``k`` whose logits are wanted; ``on_output`` is called for
        each right after its decode. Prefixes found in the resident slots are copied, not recomputed. ``reserve``
        cells are kept free for tokens generated afterwards with :meth:`step`. The caller holds :attr:`lock` and
        calls :meth:`finish` when done with the working sequences.
        """
        n = len(sequences)
        if n > self.max_working:
            raise ValueError(f"{n} sequences exceed the {self.max_working} working sequences")
        if any(len(seq) == 0 for seq in sequences):
            raise ValueError("cannot evaluate an empty token sequence")
        self.clear_working()
        try:
            self._evaluate(sequences, outputs, on_output, reserve)
        except KVCacheFull:
            log.info("KV cache full: dropping resident prefixes and retrying")
            self.clear_working()
            self.reset()
            self._evaluate(sequences, outputs, on_output, reserve)

    def _evaluate(
        self,
        sequences: Sequence[Sequence[int]],
        outputs: Sequence[Sequence[int]],
        on_output: OutputCallback,
        reserve: int,
    ) -> None:
        # 1. The longest resident prefix of each sequence, but never past its first wanted position (those logits
        #    must be computed now) nor its last token.
        reuse: list[int] = []
        source: list[int] = []
        for seq, wanted in zip(sequences, outputs, strict=True):
            cap = min(min(wanted), len(seq) - 1) if wanted else len(seq) - 1
            best, best_slot = 0, -1
            for slot, tokens in enumerate(self._slots):
                length = min(common_prefix(seq, tokens), cap)
                if length > best:
                    best, best_slot = length, slot
            reuse.append(best)
            source.append(best_slot)

        # 2. The trie of all sequences.
        nodes: list[_Node] = []
        roots: dict[int, int] = {}
        paths: list[list[int]] = []
        for k, seq in enumerate(sequences):
            path: list[int] = []
            children = roots
            for depth, token in enumerate(seq):
                index = children.get(token)
                if index is None:
                    index = len(nodes)
                    nodes.append(_Node(token=token, depth=depth))
                    children[token] = index
                node = nodes[index]
                node.seqs.append(k)
                path.append(index)
                children = node.children
            for pos in outputs[k]:
                nodes[path[pos]].wants.append((k, pos))
            paths.append(path)

        # 3. Sequences decoded together at a node must start from the same cached length (llama.cpp's coupling
        #    rule); lowering a reuse length can couple more nodes, so repeat until stable.
        changed = True
        while changed:
            changed = False
            for node in nodes:
                decoded = [k for k in node.seqs if reuse[k] <= node.depth]
                if len(decoded) > 1:
                    low = min(reuse[k] for k in decoded)
                    for k in decoded:
                        if reuse[k] != low:
                            reuse[k] = low
                            changed = True

        # 4. Copy the reused prefixes, then decode the remaining nodes in creation order (parents first, and each
        #    sequence's positions increasing).
        plan = [(node, [self._seq(k) for k in node.seqs if reuse[k] <= node.depth]) for node in nodes]
        plan = [(node, seq_ids) for node, seq_ids in plan if seq_ids]
        for k, length in enumerate(reuse):
            if length > 0:
                self._lib.llama_memory_seq_cp(self._mem, source[k], self._seq(k), 0, length)
                self._slot_tick[source[k]] = self._next_tick()
        # Evict after copying: the working sequences now hold the reused cells, and slots used now stay.
        self._evict_for(len(plan) + reserve, keep={source[k] for k in range(len(reuse)) if reuse[k] > 0})
        self.tokens_reused += sum(reuse)
        for start in range(0, len(plan), self.n_batch):
            chunk = plan[start : start + self.n_batch]
            self._decode([(node.token, node.depth, seq_ids, bool(node.wants)) for node, seq_ids in chunk])
            for i, (node, _) in enumerate(chunk):
                if node.wants:
                    on_output(node.wants, i)

    def sample(self, sampler: object, batch_index: int) -> int:
        """Sample (and accept) a token with a llama.cpp sampler chain from one batch entry's logits."""
        return int(self._lib.llama_sampler_sample(sampler, self._ctx, batch_index))

    @property
    def vocab(self) -> object:
        return self._vocab

    def step(self, entries: Sequence[tuple[int, int, int]], on_output: Callable[[int, int], None]) -> None:
        """Decode one new token per working sequence, ``(sequence index, token, position)`` each; after each decode
        ``on_output(entry index, batch index)`` is called for the entries it computed."""
        for start in range(0, len(entries), self.n_batch):
            chunk = entries[start : start + self.n_batch]
            self._decode([(token, pos, [self._seq(k)], True) for k, token, pos in chunk])
            for i in range(len(chunk)):
                on_output(start + i, i)

    def finish(self, keep: Sequence[tuple[int, Sequence[int]]], priority: int = 0) -> None:
        """Keep ``(sequence index, its first tokens)`` as resident prefixes (the first ``n_slots`` of them) at
        ``priority`` (see the module docstring), then free the working sequences."""
        for k, tokens in keep[: self.n_slots]:
            tokens = list(tokens)
            if not tokens:
                continue
            holder = next((r for r, slot in enumerate(self._slots) if slot[: len(tokens)] == tokens), None)
            if holder is not None:  # already resident (possibly inside a longer prefix)
                if priority > self._slot_priority[holder] and self._may_take(holder, priority):
                    self._slot_priority[holder] = priority
                continue
            slot = self._slot_for(tokens, priority)
            if slot is None:
                continue  # every slot holds a prefix of higher priority
            self._lib.llama_memory_seq_rm(self._mem, slot, -1, -1)
            self._lib.llama_memory_seq_cp(self._mem, self._seq(k), slot, 0, len(tokens))
            self._slots[slot] = tokens
            self._slot_tick[slot] = self._next_tick()
            self._slot_priority[slot] = priority
        self.clear_working()

    def _slot_for(self, tokens: list[int], priority: int) -> int | None:
        """The slot a new prefix goes to: its family's, else an empty one, else the lowest-ranked (None if that one
        has a higher priority); a raised prefix past ``high_slots`` takes the least recently used raised slot."""
        shared = [common_prefix(tokens, old) if old else 0 for old in self._slots]
        family = max(range(self.n_slots), key=lambda r: shared[r])
        old = self._slots[family]
        same_family = bool(old) and (shared[family] == len(old) or 2 * shared[family] >= len(tokens))
        if same_family and self._may_take(family, priority):
            return family
        if priority > 0 and not self._room_high():
            raised = [r for r in range(self.n_slots) if 0 < self._slot_priority[r] <= priority]
            return min(raised, key=self._eviction_rank) if raised else None
        empty = next((r for r, slot in enumerate(self._slots) if not slot), None)
        if empty is not None:
            return empty
        victim = min(range(self.n_slots), key=self._eviction_rank)
        return victim if self._slot_priority[victim] <= priority else None

    def _may_take(self, slot: int, priority: int) -> bool:
        """Whether a prefix of ``priority`` may replace ``slot`` (never a higher one; raising needs room)."""
        held = self._slot_priority[slot]
        return held <= priority and (priority == 0 or held > 0 or self._room_high())

    def _room_high(self) -> bool:
        return sum(p > 0 for p in self._slot_priority) < self.high_slots

    def _eviction_rank(self, slot: int) -> tuple[int, int]:
        return self._slot_priority[slot], self._slot_tick[slot]

    def _next_tick(self) -> int:
        self._tick += 1
        return self._tick

    def close(self) -> None:
        lib = self._lib
        if getattr(self, "_ctx", None):
            lib.llama_batch_free(self._batch)
            lib.llama_free(self._ctx)
            self._ctx = None
        if getattr(self, "_model", None):
            lib.llama_model_free(self._model)
            self._model = None

    def __del__(self) -> None:  # pragma: no cover - depends on the garbage collector
        with contextlib.suppress(Exception):
            self.close()
