"""The time only a mixture of experts spends (issue 35; chapter 18): the terms
:func:`~llmsizing.comm.step_compute_time_s` adds to a MoE step besides its active FLOPs, each with its source.

* **Grouped expert GEMMs** are priced by their shape in :func:`llmsizing.kernels.layer_gemms`: each of a GPU's
  experts multiplies ``tokens x k x ep / experts`` rows (:func:`expert_rows`), the rows the GEMM-shape curve
  sees; fine-grained experts (many, narrow, top-8) get short, thin GEMMs there. The GPU's experts run as one
  grouped GEMM, all their rows at once, losing what DeepGEMM's grouped tables lose to few rows per expert
  (:func:`llmsizing.kernels.grouped_gemm_share`).
* **Routing kernels** (router logits, top-k, permutation and unpermutation): memory-bound, priced on HBM
  bandwidth by their bytes (:func:`routing_bytes_per_token`), following Megatron-Core's ``moe_utils.permute``
  / ``unpermute`` (a gather of each token's ``k`` copies, a scatter-add back).
* **Load imbalance**: the slowest expert-parallel rank gets more than its share of the routed tokens
  (:func:`load_skew`), from the published per-expert maximal violations of auxiliary-loss and
  auxiliary-loss-free routing (``data/moe_load_skew.csv``).
* **SMs kept for communication**: DeepSeek-V3 runs its all-to-all on 20 of each H800's 132 SMs (Sec. 3.2.2),
  so the compute runs on the rest (:func:`comm_sm_share`).
* **Pipeline schedules**: DualPipe's and zero-bubble's bubbles from the DualPipe repository's table, on
  stages of unequal work from their layouts (:func:`schedule_bubble`, :mod:`llmsizing.pipeline_unequal`).
* **Multi-token prediction**: its module's FLOPs (:func:`llmsizing.moe.mtp_flops_per_token`, re-exported
  here; DeepSeek-V3 Sec. 2.2).
"""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path

from ._validate import check_choice, check_int, check_number
from .catalog import _read, get_gpu, resolve_model
from .moe import mtp_flops_per_token  # noqa: F401 (the MTP term, beside the others)
from .parallel import pipeline_bubble
from .pipeline_schedule import dualpipe_makespan, dualpipe_rank_mean, unbalanced_1f1b_makespan
from .pipeline_unequal import zb1p_makespan

DATA = Path(__file__).resolve().parents[2] / "data"

#: Streaming multiprocessors per GPU, from ``data/gpu_sms.csv`` (a source and an as-of date on every row:
#: NVIDIA's H100 and A100 whitepapers, DeepSeek-V3 Sec. 3.2.2 for the H800).
GPU_SMS = {r["gpu"]: int(r["sms"]) for r in _read("gpu_sms.csv")}

#: DeepSeek-V3's SMs for its communication kernels (Sec. 3.2.2: "only 20 SMs are sufficient").
DEEPSEEK_V3_COMM_SMS = 20

#: The pipeline schedules :func:`schedule_bubble` knows.
SCHEDULES = ("1f1b", "zb1p", "dualpipe")

#: Routing names :func:`load_skew` takes (``data/moe_load_skew.csv``'s ``routing`` column).
ROUTINGS = ("aux-loss", "aux-loss-free")


def expert_rows(tokens: float, top_k: int, experts: int, ep: int = 1) -> float:
    """Rows of each expert's GEMM on one GPU under uniform routing: the ``tokens`` of each of ``ep`` GPUs
    send ``k`` copies each, spread over ``experts`` experts: ``tokens x k x ep / experts``
    (:func:`llmsizing.kernels.layer_gemms` prices the grouped GEMMs at this ``m``)."""
    tokens = check_number("tokens", tokens)
    return tokens * check_int("top_k", top_k) * check_int("ep", ep) / check_int("experts", experts)


