"""The rollout's generation in an RL step (chapter 19): engines of ``tp`` GPUs write the rollouts.

Each engine gets its share ``n`` of the rollouts and keeps ``b`` of them in flight: its KV room at the mean
length (:func:`llmsizing.serve_calibration.serving_range`), at most ``max_num_seqs`` and ``n``. With
continuous batching (vLLM) it decodes ``max(n x mean / b, longest)`` steps; in static waves
``ceil(n / b) x longest``. Prefill runs in ``ceil(n / b)`` batches of ``b``.

**Which batch a decode step is priced at.** By default (``drain=False``) every step is priced at the engine's
full batch ``b``. When the longest response sets the step count (``longest > n x mean / b``), the batch in
fact drains as responses finish: the mean in flight over the steps is ``n x mean / steps``, and the
survivors are the long responses, at the token-weighted mean context ``prompt + E[s^2] / (2 mean)``
(:func:`llmsizing.rl_trainer.response_second_moment`). ``drain=True`` prices the steps so (exact for a
step time linear in the batch and the context; a lower bound for the roofline's ``max``). It is the
consistent model, and it makes generation grow with the mean at a fixed cap, which the full-batch charge
does not: a shorter mean fits a larger ``b`` whose slower steps the longest response then pays throughout
(DeepSeek-R1-Zero's recipe at a 32,768 cap: a 2,000-token mean gives a longer rollout than a 4,000-token
one). It is not the default because it agrees worse with the two generation times published beside a
checked step (``data/rl_published.csv``: Miles' Qwen3-30B-A3B on 8 MI300X and verl's DeepSeek V3 on 96
H20; ``tests/test_rl_generation.py``): a real engine's tail costs more than an ideal drain, and the full
batch's charge stands in for it. Compare runs at the same mean, not across means at one cap.
"""

from __future__ import annotations

import math

from .serve_calibration import serving_range

#: The rollout engine's cap on running sequences and its largest prefill chunk (tokens), as verl's rollout
#: config sets them for vLLM whatever the GPU: ``max_num_seqs: 1024``, ``max_num_batched_tokens: 8192``
#: (``verl/trainer/config/rollout/rollout.yaml``, volcengine/verl commit 035682ed). ``llmsizing.rl`` exports
#: them as ``MAX_NUM_SEQS`` and ``MAX_NUM_BATCHED_TOKENS``.
ROLLOUT_MAX_NUM_SEQS = 1024
ROLLOUT_MAX_NUM_BATCHED_TOKENS = 8192
#: The share of each GPU's memory the rollout engine may take (vLLM's ``gpu_memory_utilization``): vLLM's own
#: default, 0.9 (``EngineArgs``), since the trainer's states are on the host (colocated with offload) or on
#: the other pool (split); a colocated trainer that keeps its states takes them off it (``llmsizing.rl``).
#: Not verl's rollout default, :data:`VERL_ROLLOUT_GPU_MEMORY_UTILIZATION`: frameworks and recipes set their
#: own, and chapter 19 says what verl's would leave.
ENGINE_MEMORY_UTILIZATION = 0.9
#: verl's rollout ``gpu_memory_utilization: 0.5`` (the same ``rollout.yaml`` at commit 035682ed).
VERL_ROLLOUT_GPU_MEMORY_UTILIZATION = 0.5
#: The engine's tensor-parallel degrees tried when ``gen_tp`` is not given.
GEN_TP_CHOICES = (1, 2, 4, 8, 16, 32, 64)


def default_gen_tp(m, g, prompt, mean, node, max_tp, max_num_seqs: int = ROLLOUT_MAX_NUM_SEQS) -> int:
    """The smallest of :data:`GEN_TP_CHOICES` (at most ``max_tp``) whose engine (configured with
    ``max_num_seqs`` and :data:`ROLLOUT_MAX_NUM_BATCHED_TOKENS`) holds the weights and one sequence of
    ``prompt + mean`` tokens; ValueError when none does."""
    for tp in GEN_TP_CHOICES:
        if tp > max_tp:
            break
        try:
            s = serving_range(m, g, tp=tp, prompt=prompt, output=max(1, round(mean)), batch=1, node=node,
                              max_num_seqs=max_num_seqs,
                              max_num_batched_tokens=ROLLOUT_MAX_NUM_BATCHED_TOKENS)
        except ValueError:
            continue
        if s.central.max_batch >= 1:
            return tp
    raise ValueError(f"the engine does not fit: {m.name} at prompt + response = {prompt:,} + {mean:,.0f} "
                     f"tokens on {g.name} needs more than {max_tp} GPUs per engine (give a larger pool, "
                     "shorter sequences or gen_tp=)")


