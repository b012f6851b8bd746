"""Which expert-parallel layouts a search tries (issue 24; chapter 18): the helpers
:func:`~llmsizing.planner.plan` and :func:`~llmsizing.fewest_gpus.min_gpus` share to search ``ep`` for a
mixture of experts. The parts of the planner's vectorised pricing that only a mixture of experts has are in
:mod:`llmsizing.plan_pricing`. The arithmetic of expert parallelism itself (memory, the all-to-all, FLOPs) is
in :mod:`llmsizing.moe`; these only call it (and :mod:`llmsizing.comm`) once per piece many plans share."""

from __future__ import annotations

import math

from ._compat import retire as _retire
from ._validate import check_int
from .all_to_all import route_max_nodes  # (the one count; here for the callers before issue 35)
from .model import Model
from .moe import stage_moe_layers
from .parallel import Parallel

def ep_candidates(model: Model, ep_degrees=None) -> tuple[int, ...]:
    """The expert-parallel degrees a search tries: ``(1,)`` for a dense model; for a mixture of experts every
    divisor of its routed experts (each rank holds whole experts: Megatron-Core asserts ``num_moe_experts %
    expert_model_parallel_size == 0``), or the given ``ep_degrees``, each of which must divide them (a
    ``ValueError`` naming ``ep_degrees`` otherwise)."""
    from ._validate import check_sequence

    if ep_degrees is None:
        if not model.is_moe:
            return (1,)
        e = model.experts
        return tuple(d for d in range(1, e + 1) if e % d == 0)
    eps = sorted({check_int("ep_degrees[i]", d) for d in check_sequence("ep_degrees", ep_degrees,
                                                                         example="(1, 8, 64)")})
    for d in eps:
        if d > 1 and not model.is_moe:
            raise ValueError(f"ep_degrees holds ep={d}, but {model.name!r} is dense (experts=0): expert "
                             "parallelism splits routed experts")
        if model.is_moe and model.experts % d:
            raise ValueError(f"ep_degrees holds ep={d}, which does not divide the {model.experts} routed "
                             f"experts of {model.name!r}: each expert-parallel rank holds experts / ep whole "
                             "experts")
    return tuple(eps)


def dp_unit(tp: int, cp: int, ep: int, expert_tp: bool = False) -> int:
    """The smallest data-parallel degree a layout with ``ep`` can have, every valid ``dp`` being a multiple of
    it: ``ep`` must divide ``tp x cp x dp / etp`` (:class:`~llmsizing.parallel.Parallel`), so ``dp`` is a
    multiple of ``etp x ep / gcd(etp x ep, tp x cp)``. 1 without expert parallelism; ``ep`` with
    ``tp = cp = 1`` (the expert-parallel group inside the data-parallel one, as DeepSpeed-MoE places it)."""
    etp = tp if expert_tp else 1
    return etp * ep // math.gcd(etp * ep, tp * cp)


def heavy_stages(model: Model, par: Parallel) -> tuple[int, ...]:
    """The pipeline stages of which one is the most loaded GPU, for a search that evaluates only some: the
    first (embedding, most micro-batches in flight) and the last (LM head, logits), as for a dense model, and
    for a mixture of experts also the first stage of each count of MoE layers (of stages holding the same MoE
    layers the earliest has the most micro-batches in flight; DeepSeek-V3's first stage holds its dense
    layers, so the second may outweigh it). ``tests/test_planner_moe.py`` checks it against every stage."""
    out = {0, par.pp - 1}
    if model.is_moe:
        seen = set()
        for i, k in enumerate(stage_moe_layers(model, par)):
            if k not in seen:
                seen.add(k)
                out.add(i)
    return tuple(sorted(out))



# ----------------------------------------------------------------------------- the planner's pricing of them


__all__ = ["route_max_nodes", "ep_candidates", "dp_unit", "heavy_stages"]


# The name-keyed table is retired (issue 32: behaviour comes from the config's fields); the planner's MoE
# pricing moved to llmsizing.plan_pricing, beside the dense pricing it extends.
__getattr__ = _retire(__name__, {"NODE_LIMITED_ROUTING": ({"deepseek-v3": 4},
                                                          "route_max_nodes(model, ep, gpus_per_node), "
                                                          "read from the config's n_group and "
                                                          "topk_group")},
                      moved={n: "llmsizing.plan_pricing"
                             for n in ("moe_ep_coefficients", "moe_dp_collectives", "moe_all_to_all_s")})