def routing_bytes_per_token(model, *, act_bytes: float = 2.0, recompute: str = "none") -> float:
    """HBM bytes one MoE layer's routing kernels move per token in a training step (forward, backward and a
    recomputed forward with ``recompute="full"``). Forward, with hidden ``h``, ``E`` experts, top-``k``,
    ``act_bytes`` per activation: the router reads the token (``h b``) and writes fp32 logits that top-k
    reads (``2 x 4E``), top-k writes ``k`` fp32 weights and int32 indices (``8k``); the permutation gathers
    ``k`` copies (read and write ``2 k h b``); the unpermutation reads the ``k`` expert outputs and writes
    their weighted sum (``k h b + h b``): ``3 k h b + 2 h b + 8E + 8k``. The backward moves each of these
    twice (the gradients through the same gathers and scatters, and the weights' gradient reading the expert
    outputs again), so a step is 3 forwards' bytes (4 with full recomputation). Megatron-Core's
    ``moe_utils.permute`` / ``unpermute`` (index_select / scatter_add).

    A mixture of attention heads (``attn_experts`` ``E_a``, top-``k_a``, ``q = heads x head_dim``; JetMoE's
    ``JetMoeMoA.map`` / ``reduce``) routes each attention layer too: the same router, top-k, gather and
    weighted sum, ``3 k_a h b + 2 h b + 8 E_a + 8 k_a``, plus the query experts' outputs scattered back to
    token order and the attention output gathered for the output experts (``2 q b`` each): ``4 q b`` more.
    Its attention layers' bytes are spread over the MoE layers (``x n_attention_layers / n_moe_layers``), so
    that the MoE layers' count prices both."""
    model = resolve_model(model, moe=True)
    b = check_number("act_bytes", act_bytes, allow_equal=False)
    check_choice("recompute", recompute, ("none", "selective", "full"))
    h, e, k = model.hidden, model.experts, model.experts_per_token
    fwd = 3 * k * h * b + 2 * h * b + 8 * e + 8 * k
    ea = getattr(model, "attn_experts", 0)
    if ea:
        ka, q = model.attn_experts_per_token, model.heads * model.head_dim
        attn = 3 * ka * h * b + 2 * h * b + 8 * ea + 8 * ka + 4 * q * b
        fwd += attn * model.n_attention_layers / model.n_moe_layers
    return fwd * (4 if recompute == "full" else 3)


@lru_cache(maxsize=None)
def load_skew_table():
    """``data/moe_load_skew.csv``: the published maximal violation (``max_vio``: the most loaded expert's
    tokens over the mean, minus 1) by routing, gate, expert count and auxiliary-loss coefficient, each row
    with its source and the stored copy it was read in."""
    import pandas as pd

    return pd.read_csv(DATA / "moe_load_skew.csv")


@lru_cache(maxsize=8)
def _mean_max_vio(routing: str) -> float:
    """The mean ``max_vio`` of ``routing``'s ``MaxVio_global`` rows of :func:`load_skew_table`, read once
    per routing (a data file, like the catalogue's: issue 35, the planner asks :func:`load_skew` once per
    ``ep`` of a search)."""
    t = load_skew_table()
    return float(t.loc[(t["routing"] == routing) & (t["metric"] == "MaxVio_global"), "max_vio"].mean())


def routing_of(model) -> str:
    """``"aux-loss-free"`` when ``model`` routes with a per-expert bias on its scores (DeepSeek-V3's
    ``e_score_correction_bias``, ``Model.router_bias``), else ``"aux-loss"``."""
    return "aux-loss-free" if getattr(model, "router_bias", False) else "aux-loss"


def load_skew(model, ep: int, routing: str | None = None, capacity_factor: float | None = None) -> float:
    """The slowest expert-parallel rank's routed tokens over the mean: ``1 + v sqrt(ep / E)`` with ``v`` the
    published per-expert maximal violation of ``routing`` (default :func:`routing_of`; the mean of that
    routing's rows in ``data/moe_load_skew.csv``) and ``E / ep`` experts per rank (a rank sums the loads of
    its experts, whose deviations, taken as independent, shrink as ``1 / sqrt(E / ep)``: the assumption of
    this term). 1 without expert parallelism: one GPU holds every expert and does all the routed work. The
    default ``v`` is the mean of the routing's rows, all from Wang et al. (arXiv:2408.15664; re-read in a
    stored copy of its text, session 21): with an auxiliary loss 0.726, of 0.72 and 0.52 (Table 2, sigmoid
    gate, 1B and 3B) and 0.937 (Table 6, softmax gate, 1B); without one 0.036, of 0.04, 0.04 and 0.027. One
    value per routing, not one per gate, size or expert count: every row has 64 experts (top-6), each gate has
    one row per routing and its auxiliary-loss row a different coefficient (0.0003, not 0.001), and two sizes
    do not make a trend, so nothing in the rows separates those effects; the ``sqrt(ep / E)`` per-rank
    shrinkage is assumed, not measured (the paper's per-computation-batch figure, Fig. 5, is a plot). That
    spread is not a term of the stated range (:func:`~llmsizing.mfu.layout_range_factors`, ``moe=True``);
    chapter 18 gives what it does to Mixtral's step.

    ``capacity_factor`` (default ``None``: dropless, as Megatron-Core and DeepSeek-V3 train) models token
    dropping: each expert takes at most ``capacity_factor x`` its mean share of the tokens and drops the rest
    (Switch Transformer's expert capacity, Fedus, Zoph and Shazeer 2022, arXiv:2101.03961, Sec. 2.2; GShard,
    Lepikhin et al. 2020), so no rank does more than that factor of its mean work: the skew is
    ``min(1 + v sqrt(ep / E), capacity_factor)`` (below 1 when even a balanced load is cut). The dropped
    tokens' cost to quality is not modelled (Switch reports them "typically <1%" at its coefficient 0.01,
    Sec. 2.2, a bound, not a table row). Chapter 18."""
    model = resolve_model(model, moe=True)
    ep = check_int("ep", ep)
    routing = routing_of(model) if routing is None else check_choice("routing", routing, ROUTINGS)
    cap = None if capacity_factor is None else check_number("capacity_factor", capacity_factor,
                                                            maximum=64.0, allow_equal=False)
    if ep == 1 or not model.is_moe:
        skew = 1.0
    else:
        v = _mean_max_vio(routing)
        skew = 1.0 + v * math.sqrt(ep / model.experts)
    return skew if cap is None else min(skew, cap)


