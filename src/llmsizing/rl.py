"""After pre-training: GPUs, hours and memory of an RL post-training run (chapter 19, "After pre-training").

One step of GRPO (Shao et al. 2024, "DeepSeekMath", arXiv:2402.03300, Sec. 4) or PPO (Ouyang et al. 2022;
Schulman et al. 2017) is not one training step but a sequence of phases, as verl (Sheng et al. 2024,
"HybridFlow", arXiv:2409.19256), OpenRLHF (Hu et al. 2024, arXiv:2405.11143) and NeMo RL time them:

1. **generation**: an inference engine (vLLM) writes ``samples_per_prompt`` responses to each of the
   ``prompts_per_step`` prompts. Priced by the serving model (:func:`llmsizing.serve.serving`, chapter 15):
   each engine of ``gen_tp`` GPUs gets its share ``n`` of the rollouts and keeps ``b`` of them in flight (its
   KV capacity, at most ``max_num_seqs``); the step waits for the longest response. With continuous batching
   (``rebatch=True``, what vLLM does) the engine decodes ``max(n x mean / b, longest)`` steps; without it
   (``rebatch=False``: static waves) ``ceil(n / b) x longest`` (:mod:`llmsizing.rl_generation`, which
   says at which batch a step is priced when the longest response sets the count).
2. **log-probabilities**: forward passes of the trainer over every rollout's ``prompt + response`` tokens,
   for the old policy and (if ``reference``) the frozen reference model; PPO adds the critic's values.
3. **reward**: a reward model's forward pass if ``reward_model`` is given, else a rule-based verifier whose
   CPU time (``reward_s``) is given, 0 by default.
4. **update**: ``ppo_epochs`` training passes over the rollouts (PPO adds the critic's update), priced by the
   training model (:func:`llmsizing.time_cost.training_time` at the calibrated MFU, chapter 10), or, given the
   trainer's layout (``train_layout``) or for a mixture of experts, on that layout's own step
   (:mod:`llmsizing.rl_trainer`); the forward passes of phase 2 cost the forward's share of its FLOPs
   (:mod:`llmsizing.flops`). Packed rollouts attend each to itself, so attention is priced at their
   token-weighted mean length, not the row's (:func:`~llmsizing.rl_trainer.rollout_attention_seq`).
5. **weight sync**: the new weights reach the engines. ``colocated`` (verl's and NeMo RL's hybrid engine):
   every GPU rebuilds the full weights ``W`` (an all-gather on the pool's link,
   :func:`llmsizing.network.collective_time_s`), the engine sleeps and wakes (its ``W / gen_tp`` to the host
   and back) and, with ``offload``, the trainer's model states (weights, gradients, optimizer: not its
   activations, which are freed, not moved; with PPO the critic's as well) go to the host and back (over
   the GPU's host link, :func:`llmsizing.network.host_link_gbps`):
   :func:`llmsizing.rl_trainer.colocated_moves_s`. Split pools (OpenRLHF, Tülu 3's NCCL broadcast): the full
   16-bit weights ``W`` cross the network to the engines.

Colocated, the phases run one after the other on all ``n_gpus``. Split, ``gen_gpus`` generate while the rest
train: on-policy the pools wait for each other (the step is the sum); with ``off_policy_steps >= 1``
(asynchronous RL) generation of the next batch overlaps the update, and the step is the longer of the two
plus the sync. The ranges are those of the parts: the serving model's per-token range (leave-one-source-out,
``data/serving_intervals.csv``) on generation and the training MFU's range on the trainer's phases; no RL
figure was fitted. :func:`published_rl` compares both with ``data/rl_published.csv``. A fit on those rows
(:func:`rl_loso`, :func:`rl_interval`, :func:`llmsizing.rl_split.forward_split_interval`) reads only the
rows whose ``calibrate`` column says ``yes`` (:func:`fit_rows`): NeMo RL's performance-summary pages are
NVIDIA NeMo performance-summary tables, which the project keeps out of every fit, range and calibration
(issue 35; the row's ``calibrate_why`` says so), and are shown only as a check against the parts' range.
The response lengths, the run's result (:class:`RLRun`) and each phase's seconds live in
:mod:`llmsizing.rl_phases` (session 24), whose names stay importable from here.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from ._validate import check_bool, check_choice, check_int, check_number
from .catalog import get_gpu, gpu_price, price_kind_of, resolve_model
from .comm import HOST_LINK_GBPS  # noqa: F401  (PCIe Gen4 x16: a call without a GPU; still importable)
from .network import host_link_gbps  # noqa: F401  (the host link rl_run prices, the GPU's: chapter 19)
from .memory import training_memory
from .model import Model
from .network import get_node
from .parallel import Parallel, check_layout
from .rl_trainer import (SLIME_SYNC_BUCKET_S, layout_parallel, reference_weight_bytes, response_second_moment,
                         rollout_attention_seq, trainer_state_bytes)
from .rl_generation import (ENGINE_MEMORY_UTILIZATION, ROLLOUT_MAX_NUM_BATCHED_TOKENS,
                            ROLLOUT_MAX_NUM_SEQS, VERL_ROLLOUT_GPU_MEMORY_UTILIZATION, default_gen_tp,
                            engine_room)
# the response lengths, the run's result and each phase's seconds live in rl_phases; their names stay
# importable from here
from .rl_phases import RLRun, _compose, _phases, _sync_s, _trainer, response_lengths  # noqa: F401

#: The algorithms :func:`rl_run` prices: GRPO (no critic) and PPO (a critic of the policy's size).
ALGORITHMS = ("grpo", "ppo")
#: The cap on the sequences a rollout engine runs at once: verl's rollout default (``max_num_seqs: 1024`` in
#: ``verl/trainer/config/rollout/rollout.yaml``, volcengine/verl commit 035682ed, which sets it for vLLM
#: whatever the GPU). An RL run gets its framework's value, not vLLM's own default, which depends on the GPU
#: (1024 at 70 GiB and more outside the A100 line, else 256:
#: :func:`llmsizing.serve_engine.vllm_default_max_num_seqs`; OpenRLHF's engines, built with vLLM's ``LLM``
#: class without a ``max_num_seqs``, get that). Before session 27 this was 256, labelled vLLM's default.
MAX_NUM_SEQS = ROLLOUT_MAX_NUM_SEQS
#: The rollout engine's largest prefill chunk: verl's ``max_num_batched_tokens: 8192`` (same file).
MAX_NUM_BATCHED_TOKENS = ROLLOUT_MAX_NUM_BATCHED_TOKENS
PHASES = ("generation", "log_probs", "reference", "values", "reward", "update", "weight_sync")
PUBLISHED_CSV = Path(__file__).resolve().parents[2] / "data" / "rl_published.csv"


def rl_run(model: Model | str, *, gpu, n_gpus: int, prompts_per_step: int, samples_per_prompt: int = 16,
           prompt: int = 512, response=4096, steps: int = 1000, algorithm: str = "grpo",
           colocated: bool = True, reference: bool = True, reward_model: Model | str | None = None,
           reward_s: float = 0.0, ppo_epochs: int = 1, gen_tp: int | None = None, gen_gpus: int | None = None,
           off_policy_steps: int = 0, rebatch: bool = True, offload: bool = True,
           max_num_seqs: int = MAX_NUM_SEQS, price_usd_per_gpu_hour: float | None = None, node=None,
           train_layout=None, packing: bool = True, sync_bucket_s: float = 0.0,
           evaluation=None, cpu_optimizer: bool = False, weight_backup: bool = False,
           drain: bool = False) -> RLRun:
    """Time per step by phase, GPU-hours, cost and memory of an RL post-training run (module docstring).

    ``prompts_per_step`` prompts, ``samples_per_prompt`` responses each (GRPO's group), ``prompt`` tokens per
    prompt, ``response`` a length, a ``(mean, longest)`` pair or measured lengths (:func:`response_lengths`).
    ``algorithm`` one of :data:`ALGORITHMS`; ``reference`` a frozen reference model's log-probabilities (the
    KL term); ``reward_model`` a model (name) scored by a forward pass, else a verifier of ``reward_s``
    seconds.
    ``colocated`` one pool switching roles (``offload``: the trainer's states go to the host during
    generation), else split pools: ``gen_gpus`` for the engines (default: the split with the shortest step,
    pools sized for each other) and the rest for the trainer, ``off_policy_steps >= 1`` to overlap them.
    ``gen_tp`` the engine's tensor-parallel size (default: the smallest whose weights fit).
    ``train_layout`` the trainer's ``(tp, cp, ep, pp)`` (NeMo RL's notation; data parallelism takes the rest):
    the update and forward passes are timed on that layout's step (:mod:`llmsizing.rl_trainer`), as is a
    mixture of experts without one (:func:`~llmsizing.rl_trainer.default_layout`); a dense model without one
    keeps the calibrated MFU. ``packing``: rollouts packed into ``seq``-token rows, each attending to itself
    (:func:`~llmsizing.rl_trainer.rollout_attention_seq`); else padded, one rollout per row.
    ``sync_bucket_s`` the software seconds per 512 MiB bucket of a colocated weight update
    (:data:`~llmsizing.rl_trainer.SLIME_SYNC_BUCKET_S` for slime; 0: the gather's bandwidth only).
    ``evaluation = (rollouts, response, every)`` an evaluation generated on the engines every ``every`` steps
    inside the loop (slime's ``--eval-interval``), its time spread over the steps as the ``evaluation``
    phase. ``cpu_optimizer`` (with a layout) the optimizer on the host (Megatron's
    ``--optimizer-cpu-offload``): :func:`~llmsizing.rl_trainer.cpu_adam_s` joins the update.
    ``weight_backup`` (with a layout) slime's host copies of the weights, and with ``reference`` the swaps
    to the reference model and back (:func:`~llmsizing.rl_trainer.weight_backup_s`), join the moves.
    ``drain``: decode steps priced at the engine's draining batch (:mod:`llmsizing.rl_generation`: the
    consistent model, not the default, which agrees better with the published generation times).
    Chapter 19."""
    m = resolve_model(model, moe=True)
    g = get_gpu(gpu)
    n = check_int("n_gpus", n_gpus)
    a = {"rollouts": check_int("prompts_per_step", prompts_per_step) * check_int("samples_per_prompt",
                                                                                  samples_per_prompt),
         "prompt": check_int("prompt", prompt), "algorithm": check_choice("algorithm", algorithm, ALGORITHMS),
         "reference": check_bool("reference", reference), "rebatch": check_bool("rebatch", rebatch),
         "reward_s": check_number("reward_s", reward_s), "ppo_epochs": check_int("ppo_epochs", ppo_epochs),
         "max_num_seqs": check_int("max_num_seqs", max_num_seqs),
         "reward_model": None if reward_model is None else resolve_model(reward_model, moe=True),
         "packing": check_bool("packing", packing), "layout": _check_train_layout(train_layout),
         "evaluation": _check_evaluation(evaluation), "cpu_optimizer": check_bool("cpu_optimizer",
                                                                                     cpu_optimizer),
         "weight_backup": check_bool("weight_backup", weight_backup), "drain": check_bool("drain", drain)}
    bucket_s = check_number("sync_bucket_s", sync_bucket_s)
    a["mean"], a["top"] = response_lengths(response)
    lengths = tuple(response) if isinstance(response, (list, tuple)) and len(response) > 2 else None
    a["e2"] = (sum(v * v for v in lengths) / len(lengths) if lengths
               else response_second_moment(a["mean"], a["top"]))
    a["att"] = (rollout_attention_seq(a["prompt"], a["mean"], a["top"], lengths) if a["packing"]
                else a["prompt"] + a["top"])
    colocated, offload = check_bool("colocated", colocated), check_bool("offload", offload)
    off = check_int("off_policy_steps", off_policy_steps, minimum=0)
    check_int("steps", steps)
    if off and colocated:
        raise ValueError(f"off_policy_steps={off} needs split pools (colocated=False): one pool cannot "
                         "generate and train at once")
    price = gpu_price(g, price_usd_per_gpu_hour)
    node_ = get_node(node, g)
    seq = a["prompt"] + a["top"]
    cap = g.memory_bytes
    # PPO trains a critic of the policy's size on the same GPUs: its model states go to the host and back
    # (or stay beside the engine) as the policy's do, so the states per GPU count both models
    n_models = 2 if a["algorithm"] == "ppo" else 1
    # a frozen reference model's 16-bit weights: on the GPU, or to the host and back with the offload
    # (reference_weight_bytes); slime's host backup swaps them in instead (weight_backup_s)
    ref_on = a["reference"] and not a["weight_backup"]
    if colocated:
        if gen_gpus is not None:
            raise ValueError("gen_gpus applies to split pools (colocated=False); a colocated pool "
                             "generates on all n_gpus")
        # the reference's frozen weights stay too (slime swaps them through its host backup instead)
        ref_b = reference_weight_bytes(m, n, a["layout"]) if ref_on else 0.0
        train_bytes = (_train_bytes(m, n, seq, n_models if not offload else 1)
                       + (0.0 if offload or not ref_on else reference_weight_bytes(m, n)))   # (FSDP's, below)
        states = (0.0 if offload
                  else n_models * trainer_state_bytes(m, n, a["layout"], a["cpu_optimizer"]) + ref_b)
        # without offload the states stay beside the engine, not the peak
        a["util"] = ENGINE_MEMORY_UTILIZATION - states / cap
        if a["util"] <= 0.05:
            raise ValueError(f"colocated without offload: the trainer's model states, {states / 2**30:.1f} "
                             f"GiB per GPU, leave no room for the engine on {g.name}; use offload=True or "
                             "more GPUs")
        tp = (_check_tp(gen_tp, n, m) if gen_tp is not None
              else default_gen_tp(m, g, a["prompt"], a["mean"], node_, n, a["max_num_seqs"]))
        splits = [(n, n, tp)]
    else:
        a["util"] = ENGINE_MEMORY_UTILIZATION
        if n < 2:
            raise ValueError("split pools need n_gpus >= 2 (one for each pool)")
        tp = (_check_tp(gen_tp, n - 1, m) if gen_tp is not None
              else default_gen_tp(m, g, a["prompt"], a["mean"], node_, n - 1, a["max_num_seqs"]))
        if gen_gpus is not None:
            gg = check_int("gen_gpus", gen_gpus, maximum=n - 1)
            if gg % tp:
                raise ValueError(f"gen_gpus={gg} must be a multiple of gen_tp={tp}")
            splits = [(gg, n - gg, tp)]
        else:
            k = (n - 1) // tp
            picks = sorted({max(1, round(k * i / 16)) for i in range(1, 17)})
            splits = [(j * tp, n - j * tp, tp) for j in picks if n - j * tp >= 1]
    best = None
    for gg, tg, tp_ in splits:
        # the trainer's peak: the policy's, plus the critic's model states wherever both models stay on
        # the GPU while the policy trains (split pools always; colocated without offload)
        try:
            p, eng, warns = _phases(m, g, node_, a, gg, tg, tp_, price)
        except ValueError:
            if len(splits) > 1:
                continue    # this split's trainer pool does not take the (given or default) layout
            raise
        # (the peak is FSDP's, as the memory check lays it out; the trip the layout's, as the states')
        ref_tg = reference_weight_bytes(m, tg, a["layout"]) if ref_on else 0.0    # (colocated: ref_b)
        tb = (train_bytes if colocated
              else _train_bytes(m, tg, seq, n_models) + (reference_weight_bytes(m, tg) if ref_on else 0.0))
        sb = n_models * trainer_state_bytes(m, tg, a["layout"], a["cpu_optimizer"])
        sync, moves = _sync_s(m, g, node_, colocated=colocated, gpus=n, gen_tp=tp_, offload=offload,
                              state_bytes=sb, bucket_s=bucket_s, reference_bytes=ref_tg)
        if eng[6]:
            moves = {**moves, "weight_backup": eng[6]}
            sync += eng[6]
        step = _compose(p, sync, asynchronous=off > 0)
        fits = tb <= cap and eng[3] >= 1
        key = (not fits, step[0])
        if best is None or key < best[0]:
            best = (key, gg, tg, tp_, p, eng, warns, sync, step, tb, fits, moves, sb, ref_tg)
    if best is None:
        raise ValueError(f"train_layout={a['layout']} fits none of the split pools of n_gpus={n} (give "
                         "gen_gpus= or train_layout=)")
    _, gg, tg, tp_, p, eng, warns, sync, step, tb, fits, moves, sb, ref_tg = best
    if eng[5] is not None:     # timed on a layout, but the memory check lays out FSDP only (_train_bytes)
        warns = (*warns, f"the trainer is timed on its layout {eng[5]} (tp, cp, ep, pp) but its memory "
                 f"(train_bytes_per_gpu, fits) is checked as FSDP over {tg} GPUs, not on that layout")
    phases = {k: v[0] for k, v in p.items()} | {"weight_sync": sync}
    low = {k: v[1] for k, v in p.items()} | {"weight_sync": sync}
    high = {k: v[2] for k, v in p.items()} | {"weight_sync": sync}
    return RLRun(m.name, g.name, n, a["algorithm"], colocated, off, a["rollouts"], a["prompt"], a["mean"],
                 a["top"], steps, gg, tg, tp_, eng[0], eng[1], eng[2], a["rebatch"], phases, low, high,
                 step[0], step[1], step[2], tb, eng[3], cap, fits, price, eng[4], tuple(warns), moves,
                 eng[5], price_kind_of(g, price), a["att"], sb, ref_tg, train_moe=m.is_moe)


def _check_evaluation(evaluation):
    """``(rollouts, (mean, longest), every)`` from ``evaluation=(rollouts, response, every)``, or ``None``."""
    if evaluation is None:
        return None
    try:
        n, resp, every = evaluation
    except (TypeError, ValueError):
        raise TypeError("evaluation must be (rollouts, response, every_steps), e.g. (480, (10000.0, 16384), "
                        f"20); got {evaluation!r}") from None
    return (check_int("evaluation[0] (rollouts)", n), response_lengths(resp),
            check_int("evaluation[2] (every)", every))


def _check_train_layout(layout):
    if layout is None:
        return None
    if isinstance(layout, Parallel):
        return (layout.tp, layout.cp, layout.ep, layout.pp)
    try:
        vals = tuple(layout)
    except TypeError:
        raise TypeError(f"train_layout must be (tp, cp, ep, pp) or a Parallel, got {type(layout).__name__}") \
            from None
    if len(vals) != 4:
        raise ValueError(f"train_layout must be 4 whole numbers (tp, cp, ep, pp), got {vals!r}")
    names = ("tp", "cp", "ep", "pp")
    return tuple(check_int(f"train_layout[{i}] ({k})", v) for i, (k, v) in enumerate(zip(names, vals)))


def _check_tp(tp, limit, m):
    tp = check_int("gen_tp", tp)
    if tp > limit:
        raise ValueError(f"gen_tp={tp} is more GPUs than the generation pool has ({limit})")
    try:
        check_layout(m, tp=tp)
    except ValueError as e:
        raise ValueError(f"gen_tp={tp}: {e}") from None
    return tp


@functools.lru_cache(maxsize=256)
def _train_bytes(m, gpus, seq, resident_models=1):
    """The trainer's peak per GPU: FSDP (ZeRO-3) over ``gpus`` GPUs, one sequence per micro-batch, full
    recomputation (verl's and OpenRLHF's defaults for long responses),
    :func:`~llmsizing.memory.training_memory`. ``resident_models = 2`` (PPO with its critic on the GPU while
    the policy trains: split pools, or colocated without offload) adds the critic's model states, a model of
    the policy's size sharded the same way (:func:`~llmsizing.rl_trainer.trainer_state_bytes` without a
    layout, 16 bytes per parameter over ``gpus``); its activations are freed, as the two models train one
    after the other (verl's ``RayPPOTrainer`` colocates its worker groups, the critic's included, and runs
    ``update_critic`` then ``update_actor``; the critic's own update has the same peak, roles swapped)."""
    par = Parallel(dp=gpus, zero=3)
    peak = training_memory(m, batch=1, seq=seq, recompute="full", parallel=par).total_bytes
    return peak + (resident_models - 1) * trainer_state_bytes(m, gpus)


def _row_layout(r):
    """A CSV row's published trainer layout ``(tp, cp, ep, pp)``, or ``None`` when not published."""
    import pandas as pd

    vals = (r.train_tp, r.train_cp, r.train_ep, r.train_pp)
    return None if any(pd.isna(v) for v in vals) else tuple(int(v) for v in vals)


def row_run(r, drain: bool = False) -> RLRun:
    """:func:`rl_run` of one checked row (an ``itertuples`` row) of ``data/rl_published.csv``, from the row's
    own setup (data, not the framework's name): slime's bucketed update, a CPU optimizer, slime's host copies
    of the weights (their own column), an evaluation inside the loop. ``drain``: as :func:`rl_run`'s."""
    import pandas as pd

    ev = None if pd.isna(r.eval_every) else (int(r.eval_rollouts), (float(r.eval_response_mean),
                                                                    int(r.eval_response_max)),
                                             int(r.eval_every))
    return rl_run(r.model, gpu=r.gpu, n_gpus=int(r.n_gpus), prompts_per_step=int(r.rollouts_per_step),
                  samples_per_prompt=1, prompt=int(r.prompt_tokens),
                  response=(float(r.response_mean), int(r.response_max)), steps=1,
                  colocated=r.colocated == "yes", off_policy_steps=int(r.off_policy_steps),
                  gen_tp=None if pd.isna(r.gen_tp) else int(r.gen_tp), reference=bool(r.reference == "yes"),
                  train_layout=_row_layout(r),
                  sync_bucket_s=SLIME_SYNC_BUCKET_S if r.weight_sync == "bucketed" else 0.0, evaluation=ev,
                  cpu_optimizer=r.optimizer_offload == "cpu", weight_backup=r.weight_backup == "yes",
                  drain=drain)


def fit_rows(published):
    """The rows of ``published`` (``data/rl_published.csv`` or :func:`published_rl`'s frame) that a fit may
    use: ``checked == "yes"`` (the row gives every input of a step) and ``calibrate == "yes"``. The data
    decides, not a framework's name: a row whose source is an NVIDIA NeMo / Megatron-Bridge performance
    summary says ``calibrate = no`` and why (``calibrate_why``; issue 35), and stays a check only. A frame
    without the ``calibrate`` column is refused (ValueError): it cannot say which rows may be fitted."""
    return published[(published["checked"] == "yes") & may_calibrate(published)]


def may_calibrate(frame):
    """A boolean mask over ``frame``'s rows: ``calibrate == "yes"`` (:func:`fit_rows`). ValueError when the
    column is missing or holds anything but ``yes``/``no``."""
    if "calibrate" not in frame.columns:
        raise ValueError("published: no 'calibrate' column (yes/no per row, data/rl_published.csv): a fit "
                         "reads only the rows marked calibrate=yes")
    bad = sorted(set(frame["calibrate"].dropna()) - {"yes", "no"})
    if bad or frame["calibrate"].isna().any():
        raise ValueError(f"published['calibrate'] must be 'yes' or 'no' on every row, got {bad or 'a blank'}")
    return frame["calibrate"] == "yes"


def published_rl():
    """``data/rl_published.csv`` beside :func:`rl_run`'s prediction for each row that gives its setup
    (``checked == "yes"``): ``predicted_step_s``, its ``low``/``high`` (the parts' range) and ``inside``; the
    ratio is published over predicted. Every row is out of sample: nothing in :func:`rl_run` was fitted on
    them. The ``calibrate`` column says which rows a fit may read (:func:`fit_rows`); the others, NeMo RL's
    performance-summary pages, are a check against the parts' range only."""
    import pandas as pd

    df = pd.read_csv(PUBLISHED_CSV)
    rows = []
    for r in df.itertuples():
        if r.checked != "yes":
            rows.append({})
            continue
        run = row_run(r)
        mv = run.moves or {}
        rows.append({"predicted_sync_only_s": mv.get("sync", run.phases["weight_sync"]),
                     "predicted_offload_s": sum(v for k, v in mv.items() if k != "sync"),
                     "predicted_step_s": run.step_s, "low": run.step_s_low, "high": run.step_s_high,
                     "generation_share": run.generation_share, "fits": run.fits,
                     **{f"predicted_{k}_s": v for k, v in run.phases.items()},
                     **{f"low_{k}_s": v for k, v in run.phases_low.items()},
                     **{f"high_{k}_s": v for k, v in run.phases_high.items()}})
    out = pd.concat([df, pd.DataFrame(rows, index=df.index)], axis=1)
    out["ratio"] = out["step_s"] / out["predicted_step_s"]
    out["inside"] = (out["step_s"] >= out["low"]) & (out["step_s"] <= out["high"])
    return out


def published_forward_ratios():
    """Published seconds of the forward-only passes over the update's, per row of ``data/rl_published.csv``
    that gives them (``log_probs``: the policy's; ``reference``), beside the forward's FLOP share of an
    update with full recomputation (1/4 in the limit: :func:`llmsizing.flops.training_flops_per_token`)
    that :func:`rl_run` charges. Chapter 19."""
    import pandas as pd

    d = pd.read_csv(PUBLISHED_CSV)
    d = d[d["published_log_probs_s"].notna() & d["published_update_s"].notna()].copy()
    d["log_probs_ratio"] = d["published_log_probs_s"] / d["published_update_s"]
    d["reference_ratio"] = d["published_reference_s"] / d["published_update_s"]
    d["flop_share"] = 0.25
    return d[["run", "framework", "published_log_probs_s", "published_reference_s", "published_update_s",
              "log_probs_ratio", "reference_ratio", "flop_share", "source"]].reset_index(drop=True)


def rl_loso(published=None):
    """What a one-number correction fitted on the published step times would do for a source it never saw
    (:func:`llmsizing.intervals.loso_residuals`, sources by :func:`~llmsizing.intervals.source_key`): per
    row a fit may read (:func:`fit_rows`), the factor ``exp(median log ratio)`` of the *other* sources' rows,
    the out-of-source ratio (published over corrected prediction) and whether the parts' range times that
    factor holds the row. Since session 24 the rows marked ``calibrate = no`` (NeMo RL's performance-summary
    pages, issue 35) are neither fitted nor returned: two sources are left, so each factor is the other
    source's median. ValueError with fewer than two sources."""
    import numpy as np

    from .intervals import loso_residuals, source_key

    d = published_rl() if published is None else published
    d = fit_rows(d).copy()
    d["source_key"] = [source_key(s) for s in d["source"]]
    if d["source_key"].nunique() < 2:
        raise ValueError(f"the RL rows a fit may read (calibrate=yes) come from {d['source_key'].nunique()} "
                         "source(s): leaving one out needs at least 2")
    log_r = np.log(d["ratio"].to_numpy(float))

    def fit_predict(train, test):
        return np.full(int(test.sum()), np.median(log_r[train]))

    res = loso_residuals(log_r, d["source_key"].to_numpy(object), fit_predict)
    factor = np.exp(log_r - res)
    d["factor"] = factor
    d["loso_ratio"] = np.exp(res)
    d["inside_corrected"] = ((d["step_s"] >= d["low"] * factor) & (d["step_s"] <= d["high"] * factor))
    return d


#: Nominal coverages tried by :func:`rl_interval`, highest first: the book's 80% and the steps below it.
RL_COVERAGES = (0.8, 0.7, 0.6, 0.5)


@dataclass(frozen=True)
class RLInterval:
    """The RL step's range measured by leaving whole sources out (:func:`rl_interval`): a new run's published
    step lies within ``low``..``high`` times :func:`rl_run`'s ``step_s`` at nominal ``coverage``;
    ``measured_coverage`` is the share of the ``n_rows`` checked rows inside the interval computed without
    their source, ``median_width`` the median ``high / low`` of those intervals."""

    low: float
    high: float
    coverage: float
    measured_coverage: float
    median_width: float
    n_rows: int
    n_sources: int


def rl_interval(coverage: float | None = None, published=None) -> RLInterval:
    """A one-factor correction (the median of ``log(published / predicted)``) with conformal bounds, sources
    as the units, checked by a nested leave-one-source-out (:func:`llmsizing.intervals.loso_check`). Nested,
    each fold keeps ``S - 1`` sources, and a bound is finite only with :func:`~llmsizing.intervals.min_units`
    of them, so ``coverage=None`` takes the highest of :data:`RL_COVERAGES` the sources allow
    (:func:`~llmsizing.intervals.nested_min_units`: 9 + 1 for 80%;
    5 sources allow 60%). Nothing is widened by hand.

    Only the rows a fit may read enter (:func:`fit_rows`: ``calibrate == "yes"``). Since session 24 NeMo RL's
    performance-summary pages are marked ``calibrate = no`` (NVIDIA NeMo performance-summary tables stay out
    of every fit and range, issue 35), which leaves two sources (Miles, verl's DeepSeek page): with the
    shipped data this function raises ValueError, and chapter 19 states an RL step with the parts' range
    (:func:`rl_run`'s ``step_s_low``/``step_s_high``) and no RL-specific coverage. It returns a range again
    when enough sources that may be fitted are added to ``data/rl_published.csv``."""
    import numpy as np

    from .intervals import median_factor_check, nested_min_units, source_key

    d = published_rl() if published is None else published
    d = fit_rows(d)
    y = np.log(d["ratio"].to_numpy(float))
    src = np.array([source_key(s) for s in d["source"]], dtype=object)
    n_src = len(set(src))
    if coverage is None:
        ok = [c for c in RL_COVERAGES if n_src >= nested_min_units(c)]
        if not ok:
            low = RL_COVERAGES[-1]
            raise ValueError(f"the published RL rows a fit may read (calibrate=yes, data/rl_published.csv) "
                             f"come from {n_src} source{'s' * (n_src != 1)}: a nested check needs "
                             f"{nested_min_units(low)} (at {low:.0%}, the lowest of RL_COVERAGES); rows "
                             "marked calibrate=no are a check only")
        coverage = ok[0]
    elif n_src < 2:
        raise ValueError(f"the published RL rows a fit may read (calibrate=yes) come from {n_src} source(s): "
                         "leaving one out needs at least 2")

    chk, lo, hi = median_factor_check(y, src, coverage)
    return RLInterval(lo, hi, coverage, chk.measured_coverage, chk.median_width, len(y), n_src)


#: Number words for :class:`RLChecked`'s sentence on the near misses ("Four rows miss").
_COUNT_WORDS = ("No", "One", "Two", "Three", "Four", "Five", "Six", "Seven", "Eight", "Nine", "Ten")


@dataclass(frozen=True)
class RLChecked:
    """The checked rows of ``data/rl_published.csv`` against the parts' range (:func:`rl_checked`): counts,
    the ratio (published / predicted) median, min and max, split into NeMo RL's check-only rows
    (``calibrate = no``; ``check_median`` None without any) and the rows a fit may read; ``near_runs``: the
    rows just above the slow end (within ``near``), each named with its release.
    Chapter 19, "Checked against published runs"."""

    n_rows: int
    inside: int
    ratio_median: float
    ratio_min: float
    ratio_max: float
    check_rows: int
    check_inside: int
    check_median: float | None
    check_above: int
    check_below: int
    fit_rows: int
    fit_inside: int
    near: float
    near_runs: tuple

    def near_sentence(self) -> str:
        """The chapter's sentence on the near misses, e.g. "Two rows miss only just, ...: A and B. They stay
        outside"."""
        n = len(self.near_runs)
        word = _COUNT_WORDS[n] if n < len(_COUNT_WORDS) else f"{n:,}"
        few = f"{word} row misses" if n <= 1 else f"{word} rows miss"
        runs = self.near_runs
        listed = (", ".join(runs[:-1]) + " and " + runs[-1]) if n > 1 else "".join(runs)
        return (f"{few} only just, by less than {self.near:.0%} above the slow end of the range"
                + (f": {listed}. {'It stays' if n == 1 else 'They stay'} outside" if n else ""))


def rl_checked(published=None, near: float = 0.03) -> RLChecked:
    """Summarise :func:`published_rl`'s checked rows (``checked == "yes"``) against the parts' range
    (:class:`RLChecked`). ``near`` (0 to 1): a row "just above" lies over ``high`` by at most that share; a
    row named without its release (NeMo RL v0.4's) gets the ``vX.Y`` its ``as_of`` holds. ValueError for a
    ``near`` out of range, a frame without checked rows, or two near misses the names cannot tell apart."""
    import pandas as pd

    near = check_number("near", near, maximum=1.0, allow_equal=True)
    d = published_rl() if published is None else published
    chk = d[d["checked"] == "yes"]
    if chk.empty:
        raise ValueError("published: no checked rows (checked == 'yes') to compare")
    check, fit = chk[~may_calibrate(chk)], chk[may_calibrate(chk)]
    hit = chk[(chk["step_s"] > chk["high"]) & (chk["step_s"] <= chk["high"] * (1 + near))]
    rel = hit["as_of"].str.extract(r"(v\d+\.\d+)")[0]
    names = tuple(r if "(v0." in r or pd.isna(v) else f"{r} ({v})" for r, v in zip(hit["run"], rel))
    if len(set(names)) != len(names):
        raise ValueError(f"two near misses carry the same name: {names}")
    r, s = chk["ratio"], check["step_s"]
    above, below = (s > check["high"]).sum(), (s < check["low"]).sum()
    return RLChecked(len(chk), int(chk["inside"].sum()), float(r.median()), float(r.min()), float(r.max()),
                     len(check), int(check["inside"].sum()),
                     float(check["ratio"].median()) if len(check) else None, int(above), int(below),
                     len(fit), int(fit["inside"].sum()), near, names)


@dataclass(frozen=True)
class HostTrip:
    """One checked row's host trips (:func:`row_host_trip`, chapter 19): the trainer's states on one GPU and
    per parameter; the trainer's and the reference's trips :func:`rl_run` prices; ``optimizer_count_s``, how
    far the trainer's trip moves when the optimizer's bytes per parameter count 4 more or fewer (ZeRO's 12,
    Megatron-Core's table 16, NeMo RL's offload 8) spread over the data-parallel ranks; ``third_copy_s``, one
    more copy of the reference's weights one way (NeMo RL's swap moves three, rl_run prices two);
    ``inside_counted``: the row inside the parts' range with the trip shorter / longer by
    ``optimizer_count_s`` (both ends move); ``inside_third``: with ``third_copy_s`` added."""

    state_bytes_per_gpu: float
    bytes_per_param: float
    trainer_offload_s: float
    optimizer_count_s: float
    reference_offload_s: float
    third_copy_s: float
    inside_counted: tuple
    inside_third: bool


def row_host_trip(r) -> HostTrip:
    """:class:`HostTrip` of ``r``, a checked row (``itertuples``) of :func:`published_rl` with a published
    trainer layout and both host trips priced; ValueError otherwise."""
    run = row_run(r)
    if run.train_layout is None or not {"trainer_offload", "reference_offload"} <= set(run.moves or {}):
        raise ValueError(f"row {r.run!r}: needs a published trainer layout and both host trips")
    m = resolve_model(r.model)
    trip, ref = run.moves["trainer_offload"], run.moves["reference_offload"]
    bpp = run.state_bytes_per_gpu / m.n_params
    err = trip * (4 / layout_parallel(m, run.train_layout, run.train_gpus).dp) / bpp
    return HostTrip(run.state_bytes_per_gpu, bpp, trip, err, ref, ref / 2,
                    tuple(bool(r.low + e <= r.step_s <= r.high + e) for e in (-err, err)),
                    bool(r.low + ref / 2 <= r.step_s <= r.high + ref / 2))


__all__ = ["ALGORITHMS", "ENGINE_MEMORY_UTILIZATION", "MAX_NUM_BATCHED_TOKENS", "MAX_NUM_SEQS", "PHASES",
           "RL_COVERAGES", "RLInterval", "RLRun", "VERL_ROLLOUT_GPU_MEMORY_UTILIZATION", "engine_room",
           "response_lengths",
           "rl_run", "row_run", "fit_rows", "may_calibrate", "published_rl", "rl_loso", "rl_interval",
           "published_forward_ratios", "RLChecked", "rl_checked", "HostTrip", "row_host_trip"]