def engine_room(model, gpu, *, tp: int, prompt: int, mean: float,
                gpu_memory_utilization: float = ENGINE_MEMORY_UTILIZATION,
                max_num_seqs: int = ROLLOUT_MAX_NUM_SEQS, node=None) -> int:
    """How many sequences of ``prompt + mean`` tokens a rollout engine of ``tp`` GPUs has KV room for, at
    ``gpu_memory_utilization`` of each GPU's memory (the engine's ``kv_batch``; ``max_num_seqs`` sets the
    profiled logits, and :func:`generation_s` caps the batch it keeps in flight at it and at the engine's
    share of the rollouts)."""
    return serving_range(model, gpu, tp=tp, prompt=prompt, output=max(1, round(mean)), batch=1, node=node,
                         gpu_memory_utilization=gpu_memory_utilization, max_num_seqs=max_num_seqs,
                         max_num_batched_tokens=ROLLOUT_MAX_NUM_BATCHED_TOKENS).central.kv_batch


def generation_s(m, g, *, gpus, tp, rollouts, prompt, mean, top, rebatch, max_num_seqs, node, util,
                 drain: bool = False, second_moment: float | None = None):
    """``((central, fast, slow) seconds, engines, b, decode steps, KV room, engine name)`` to generate the
    rollouts on ``gpus`` GPUs in engines of ``tp`` (module docstring). ``drain``: decode steps at the mean
    in-flight batch and the token-weighted context (``second_moment``: ``E[s^2]`` of the responses)."""
    engines = gpus // tp
    n = math.ceil(rollouts / engines)
    out = max(1, round(mean))
    # the engine as the framework configures it (ROLLOUT_MAX_NUM_BATCHED_TOKENS and the run's max_num_seqs):
    # its profiled logits and prefill chunk, not vLLM's per-GPU defaults
    kw = dict(tp=tp, prompt=prompt, node=node, gpu_memory_utilization=util, max_num_seqs=max_num_seqs,
              max_num_batched_tokens=ROLLOUT_MAX_NUM_BATCHED_TOKENS)
    probe = serving_range(m, g, output=out, batch=1, **kw).central
    b = max(1, min(n, probe.max_batch))       # max_batch: the KV room, capped at max_num_seqs (issue 38)
    r = serving_range(m, g, output=out, batch=b, **kw)
    s = r.central
    steps = max(n * mean / b, top) if rebatch else math.ceil(n / b) * top
    d = r
    if drain:
        b_dec = max(1, min(b, round(n * mean / steps)))
        out_dec = min(top, max(1, round((second_moment or mean * mean) / mean)))
        d = serving_range(m, g, output=out_dec, batch=b_dec, **kw)
    prefill = math.ceil(n / b) * s.batch_prefill_s
    decode = steps * d.central.decode_step_s
    fast = prefill * r.itl_s[0] / s.itl_s + decode * d.itl_s[0] / d.central.itl_s
    slow = prefill * r.itl_s[1] / s.itl_s + decode * d.itl_s[1] / d.central.itl_s
    return (prefill + decode, fast, slow), engines, b, steps, probe.kv_batch, s.engine


__all__ = ["ENGINE_MEMORY_UTILIZATION", "GEN_TP_CHOICES", "ROLLOUT_MAX_NUM_BATCHED_TOKENS",
           "ROLLOUT_MAX_NUM_SEQS", "VERL_ROLLOUT_GPU_MEMORY_UTILIZATION", "default_gen_tp", "engine_room",
           "generation_s"]