def routed_expert_flops_per_token(model, *, recompute: str = "none") -> float:
    """Training FLOPs per token of one MoE layer's routed experts: ``k`` experts of ``2 x`` their weights
    forward, x 3 (x 4 with full recomputation)."""
    model = resolve_model(model, moe=True)
    check_choice("recompute", recompute, ("none", "selective", "full"))
    fe = model.expert_ffn_hidden or model.ffn_hidden
    w = (3 if model.gated_mlp else 2) * model.hidden * fe
    return 2 * w * model.experts_per_token * (4 if recompute == "full" else 3)


def comm_sm_share(gpu, comm_sms: int) -> float:
    """The share of ``gpu``'s SMs its communication kernels keep (:data:`GPU_SMS`): the compute runs on the
    rest, ``1 - share`` of the peak, for the whole step (DeepSeek-V3's DeepEP kernels run beside every
    computation they overlap). 0 with ``comm_sms=0``."""
    n = check_int("comm_sms", comm_sms, minimum=0, maximum=1024)
    if n == 0:
        return 0.0
    g = get_gpu(gpu)
    if g.name not in GPU_SMS:
        raise ValueError(f"comm_sms={n}: the SM count of {g.name!r} is not known (known: "
                         f"{', '.join(GPU_SMS)})")
    if n >= GPU_SMS[g.name]:
        raise ValueError(f"comm_sms={n} must be below {g.name}'s {GPU_SMS[g.name]} SMs")
    return n / GPU_SMS[g.name]


