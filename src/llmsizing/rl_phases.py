"""One RL post-training step's phases (chapter 19, "After pre-training"), split out of :mod:`llmsizing.rl`
(session 24: it had reached the 600-line limit): the response lengths a run is given
(:func:`response_lengths`), what :func:`~llmsizing.rl.rl_run` finds (:class:`RLRun`), each phase's seconds
for one split of the pool (:func:`_phases`: generation priced by the serving model,
:mod:`llmsizing.rl_generation`; the log-probabilities, reward and update by the training model,
:func:`~llmsizing.time_cost.training_time` or the trainer's layout, :mod:`llmsizing.rl_trainer`), the weight
sync (:func:`_sync_s`: colocated moves, or the 16-bit weights sent over the inter-node link as Tülu 3's NCCL
broadcast does) and the step composed from them (:func:`_compose`: the phases in turn, or generation beside
the trainer with asynchronous RL; Sheng et al. 2024, "HybridFlow", arXiv:2409.19256; Hu et al. 2024,
arXiv:2405.11143). No formula of its own beyond the composition: :mod:`llmsizing.rl` re-exports these names,
and ``tests/test_rl.py`` checks the runs against ``data/rl_published.csv``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._validate import check_int, check_number
from .flops import forward_flops_per_token, training_flops_per_token
from .network import collective_time_s, group_link
from .rl_generation import generation_s
from .rl_trainer import (colocated_moves_s, cpu_adam_s, default_layout, layout_parallel, layout_trainer,
                         response_second_moment, weight_backup_s)
from .serve_engine import weights_bytes_per_gpu
from .time_cost import training_time


def response_lengths(response) -> tuple[float, int]:
    """``(mean, longest)`` response tokens from ``response``: one length (every response that long), a pair
    ``(mean, longest)``, or three or more measured lengths (their mean and maximum)."""
    if isinstance(response, bool):
        raise TypeError("response must be a length, a (mean, longest) pair or a list of lengths, got a bool")
    if isinstance(response, (int, float)):
        n = check_int("response", response) if isinstance(response, int) else None
        if n is None:
            raise TypeError(f"response must be a whole number of tokens, got {response!r}")
        return float(n), n
    try:
        values = list(response)
    except TypeError:
        raise TypeError("response must be a length, a (mean, longest) pair or a list of lengths, got "
                        f"{type(response).__name__}") from None
    if len(values) == 2:
        mean = check_number("response[0] (mean)", values[0], allow_equal=False)
        top = check_int("response[1] (longest)", values[1])
        if mean > top:
            raise ValueError(f"response=(mean, longest) needs mean <= longest; got ({mean:g}, {top})")
        return float(mean), top
    if len(values) < 3:
        raise ValueError("response as a list needs 3 or more lengths (or give a (mean, longest) pair)")
    lengths = [check_int(f"response[{i}]", v) for i, v in enumerate(values)]
    return sum(lengths) / len(lengths), max(lengths)


@dataclass(frozen=True)
class RLRun:
    """What :func:`rl_run` found. ``phases`` maps each phase of :data:`PHASES` to its seconds per step
    (``phases_low``/``phases_high``: the fast and slow ends of the parts' ranges); ``step_s`` composes them
    (a sum, or with asynchronous split pools the longer side plus the sync). GPU-hours count every GPU of
    the run for ``steps`` steps. ``fits`` is the memory check: the trainer's peak per GPU
    (``train_bytes_per_gpu``: the policy's FSDP peak; with PPO plus the critic's model states wherever the
    critic stays on the GPU while the policy trains, i.e. split pools and colocated without ``offload``)
    and an engine holding its weights and at least one sequence."""

    model: str
    gpu: str
    n_gpus: int
    algorithm: str
    colocated: bool
    off_policy_steps: int
    rollouts: int
    prompt: int
    response_mean: float
    response_max: int
    steps: int
    gen_gpus: int
    train_gpus: int
    gen_tp: int
    engines: int
    engine_batch: int
    decode_steps: float
    rebatch: bool
    phases: dict
    phases_low: dict
    phases_high: dict
    step_s: float
    step_s_low: float
    step_s_high: float
    train_bytes_per_gpu: float
    engine_max_batch: int          # an engine's KV room, sequences (kv_batch: not capped at max_num_seqs)
    memory_bytes_per_gpu: float
    fits: bool
    price_usd_per_gpu_hour: float
    engine: str
    warnings: tuple = ()
    moves: dict | None = None
    train_layout: tuple | None = None
    #: What the price is, one of :data:`.catalog.PRICE_KINDS` (:func:`.catalog.price_kind_of`).
    price_kind: str = "list"
    #: The trainer's attention length: packed rollouts' (:func:`~llmsizing.rl_trainer.rollout_attention_seq`).
    attention_seq: int = 0
    #: The trainer's model states per GPU on its layout (weights, gradients, optimizer;
    #: :func:`~llmsizing.rl_trainer.trainer_state_bytes`): what a colocated ``offload`` moves to the host and
    #: back, and what a colocated trainer without it keeps beside the engine. With PPO the critic's too (a
    #: second model of the policy's size on the same layout): twice the policy's.
    state_bytes_per_gpu: float = 0.0
    #: The frozen reference model's 16-bit weights per GPU
    #: (:func:`~llmsizing.rl_trainer.reference_weight_bytes`), sharded as the policy's: what a colocated
    #: ``offload`` moves to the host and back beside the trainer's states (``moves["reference_offload"]``),
    #: and what stays on the GPU without it (in ``train_bytes_per_gpu`` and beside the engine). 0 without a
    #: reference, and with slime's host backup (``weight_backup``), which swaps the reference in from the
    #: host instead.
    reference_bytes_per_gpu: float = 0.0
    #: Whether the trainer's model is a mixture of experts: a trainer timed on a layout then carries the MoE
    #: range (``"moe-layout"``, :func:`~llmsizing.mfu.layout_range_factors` with ``moe=True``; issue 35).
    train_moe: bool = False

    @property
    def train_range_area(self) -> str:
        """The area of ``data/intervals.csv`` whose range the trainer's phases carry (review24b M4): a trainer
        without a layout (FSDP, :func:`~llmsizing.time_cost.training_time`) the end-to-end model's,
        ``"training-inputs"`` (:data:`llmsizing.mfu_inputs.AREA`); one timed on a layout (``train_layout``,
        or a mixture of experts' default) the step model's, ``"training-layout"``
        (:data:`llmsizing.mfu.LAYOUT_RANGE_AREA`), or for a mixture of experts the MoE step's,
        ``"moe-layout"`` (:data:`llmsizing.mfu.MOE_RANGE_AREA`)."""
        from .mfu import layout_range_area
        from .mfu_inputs import AREA

        return AREA if self.train_layout is None else layout_range_area(self.train_moe)

    @property
    def gpu_hours(self) -> float:
        return self.step_s * self.steps * self.n_gpus / 3600

    @property
    def gpu_hours_low(self) -> float:
        return self.step_s_low * self.steps * self.n_gpus / 3600

    @property
    def gpu_hours_high(self) -> float:
        return self.step_s_high * self.steps * self.n_gpus / 3600

    @property
    def days(self) -> float:
        return self.step_s * self.steps / 86400

    @property
    def cost_usd(self) -> float:
        return self.gpu_hours * self.price_usd_per_gpu_hour

    @property
    def generation_share(self) -> float:
        """Generation's share of the sum of the phases (what a framework's timing log would show)."""
        return self.phases["generation"] / sum(self.phases.values())

    def to_frame(self):
        """One row per phase: seconds per step (central, fast, slow) and share of the phases' sum."""
        import pandas as pd

        total = sum(self.phases.values())
        return pd.DataFrame({"seconds": self.phases, "seconds_low": self.phases_low,
                             "seconds_high": self.phases_high,
                             "share": {k: v / total for k, v in self.phases.items()}})


def _trainer(m, g, *, gpus, tokens, seq, price):
    """Seconds (central, fast, slow) of one training pass over ``tokens`` tokens on ``gpus`` GPUs."""
    t = training_time(m, tokens=tokens, gpu=g, n_gpus=gpus, seq=seq, price_usd_per_gpu_hour=price)
    return (t.days * 86400, t.days_low * 86400, t.days_high * 86400), t.warnings


def _sync_s(m, g, node, *, colocated, gpus, gen_tp, offload, state_bytes, bucket_s=0.0, reference_bytes=0.0):
    """``(seconds, moves)``: colocated, the pool's moves of :func:`~llmsizing.rl_trainer.colocated_moves_s`
    summed; split, the 16-bit weights sent over the inter-node link (Tulu 3's NCCL broadcast)."""
    if colocated:
        moves = colocated_moves_s(m, g, node, gpus=gpus, gen_tp=gen_tp, offload=offload,
                                  state_bytes=state_bytes,
                                  sync_bucket_s=bucket_s, reference_bytes=reference_bytes)
        return sum(moves.values()), moves
    w = weights_bytes_per_gpu(m, "bf16", tp=1)
    across = group_link(g, node, size=2, stride=node.gpus_per_node)
    t = collective_time_s("send/recv", w, 2, across)
    return t, {"sync": t}


def _phases(m, g, node, a, gen_gpus, train_gpus, gen_tp, price):
    """Every phase's (central, fast, slow) seconds for one split of the pool."""
    gen, engines, b, steps, max_b, engine = generation_s(
        m, g, gpus=gen_gpus, tp=gen_tp, rollouts=a["rollouts"], prompt=a["prompt"], mean=a["mean"],
        top=a["top"], rebatch=a["rebatch"], max_num_seqs=a["max_num_seqs"], node=node, util=a["util"],
        drain=a["drain"], second_moment=a["e2"])
    seq, att = a["prompt"] + a["top"], a["att"]         # the row; its attention (packed rollouts')
    tokens = a["rollouts"] * (a["prompt"] + a["mean"])
    layout = a["layout"] or default_layout(m, train_gpus, node.gpus_per_node)
    if layout is None:
        upd, warns = _trainer(m, g, gpus=train_gpus, tokens=tokens * a["ppo_epochs"], seq=att, price=price)
        fwd_share = forward_flops_per_token(m, seq=att) / training_flops_per_token(m, seq=att)
    backup = 0.0
    if layout is not None:
        par = layout_parallel(m, layout, train_gpus)
        if a["weight_backup"]:
            backup = weight_backup_s(m, par, reference=a["reference"], gpu=g)
        one, fwd_share = layout_trainer(m, g, node, par, tokens=tokens, rollouts=a["rollouts"], seq=seq,
                                        packing=a["packing"], attention_seq=att)
        upd, warns = tuple(x * a["ppo_epochs"] for x in one), ()
        if a["cpu_optimizer"]:
            adam = cpu_adam_s(m, par, train_gpus, gpu=g)
            fwd_share *= upd[0] / (upd[0] + adam)
            upd = tuple(x + a["ppo_epochs"] * adam for x in upd)
    one_fwd = tuple(x * fwd_share / a["ppo_epochs"] for x in upd)
    ppo = a["algorithm"] == "ppo"
    zero = (0.0, 0.0, 0.0)
    reward = zero
    if a["reward_model"] is not None:
        rm = a["reward_model"]
        r_upd, _ = _trainer(rm, g, gpus=train_gpus, tokens=tokens, seq=att, price=price)
        share = forward_flops_per_token(rm, seq=att) / training_flops_per_token(rm, seq=att)
        reward = tuple(x * share for x in r_upd)
    reward = tuple(x + a["reward_s"] for x in reward)
    p = {"generation": gen, "log_probs": one_fwd, "reference": one_fwd if a["reference"] else zero,
         "values": one_fwd if ppo else zero, "reward": reward,
         "update": tuple(x * (2 if ppo else 1) for x in upd)}
    if a["evaluation"] is not None:
        n_eval, (e_mean, e_top), every = a["evaluation"]
        ev = generation_s(m, g, gpus=gen_gpus, tp=gen_tp, rollouts=n_eval, prompt=a["prompt"], mean=e_mean,
                          top=e_top, rebatch=a["rebatch"], max_num_seqs=a["max_num_seqs"], node=node,
                          util=a["util"], drain=a["drain"],
                          second_moment=response_second_moment(e_mean, e_top))[0]
        p["evaluation"] = tuple(x / every for x in ev)
    return p, (engines, b, steps, max_b, engine, layout, backup), warns


def _compose(p, sync, asynchronous):
    """``(central, fast, slow)`` step seconds: the phases in turn, or generation beside the trainer's side."""
    out = []
    for i in range(3):
        if asynchronous:
            gen_side = ("generation", "evaluation")
            side = sum(v[i] for k, v in p.items() if k not in gen_side)
            out.append(max(sum(p[k][i] for k in gen_side if k in p), side) + sync)
        else:
            out.append(sum(v[i] for v in p.values()) + sync)
    return tuple(out)
