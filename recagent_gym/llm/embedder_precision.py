"""What MiniLM computes in (:class:`~recagent_gym.llm.embedder.SentenceEmbedder`'s ``precision``, the LLM agents'
``llm.embedder_precision``) and the CPU instruction set its kernels dispatch to: both change the vectors' last bits,
so both are part of the text-vector store's identity."""

from __future__ import annotations

from typing import Literal

Precision = Literal["auto", "bf16", "fp32"]
PRECISIONS: tuple[str, ...] = ("auto", "bf16", "fp32")
"""What MiniLM computes in: ``bf16`` (torch's CPU autocast: matrix products in bfloat16, layer norms, softmax and
pooling in float32), ``fp32`` (everything in float32, the reference), or ``auto``: bf16 where torch's oneDNN has
bfloat16 kernels for this CPU (AVX-512 and later), else fp32. See ``docs/speed.md`` for the retrieval agreement of
bf16 with fp32 (``benchmarks/bench_embed_agreement.py``)."""


def resolve_precision(precision: str) -> str:
    """``auto`` as ``bf16`` or ``fp32`` on this machine (see :data:`PRECISIONS`); the others as they are."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if precision != "auto":
        return precision
    import torch

    supported = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
    try:
        return "bf16" if supported is not None and bool(supported()) else "fp32"
    except RuntimeError:  # a torch build without oneDNN
        return "fp32"


ISA_LIMITS = ("ONEDNN_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS")
"""Environment variables that cap oneDNN's and MKL's instruction sets below what torch reports (bf16 matrix products
run in oneDNN)."""


def cpu_capability() -> str:
    """The instruction set torch's CPU kernels dispatch to here (``AVX512``, ``AVX2``, ``DEFAULT``...), with any cap
    of :data:`ISA_LIMITS` set (``AVX512+ONEDNN_MAX_CPU_ISA=AVX2``): vectors computed with another one can differ in
    their last bits."""
    import os

    import torch

    get = getattr(getattr(torch.backends, "cpu", None), "get_cpu_capability", None)
    capability = str(get()) if get is not None else "unknown"
    limits = [f"{name}={os.environ[name]}" for name in ISA_LIMITS if os.environ.get(name)]
    return "+".join([capability, *limits])
