"""DDP, FSDP and ZeRO-3 side by side for one LoRA/QLoRA fine-tune (chapter 16, "Over several GPUs"), moved
out of :mod:`llmsizing.finetune_time` (issue 34, audit34 item 8) when its table took the range of the hours.

Each recipe's memory per GPU is :func:`~llmsizing.finetune_sharded.finetune_memory_per_gpu`'s, its traffic
:func:`~llmsizing.finetune_time.finetune_communication`'s and its time
:func:`~llmsizing.finetune_time.finetune_time`'s.
The hours, GPU-hours and dollars come with the stated 80% range of a fine-tune's hours
(:attr:`~llmsizing.finetune_time.FinetuneTime.hours_range`: the method's group's range in
:data:`~llmsizing.finetune_time.GROUP_RANGES`, QLoRA's or LoRA's since session 43, leave-one-source-out
conformal bounds of published / predicted step times; ``data/intervals.csv``, area ``fine-tuning-base``). One
range for every recipe: the published rows give no separate range per strategy, so the range says how far the
model's hours may sit from a run's, not how the recipes differ from each other.
"""

from __future__ import annotations

from ._validate import check_fraction
from .catalog import get_gpu
from .finetune_sharded import STRATEGIES, finetune_memory_per_gpu
from .finetune_time import finetune_communication, finetune_time
from .model import Model


def strategy_table(model: Model | str, gpu, *, n_gpus: int, method: str = "lora", batch: int = 1, seq: int,
                   tokens: float, epochs: float = 1.0, grad_accum: int = 1, rank: int = 16,
                   recompute: str = "full", usable_fraction: float = 0.9, **kw):
    """DDP, FSDP and ZeRO-3 side by side for one fine-tune on ``n_gpus`` GPUs: per-GPU memory, whether it fits
    ``usable_fraction`` of the GPU, the bytes each GPU sends per step, the step time and the run's hours,
    days, GPU-hours and dollars, each of the last with its 80% range (``hours_low``/``hours_high``,
    ``gpu_hours_low``/``gpu_hours_high``, ``cost_usd_low``/``cost_usd_high``; ``None`` for full fine-tuning,
    which the published rows do not bound), and ``range_group``, the base whose range they take. A DataFrame
    indexed by strategy; shown in chapter 16."""
    import pandas as pd

    g = get_gpu(gpu)
    frac = check_fraction("usable_fraction", usable_fraction)
    rows = []
    for s in STRATEGIES:
        mem = finetune_memory_per_gpu(model, n_gpus=n_gpus, strategy=s, method=method, batch=batch, seq=seq,
                                      rank=rank, recompute=recompute)
        t = finetune_time(model, gpu=g, method=method, tokens=tokens, epochs=epochs, seq=seq, batch=batch,
                          grad_accum=grad_accum, n_gpus=n_gpus, strategy=s, rank=rank, recompute=recompute,
                          **kw)
        sent = 0.0
        if method != "full":
            sent = finetune_communication(model, g, n_gpus=n_gpus, strategy=s, method=method, rank=rank,
                                          grad_accum=grad_accum).bytes_sent_per_step
        ends = {f"{k}_{end}": v for k, pair in (("hours", t.hours_range), ("gpu_hours", t.gpu_hours_range),
                                                ("cost_usd", t.cost_usd_range))
                for end, v in zip(("low", "high"), pair or (None, None))}
        rows.append({"strategy": s, "memory_per_gpu_bytes": mem.total_bytes,
                     "fits": bool(mem.total_bytes <= frac * g.memory_bytes), "sent_per_step_bytes": sent,
                     "step_s": t.step_s, "exposed_comm_s": t.exposed_comm_s, "hours": t.hours,
                     "days": t.days, "gpu_hours": t.gpu_hours, "cost_usd": t.cost_usd, **ends,
                     "range_group": t.range_group})
    return pd.DataFrame(rows).set_index("strategy")
