"""Packed sentence embedding: a call's texts as one token sequence, so every linear layer runs once per call.

:class:`~recagent_gym.llm.embedder.SentenceEmbedder` embeds without padding, so a text's vector is bitwise the same
whatever it is batched with. Grouping a call's texts by token length gives that, but a round's texts have many
lengths, so most groups hold one text and the model runs many tiny batches (about 20 ms per text alone against 8-9
in batches). Here the texts' tokens are concatenated into one sequence (each text's positions restart at 0): the
embeddings, linear layers, layer norms and activations treat every token on its own, so they run once on all of
them, and only attention is computed per text, on the texts of one length at a time through transformers' own
SDPA attention, as the grouped path does. Pooling runs per length group through the model's own modules.

The result is bitwise the grouped path's (the linear kernels' rows do not depend on how many rows are in the
call; measured, and checked by :func:`attach` on probe texts whenever a model is loaded: a model or library
version for which it does not hold keeps the grouped path, with a log line). The attention implementation is
registered with transformers' :class:`~transformers.AttentionInterface` under :data:`NAME`, with SDPA's mask
function; without the packed arguments it is SDPA itself, so ``encode``'s padded batches are unchanged.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

NAME = "recagent_packed"
PROBES = (
    "A short one.",
    "Alice watched Heat and thought the ending was far too long, but the music stayed with her.",
    "Bob and Carol talked about comedies.",
    "Toy Story.",
    "She loved it.",
)
"""Texts of several token lengths, two of one length, on which :func:`attach` checks the packed path."""

_registered = False


def _packed_attention(module: Any, query: Any, key: Any, value: Any, attention_mask: Any, **kwargs: Any) -> Any:
    """SDPA per length group of the packed sequence (``packed_groups`` in ``kwargs``), else SDPA as is."""
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    groups = kwargs.pop("packed_groups", None)
    if groups is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    heads, dim = query.shape[1], query.shape[3]
    out = torch.empty(query.shape[2], heads, dim, dtype=query.dtype)  # (tokens, heads, dim), as SDPA returns
    for length, index in groups:  # index: (texts, length) token positions of the group's texts
        rows = index.reshape(-1)
        n = index.shape[0]

        def split(x: Any, rows: Any = rows, n: int = n, length: int = length) -> Any:
            return x[0, :, rows].reshape(heads, n, length, dim).transpose(0, 1).contiguous()

        o, _ = sdpa_attention_forward(module, split(query), split(key), split(value), None, **kwargs)
        out[rows] = o.reshape(n * length, heads, dim)
    return out.unsqueeze(0), None


def _register() -> None:
    global _registered
    if _registered:
        return
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import sdpa_mask

    AttentionInterface.register(NAME, _packed_attention)
    AttentionMaskInterface.register(NAME, sdpa_mask)
    _registered = True


def encode_packed(model: Any, texts: Sequence[str], dim: int) -> np.ndarray:
    """Unit vectors of ``texts`` from sentence-transformers ``model`` (attached by :func:`attach`), packed."""
    import torch

    encoded = model.tokenizer(list(texts), truncation=True, max_length=model.max_seq_length, add_special_tokens=True)
    ids = encoded["input_ids"]
    lengths = np.array([len(row) for row in ids], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    by_length: dict[int, list[int]] = {}
    for i, length in enumerate(lengths.tolist()):
        by_length.setdefault(length, []).append(i)
    groups = [
        (length, torch.from_numpy(starts[members][:, None] + np.arange(length)[None]))
        for length, members in by_length.items()
    ]
    input_ids = torch.tensor([[token for row in ids for token in row]])
    positions = torch.from_numpy(np.concatenate([np.arange(n) for n in lengths.tolist()]))[None]
    extra = {"token_type_ids": torch.zeros_like(input_ids)} if "token_type_ids" in encoded else {}
    out = np.empty((len(ids), dim), dtype=np.float32)
    with torch.inference_mode():
        hidden = model[0].auto_model(input_ids=input_ids, position_ids=positions, packed_groups=groups, **extra)
        tokens = hidden.last_hidden_state[0]
        for (length, index), members in zip(groups, by_length.values(), strict=True):
            features = {"token_embeddings": tokens[index], "attention_mask": torch.ones(len(members), length)}
            for module in list(model)[1:]:
                features = module(features)
            out[members] = torch.nn.functional.normalize(features["sentence_embedding"].float(), p=2, dim=1).numpy()
    return out


def attach(model: Any, grouped: Any, dim: int) -> bool:
    """Switch ``model``'s transformer to the packed-capable attention when it runs SDPA, and keep it only if the
    packed path gives bitwise what ``grouped(texts)`` (the by-length path) gives on :data:`PROBES` and padded
    ``encode`` is unchanged; True when kept."""
    try:
        auto = model[0].auto_model
        if auto.config._attn_implementation != "sdpa":
            return False
        _register()
        expected = grouped(list(PROBES))
        padded = model.encode(list(PROBES), convert_to_numpy=True)
        auto.set_attn_implementation(NAME)
        if np.array_equal(encode_packed(model, PROBES, dim), expected) and np.array_equal(
            model.encode(list(PROBES), convert_to_numpy=True), padded
        ):
            return True
        log.info("packed embedding differs from the grouped one here; embedding texts grouped by length")
    except Exception as exc:  # a model or library this path does not fit: the grouped path is always right
        log.info("packed embedding unavailable (%s); embedding texts grouped by length", exc)
    with contextlib.suppress(Exception):  # the model loaded with SDPA and accepts it back
        model[0].auto_model.set_attn_implementation("sdpa")
    return False
