"""LoRA/QLoRA (and full fine-tuning) memory over several GPUs (chapter 16; issue 22), split out of
:mod:`llmsizing.finetune_time` (issue 32), which re-exports every name: the per-GPU memory of a DDP, FSDP or
ZeRO-3 fine-tune, the unit FSDP gathers, and the longest sequence and largest micro-batch that fit. The time
of the step, its collectives and the calibration are :mod:`llmsizing.finetune_time`'s; a step's memory on one
GPU is :mod:`llmsizing.finetune`'s.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._validate import check_choice, check_fraction, check_int
from .catalog import get_gpu, resolve_model
from .finetune import METHODS, block_matrices, finetune_memory
from .memory import default_overhead_bytes
from .model import Model
from .parallel import Parallel
from .precision import DTYPE_BYTES


#: How LoRA/QLoRA (and full fine-tuning) are spread over several GPUs (module docstring).
STRATEGIES = ("ddp", "fsdp", "zero3")


def _base_dtype(method: str) -> str:
    return "nf4" if method == "qlora" else "bf16"


def default_kbit_prep(method: str, strategy: str = "ddp") -> bool:
    """The QLoRA recipe each strategy runs by default, one for its memory and its traffic alike: PEFT's k-bit
    preparation (:func:`~llmsizing.finetune.kbit_prep_bytes`, fp32 embeddings, head and norms) for a
    replicated step (``"ddp"``: one GPU or DDP, as ``qlora.py`` and TRL's ``SFTTrainer`` run it), none for a
    sharded one (``"fsdp"``, ``"zero3"``). TRL skips the preparation for sharded QLoRA
    (``trl/trainer/sft_trainer.py``, ``SFTTrainer._prepare_peft_model``, and ``trl/models/utils.py``,
    ``prepare_peft_model``: the 4-bit weights on ``cpu``/``meta`` mark a sharded model, ``is_sharded_qlora``,
    and ``prepare_model_for_kbit_training`` runs only when it is false; the older trainer's comment: never
    call it "when doing QLoRA + FSDP / DS-Zero3"), and Answer.AI's FSDP-QLoRA (``fsdp_qlora/train.py``) builds
    the PEFT model with ``get_peft_model`` alone, keeping the embeddings and head in the 16-bit storage dtype
    that FSDP shards. A script that never prepares runs the same on one GPU or with DDP (Answer.AI's
    ``train.py`` with ``--sharding_strategy ddp``): pass ``kbit_prep=False`` (the ``kbit_prep`` column of
    ``data/finetune_published.csv`` records it per row). ``False`` for every method but ``"qlora"``."""
    method = check_choice("method", method, METHODS)
    strategy = check_choice("strategy", strategy, STRATEGIES)
    return method == "qlora" and strategy == "ddp"


@dataclass(frozen=True)
class ShardedFinetuneMemory:
    """Per-GPU memory of LoRA/QLoRA (or full fine-tuning) on ``n_gpus`` with ``strategy``
    (:func:`finetune_memory_per_gpu`): ``single`` is the one-GPU :class:`~llmsizing.finetune.FinetuneMemory`
    it starts from, ``sharded_bytes`` what sharding removes from each GPU, ``gathered_bytes`` the unit
    gathered in full while it computes."""

    strategy: str
    n_gpus: int
    single: object
    sharded_bytes: float
    gathered_bytes: float
    peak_bytes: float
    overhead_bytes: float

    @property
    def total_bytes(self) -> float:
        return self.peak_bytes + self.overhead_bytes

    @property
    def assumes(self) -> str:
        """What the one-GPU step assumes (:attr:`~llmsizing.finetune.FinetuneMemory.assumes`)."""
        return self.single.assumes


def gathered_unit_bytes(model: Model | str, method: str = "lora") -> float:
    """Bytes FSDP/ZeRO-3 gathers for one unit of a frozen base: the larger of one block's matrices in the
    method's storage format (nf4 for QLoRA, bf16 for LoRA) and the embedding (or LM head) matrix, which
    bitsandbytes leaves in bf16. No gradient is gathered with it: the base is frozen. (Full fine-tuning's
    unit, with its gradient, is :func:`~llmsizing.memory.zero3_gathered_bytes`.)"""
    model = resolve_model(model)
    method = check_choice("method", method, METHODS)
    block = sum(d_out * d_in for d_out, d_in in block_matrices(model).values())
    return max(block * DTYPE_BYTES[_base_dtype(method)], model.vocab * model.hidden * DTYPE_BYTES["bf16"])


def finetune_memory_per_gpu(model: Model | str, *, n_gpus: int = 1, strategy: str = "ddp",
                            method: str = "lora", batch: int, seq: int, **kw) -> ShardedFinetuneMemory:
    """Per-GPU memory of a fine-tuning step on ``n_gpus`` GPUs (module docstring). ``kw`` as for
    :func:`~llmsizing.finetune.finetune_memory`.

    ``"ddp"`` replicates: each GPU holds the one-GPU step. ``"fsdp"``/``"zero3"`` shard the frozen base, the
    adapters and their optimizer states over the GPUs (``(n - 1) / n`` of them leave each GPU) and gather one
    unit at a time (:func:`gathered_unit_bytes`) in the forward and backward phases; the adapters' gradients
    are left unsharded unless the peak is the optimizer step (at most their size too much: a small,
    conservative error). QLoRA's ``kbit_prep`` defaults to the strategy's recipe (:func:`default_kbit_prep`:
    none for ``"fsdp"`` and ``"zero3"``), the one :func:`~llmsizing.finetune_terms.finetune_communication`
    gathers. Full fine-tuning goes to :func:`~llmsizing.finetune.finetune_memory` with ``Parallel(dp=n, zero=0
    or 3)``, the training model's own ZeRO arithmetic."""
    model = resolve_model(model)
    n = check_int("n_gpus", n_gpus, maximum=65536)
    strategy = check_choice("strategy", strategy, STRATEGIES)
    method = check_choice("method", method, METHODS)
    if method == "full":
        par = None if n == 1 else Parallel(dp=n, zero=0 if strategy == "ddp" else 3)
        f = finetune_memory(model, method="full", batch=batch, seq=seq, parallel=par, **kw)
        return ShardedFinetuneMemory(strategy, n, f, 0.0, 0.0, f.peak_bytes, f.overhead_bytes)
    if method == "qlora" and kw.get("kbit_prep") is None:     # the strategy's recipe (default_kbit_prep)
        kw = {**kw, "kbit_prep": default_kbit_prep(method, strategy)}
    f = finetune_memory(model, method=method, batch=batch, seq=seq, **kw)
    if strategy == "ddp" or n == 1:
        return ShardedFinetuneMemory(strategy, n, f, 0.0, 0.0, f.peak_bytes, f.overhead_bytes)
    states = f.base_weights_bytes + f.adapter_bytes + f.optimizer_bytes
    if f.peak_phase == "optimizer step":
        states += f.gradients_bytes
    sharded = states * (n - 1) / n
    unit = 0.0 if f.peak_phase == "optimizer step" else gathered_unit_bytes(model, method)
    peak = f.peak_bytes - sharded + unit
    overhead = kw.get("overhead_bytes")
    return ShardedFinetuneMemory(strategy, n, f, sharded, unit, peak,
                                 default_overhead_bytes(peak) if overhead is None else overhead)


def _largest(fits, limit: int) -> int:
    """The largest ``x`` in ``[1, limit]`` with ``fits(x)``, for ``fits`` true up to some point and false
    beyond (0 if ``fits(1)`` is false)."""
    if not fits(1):
        return 0
    if fits(limit):
        return limit
    lo, hi = 1, limit
    while hi - lo > 1:                      # fits(lo) and not fits(hi)
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def max_seq(model: Model | str, gpu, *, method: str = "lora", batch: int = 1, n_gpus: int = 1,
            strategy: str = "ddp", usable_fraction: float = 0.9, limit: int = 2**20, multiple: int = 256,
            **kw) -> int:
    """The longest sequence (a multiple of ``multiple`` tokens) whose per-GPU fine-tuning step
    (:func:`finetune_memory_per_gpu`, micro-batch ``batch``) fits in ``usable_fraction`` of ``gpu``'s memory;
    0 if not even ``multiple`` tokens fit. Memory grows with the sequence, so a bisection up to ``limit``
    finds it. ``kw`` as for :func:`~llmsizing.finetune.finetune_memory` (``recompute``, ``rank``,
    ``attention``...)."""
    g = get_gpu(gpu)
    room = check_fraction("usable_fraction", usable_fraction) * g.memory_bytes
    multiple = check_int("multiple", multiple, maximum=65536)
    limit = check_int("limit", limit, minimum=multiple, maximum=2**24)

    def fits(k: int) -> bool:
        return finetune_memory_per_gpu(model, n_gpus=n_gpus, strategy=strategy, method=method, batch=batch,
                                       seq=k * multiple, **kw).total_bytes <= room

    return multiple * _largest(fits, limit // multiple)


def max_batch_per_gpu(model: Model | str, gpu, *, method: str = "lora", seq: int, n_gpus: int = 1,
                      strategy: str = "ddp", usable_fraction: float = 0.9, limit: int = 4096, **kw) -> int:
    """The largest micro-batch per GPU of ``seq`` tokens that fits (:func:`finetune_memory_per_gpu`); on one
    GPU or with ``"ddp"`` it is :func:`~llmsizing.finetune.max_batch`."""
    g = get_gpu(gpu)
    room = check_fraction("usable_fraction", usable_fraction) * g.memory_bytes
    limit = check_int("limit", limit, maximum=2**20)

    def fits(b: int) -> bool:
        return finetune_memory_per_gpu(model, n_gpus=n_gpus, strategy=strategy, method=method, batch=b,
                                       seq=seq, **kw).total_bytes <= room

    return _largest(fits, limit)
