"""Serving a mixture of experts: the pieces :func:`llmsizing.serve.serving` adds for expert parallelism
(chapter 15, "Serving a mixture of experts"; issue 24).

* :func:`check_ep`: which ``ep`` a model and layout allow (a divisor of the routed experts, or at least as
  many GPUs as experts with the rest holding redundant copies, as DeepSeek-V3's 320-GPU decode unit does; a
  multiple of ``tp``; no pipeline stages);
* :func:`all_to_all_s`: an MoE layer's dispatch or combine all-to-all on the network model, checked against
  DeepEP's published latencies (``data/deepep_all_to_all.csv``).

The decode step's expert reads are :func:`llmsizing.inference.moe_expert_bytes_read` (``E (1 - (1 - k/E)^B)``
experts per layer under uniform routing) and the resident weights per GPU
:func:`llmsizing.serve_engine.weights_bytes_per_gpu`.
"""

from __future__ import annotations

from ._validate import check_int
from .inference import moe_experts_touched
from .all_to_all import all_to_all_s  # noqa: F401 (its home until issue 32)
from .model import Model



def experts_touched(m: Model, tokens: int) -> float:
    """Expected distinct routed experts per MoE layer (:func:`~llmsizing.inference.moe_experts_touched`); 0
    dense."""
    return moe_experts_touched(m, tokens) if m.is_moe else 0.0


def check_ep(m: Model, ep, tp: int, pp: int, redundant_experts: int = 0) -> int:
    """``ep`` checked against the model and layout: 1 for a dense model; a divisor of the routed experts plus
    ``redundant_experts`` (or at least as many GPUs as experts) and a multiple of ``tp`` for a mixture of
    experts; no pipeline stages with it."""
    ep = check_int("ep", ep, maximum=65536)
    red = check_int("redundant_experts", redundant_experts, minimum=0, maximum=65536)
    if red and not m.is_moe:
        raise ValueError(f"redundant_experts={red}: {m.name!r} is dense (give 0)")
    if ep == 1:
        return ep
    if not m.is_moe:
        raise ValueError(f"ep={ep}: expert parallelism needs a mixture of experts; {m.name!r} is dense (ep "
                         "must be 1)")
    if ep < m.experts and (m.experts + red) % ep:
        raise ValueError(f"ep={ep} must divide the {m.experts} routed experts of {m.name!r}"
                         + (f" plus redundant_experts={red}" if red else "") + " (each GPU holds "
                         f"experts / ep of them), or be at least {m.experts} (one expert per GPU, the rest "
                         "holding redundant copies)")
    if ep % tp:
        raise ValueError(f"ep={ep} must be a multiple of tp={tp}: the ep GPUs are ep / tp attention groups "
                         "of tp")
    if pp > 1:
        raise ValueError(f"ep={ep} with pp={pp}: expert parallelism with pipeline stages is not modelled; "
                         "give pp=1")
    return ep


__all__ = ["all_to_all_s", "check_ep", "experts_touched"]