def schedule_bubble(schedule: str, pp: int, m: int, virtual_stages: int = 1, *,
                    stage_times: tuple | None = None) -> float:
    """The pipeline bubble over the ideal compute of ``m`` micro-batches, from the DualPipe repository's
    table (deepseek-ai/DualPipe README, with ``F`` a chunk's forward, ``B`` its full backward, ``W`` the
    weights' backward, ``F&B`` a forward and a backward overlapped): 1F1B ``(pp-1)(F+B)``, ZB1P
    ``(pp-1)(F+B-2W)``, DualPipe ``(pp/2-1)(F&B+B-3W)``, each over the ``m (F+B)`` of compute. With ``F = 1``,
    ``B = 2``, ``W = 1`` (a GEMM's backward is one for the inputs' gradient and one for the weights') and
    ``F&B = F + B`` (overlapping hides communication, not compute): 1F1B ``(pp-1)/m``
    (:func:`~llmsizing.parallel.pipeline_bubble`, interleaving divides it by ``virtual_stages``), ZB1P
    ``(pp-1)/(3m)``, DualPipe ``2(pp/2-1)/(3m)``.

    ``stage_times`` (1F1B, plain or interleaved: each stage's compute seconds, ``pp`` of them,
    :func:`~llmsizing.comm.stage_compute_times_s`): the fill and drain pass each stage but the slowest once at
    its own speed (:func:`~llmsizing.pipeline_schedule.unbalanced_1f1b_makespan`), so the bubble is
    ``(sum - max) / (v m max)``, ``(pp-1)/(v m)`` x the mean of the other stages over the slowest (session 39,
    issue 35; before, the slowest stage's speed). ZB1P (``pp`` stage times): ``(sum - max) / (3 m max)``
    (:func:`~llmsizing.pipeline_unequal.zb1p_makespan`: exact with the slowest stage last, an upper bound
    elsewhere). DualPipe (``pp`` times, one per *stage*, not per rank): the layout's step over ``m`` x the
    slowest rank's mean of its two stages (:func:`~llmsizing.pipeline_schedule.dualpipe_makespan`; no closed
    form). Both were the table's bubble at the slowest stage's (rank's) speed before zb40 (issue 35)."""
    schedule = check_choice("schedule", schedule, SCHEDULES)
    pp, m = check_int("pp", pp), check_int("microbatches", m)
    per_stage = stage_times is not None and pp > 1
    if per_stage and len(stage_times) != pp:
        raise ValueError(f"stage_times needs pp={pp} times, one a stage, got {len(stage_times)}")
    if schedule == "1f1b":
        if not per_stage:
            return pipeline_bubble(pp, m, virtual_stages)
        top = max(stage_times)
        return (unbalanced_1f1b_makespan(stage_times, m, virtual_stages) - m * top) / (m * top)
    if virtual_stages != 1:
        raise ValueError(f"schedule={schedule!r} has no interleaved chunks: virtual_stages must be 1, got "
                         f"{virtual_stages}")
    if schedule == "zb1p":
        if not per_stage:
            return (pp - 1) * (3 - 2) / (3 * m)
        top = max(stage_times)
        return (zb1p_makespan(stage_times, m) - m * top) / (m * top)
    if pp % 2 or m % 2 or m < 2 * pp:
        raise ValueError(f"schedule='dualpipe' needs an even pp and an even number of micro-batches >= 2 pp, "
                         f"got pp={pp}, micro-batches={m} (DualPipe's own assertions, dualpipe.py's step)")
    if not per_stage:
        return (pp / 2 - 1) * (3 + 2 - 3) / (3 * m)
    top = max(dualpipe_rank_mean(stage_times))
    # (the makespan is at least m x the slowest rank's mean, dualpipe_makespan: what falls below it is the
    # rounding of two sums of the same times, -3e-17 s at pp 2, whose bubble is 0; moeapi42's fuzz)
    return max(0.0, (dualpipe_makespan(stage_times, m) - m * top) / (m * top))


def moe_extra_seconds(moe_layers, tokens, *, route_bytes, hbm_bytes_per_s, skew, expert_flops, gemm_rate):
    """Seconds one GPU spends on its MoE layers besides their FLOPs at the GEMM rate: for ``moe_layers``
    layers of ``tokens`` tokens, the routing kernels' bytes at HBM speed and the extra routed-expert FLOPs
    the load skew puts on the slowest rank (``skew - 1`` of them) at the GEMM rate. Scalars or NumPy arrays
    (the planner's copy, :mod:`llmsizing.plan_pricing`, uses the same expression)."""
    return moe_layers * tokens * (route_bytes / hbm_bytes_per_s + (skew - 1.0) * expert_flops / gemm_rate)


__all__ = ["GPU_SMS", "DEEPSEEK_V3_COMM_SMS", "SCHEDULES", "ROUTINGS", "expert_rows",
           "routing_bytes_per_token",
           "load_skew_table", "routing_of", "load_skew", "routed_expert_flops_per_token", "comm_sm_share",
           "schedule_bubble", "mtp_flops_per_token", "moe_extra_seconds"]


def shared_expert_params(model) -> tuple[int, int]:
    """The weights of a MoE layer's shared experts in their first GEMMs (gate and up projections) and in their
    last (the down projection), the two halves :func:`shared_expert_window_s` pairs with the all-to-alls (the
    planner's copy, :func:`llmsizing.plan_moe.moe_all_to_all_s`, reads them too; Megatron-Core's
    ``SharedExpertMLP`` overlaps its ``linear_fc1`` with the dispatch and ``linear_fc2`` with the combine).
    A model with no shared experts is refused: ValueError naming ``shared_expert_overlap``. Chapter 18."""
    if not model.is_moe or not model.shared_experts:
        raise ValueError(f"shared_expert_overlap=True, but {model.name!r} has no shared experts to overlap "
                         "the all-to-all with")
    fc1 = fc2 = 0
    for _, name, shape in model._moe_mlp_tensors():
        if name.startswith("shared_experts.") and name.endswith(".weight"):
            if "down_proj" in name:
                fc2 += math.prod(shape)
            else:
                fc1 += math.prod(shape)
    if not (fc1 and fc2):        # the names are the library's own (Model._moe_mlp_tensors): never a silent 0
        raise RuntimeError(f"{model.name!r}: shared experts declared, but no 'shared_experts.' gate/up and "
                           "down weights in Model._moe_mlp_tensors")
    return fc1, fc2


