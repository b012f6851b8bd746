"""Chapter 0's opening example in sentences: how few GPUs hold a model's training states, and its weights.

:func:`opening_example_prose` counts, for one model and one GPU, the fewest GPUs whose memory holds the
mixed-precision AdamW model states (16 bytes a parameter: Rajbhandari et al. 2020, the ZeRO paper, Sec. 3.1)
three ways: in the planner's 90% of each GPU alone (:data:`~llmsizing.states.USABLE_FRACTION`), with the
book's allowance on top (1 GiB a GPU + 8% of the tensors, chapter 3), and with the fragmentation that
published training runs measured in place of the 8%
(:func:`~llmsizing.allocator_fragmentation.fragmentation_allowance`, PyTorch's default allocator). It also
counts the GPUs that hold the bf16 weights for serving (the allowance in the whole GPU, as chapter 3's
``min_serving_gpus`` charges it). It returns a :class:`~llmsizing.prose.ChapterText` whose ``values`` the
chapter glues as ``ch0_<name>``; each reading of the prose is checked (:class:`ProseOutOfDate`).
"""

from __future__ import annotations

import math

from ._validate import check_fraction, check_number
from .allocator_fragmentation import fragmentation_allowance, measured_fragmentation
from .catalog import get_gpu
from .gpu_states import min_gpus_for_bytes, model_states
from .model_catalog import resolve_model
from .inference import weights_bytes
from .prose import ChapterText, ProseOutOfDate
from .prose import prose_check as _prose_check
from .states import FIXED_OVERHEAD_BYTES, FRAGMENTATION, USABLE_FRACTION
from .units import GiB, fmt_count, fmt_gib

__all__ = ["ProseOutOfDate", "fewest_gpus_with_allowance", "opening_example_prose"]


def fewest_gpus_with_allowance(n_bytes: float, gpu, *, usable_fraction: float = USABLE_FRACTION,
                               fragmentation: float = FRAGMENTATION) -> int:
    """The fewest ``gpu`` that hold ``n_bytes`` of tensors split evenly over them (a lower bound: ZeRO-3/FSDP
    for model states, tensor parallelism for weights) when each GPU also pays the fixed 1 GiB of the allowance
    (:data:`~llmsizing.states.FIXED_OVERHEAD_BYTES`) and ``fragmentation`` times its share, within
    ``usable_fraction`` of its memory: the smallest ``n`` with ``FIXED + (1 + fragmentation) x n_bytes / n <=
    usable_fraction x capacity``. With the defaults this is the planner's rule
    (:func:`~llmsizing.states.peak_room_bytes` of 90% of the GPU); ``usable_fraction=1.0`` is chapter 3's
    serving count. ValueError if the fixed part leaves no room, or for a fragmentation outside [0, 10)."""
    frac = check_fraction("usable_fraction", usable_fraction)
    f = check_number("fragmentation", fragmentation)
    if f >= 10:
        raise ValueError(f"fragmentation must be a fraction of the tensors in [0, 10), got {fragmentation!r}")
    g = get_gpu(gpu)
    room = (frac * g.memory_bytes - FIXED_OVERHEAD_BYTES) / (1 + f)
    if room <= 0:
        raise ValueError(f"usable_fraction={frac:g} of a {g.name} leaves no room above the allowance's fixed "
                         f"{FIXED_OVERHEAD_BYTES / GiB:g} GiB")
    return min_gpus_for_bytes(n_bytes, g, usable_fraction=room / g.memory_bytes)


def opening_example_prose(model="llama-3-70b", gpu="H100 SXM") -> ChapterText:
    """The opening example (chapter 0) for ``model`` (a catalogue name or Model) on ``gpu``: what its cell
    prints (``report``) and the texts the prose quotes (``values``). Raises :class:`ProseOutOfDate` where the
    prose's reading fails: serving needs fewer GPUs than training, the allowance adds GPUs, and the measured
    fragmentation, larger than the book's 8%, adds at least as many again."""
    m, g = resolve_model(model), get_gpu(gpu)
    states = model_states(m, precision="bf16-mixed", optimizer="adamw")
    w = weights_bytes(m, "bf16")
    f_meas = fragmentation_allowance("default")
    n_bare = min_gpus_for_bytes(states.total_bytes, g)
    n_allow = fewest_gpus_with_allowance(states.total_bytes, g)
    n_meas = fewest_gpus_with_allowance(states.total_bytes, g, fragmentation=f_meas)
    n_serve = fewest_gpus_with_allowance(w, g, usable_fraction=1.0)

    def says(holds, what):
        _prose_check(holds, what, "chapter 0's opening example")

    says(n_serve < n_bare < n_allow, "serving needs far fewer GPUs, and the allowance adds to training's")
    says(f_meas > FRAGMENTATION and n_meas >= n_allow,
         "the published runs' fragmentation exceeds the book's 8% and needs at least as many GPUs")
    says(math.isclose(states.bytes_per_param, 16), "the recipe keeps 16 bytes a parameter")
    report = (f"{m.name}: {m.n_params:,} parameters x {states.bytes_per_param:g} bytes = "
              f"{fmt_gib(states.total_bytes)} of model states\n"
              f"{g.label} -> at least {n_bare} GPUs just to hold them ({n_allow} with the allowance, "
              f"{n_meas} with {f_meas:.0%} fragmentation)\n"
              f"serving needs the bf16 weights, {fmt_gib(w)}: at least {n_serve} GPUs\n")
    values = {"params": fmt_count(m.n_params), "bpp": f"{states.bytes_per_param:g}",
              "states": fmt_gib(states.total_bytes), "h100": f"{g.memory_gib:.1f} GiB",
              "h100_box": f"{g.memory_marketed_gb:g} GB", "n_train": f"{n_bare}",
              "n_train_allow": f"{n_allow}",
              "n_train_meas": f"{n_meas}", "frag_meas": f"{f_meas:.0%}",
              "frag_meas_sources": f"{measured_fragmentation('peak_active', allocator='default').n_sources}",
              "n_serve": f"{n_serve}",
              "weights": fmt_gib(w), "reserve": f"{1 - USABLE_FRACTION:.0%}",
              "fixed": f"{FIXED_OVERHEAD_BYTES / GiB:g} GiB", "frag": f"{FRAGMENTATION:.0%}"}
    return ChapterText(values, report, {"model": m, "gpu": g, "states": states})