def shared_expert_window_s(model, gpu, par, batch: int, seq: int, dtype: str, eff: float,
                           comm_sms: int = 0) -> tuple[float, float]:
    """The all-to-all the shared experts can hide with ``par.shared_expert_overlap`` (Megatron-Core's
    ``--moe-shared-expert-overlap``; DeepSeek-V2, arXiv:2405.04434 Sec. 3.1.3: "we overlap the computation
    of shared experts with the expert parallel all-to-all communication"): the forward seconds, per MoE layer
    and micro-batch on one GPU, of the shared experts' first GEMMs (gate and up projections, with the
    activation) and of their last (the down projection), ``(0, 0)`` with the option off. Each is the
    shared experts' FLOPs (``2 x`` their weights per token, over ``tp``) at the step's own GEMM rate
    (:func:`llmsizing.kernels.rates`, less the SMs ``comm_sms`` keeps), as the compute prices them.

    What overlaps what, from Megatron-Core (``transformer/moe/shared_experts.py``, ``token_dispatcher.py``'s
    ``MoEAlltoAllTokenDispatcher``): the shared experts run on their own CUDA stream;
    ``linear_fc1_forward_and_act`` is launched right after the dispatch all-to-all, ``linear_fc2_forward``
    with the combine all-to-all, and the backward keeps the pairing (sequence numbers order each GEMM's
    backward beside the matching all-to-all's). So each all-to-all hides at most its partner's seconds (the
    backward's twice the forward's): :func:`shared_overlap_exposed_s`. The all-to-all's own SMs slowing the
    GEMMs beside it is not priced."""
    from .kernels import rates

    if not getattr(par, "shared_expert_overlap", False):
        return (0.0, 0.0)
    fc1, fc2 = shared_expert_params(model)
    rate = rates(model, gpu, tp=par.tp, cp=par.cp, batch=batch, seq=seq, dtype=dtype, kernel_efficiency=eff,
                 ep=par.ep)[0] * (1.0 - comm_sm_share(gpu, comm_sms) if comm_sms else 1.0)
    tokens = batch * seq / (par.tp * par.cp)
    return 2 * fc1 * tokens / rate, 2 * fc2 * tokens / rate


#: Which forward GEMMs of the shared experts each all-to-all of :func:`llmsizing.moe.ep_all_to_all` runs
#: beside (0: gate and up, 1: down) and their pass (1: forward, 2: backward, twice the forward's FLOPs).
_PARTNER = {"dispatch (forward)": (0, 1), "combine (forward)": (1, 1), "combine (backward)": (1, 2),
            "dispatch (backward)": (0, 2)}


def shared_overlap_exposed_s(collective, window_s):
    """The seconds of one expert-parallel :class:`~llmsizing.network.Collective` row left after its calls
    each hide behind the shared experts' GEMMs beside it (:func:`shared_expert_window_s`, ``window_s``):
    ``calls x max(0, t / calls - window)``; the row's time unchanged when ``window_s`` is ``(0, 0)``."""
    t = collective.time_s
    if not any(window_s) or not collective.calls:
        return t
    part, passes = next(v for k, v in _PARTNER.items() if collective.collective.endswith(k))
    hidden = collective.calls * passes * window_s[part]
    return max(0.0, t - hidden) if not hasattr(t, "clip") else (t - hidden).clip(0.0)


def shared_overlap_rows_s(rows, window_s, calls):
    """:func:`shared_overlap_exposed_s` on arrays, for the planner (:func:`llmsizing.plan_pricing._price`):
    ``rows`` (plans x 4) the seconds of :func:`llmsizing.moe.ep_all_to_all`'s four rows in its order (the
    forward dispatch and combine, the backward combine and dispatch), each of ``calls`` calls, and
    ``window_s`` (plans x 2) each plan's :func:`shared_expert_window_s`: the seconds left of each row,
    ``max(0, t - calls x passes x window)`` with :data:`_PARTNER`'s pairs (in that same order). Chapter 18;
    ``tests/test_plan_shared_overlap.py`` holds it to :func:`shared_overlap_exposed_s` row by row."""
    import numpy as np

    w = np.asarray(window_s, dtype=float)
    hidden = np.stack([calls * passes * w[:, part] for part, passes in _PARTNER.values()], axis=1)
    return (np.asarray(rows, dtype=float) - hidden).clip(0.0)
