"""Fine-tuning memory: full fine-tuning, LoRA and QLoRA on the GPU you have (Part IV, "Fine-tuning on a
budget").

Sources:

* LoRA (Hu et al. 2021): a frozen weight ``W`` (``d_out x d_in``) gets a trainable ``B A`` with ``A`` of
  ``r x d_in`` and ``B`` of ``d_out x r``: ``r (d_in + d_out)`` parameters per adapted matrix. Targets are
  named as PEFT users name them (``q_proj`` ... ``down_proj``, or the short ``q`` ... ``down``), or
  ``"all-linear"`` (:data:`ALL_LINEAR`, the default): PEFT's shorthand for every ``nn.Linear``/``Conv1D`` of
  the model except the output layer (``peft/tuners/tuners_utils.py``, ``_maybe_include_all_linear_layers``),
  that is every matrix of the blocks the model has: no ``gate`` without a gated MLP (GPT-2, OPT, BLOOM,
  Falcon, MPT), and one fused ``qkv`` matrix where the model has one
  (:attr:`Model.fused_qkv <llmsizing.model.Model.fused_qkv>`: GPT-2's ``c_attn``, ``r (h + 3h)`` parameters,
  not three adapters). With grouped-query attention ``k_proj`` and ``v_proj`` are ``kv_heads x head_dim``
  wide, which the count respects. PEFT keeps the adapters in fp32 when the base is 16-bit
  (``autocast_adapter_dtype=True``, its default).
* QLoRA (Dettmers et al. 2023): the frozen linear layers of the blocks in nf4 with double quantisation (4.127
  bits per weight, :data:`~llmsizing.precision.DTYPE_BYTES`), embeddings, LM head and norms left in 16 bits,
  as bitsandbytes and PEFT leave them (:func:`~llmsizing.inference.weights_bytes`); each matrix is dequantised
  to 16 bits for its matmul, so one 16-bit copy of the largest block matrix is alive while a layer computes.
* Frozen weights need no gradients and no optimizer states: only the adapters carry them (4-byte gradients,
  the optimizer's states for ``r (d_in + d_out)`` numbers each; ``"adamw-8bit"`` quantises them as
  bitsandbytes does; Adafactor keeps its factored second moment, a row and a column vector per matrix:
  ``(r + d_in) + (d_out + r)`` numbers per adapted matrix, Shazeer & Stern 2018, Alg. 4, the same rule as
  :func:`~llmsizing.memory.optimizer_state_elements`). A paged optimizer (bitsandbytes' ``paged_adamw``) keeps
  the same bytes in unified memory that the driver evicts to the host under pressure: with
  ``paged_optimizer=True`` they are counted on the host, and only one tensor's states on the GPU during the
  step (:func:`finetune_memory`).

The peak follows :func:`~llmsizing.memory.training_memory`'s phases exactly
(:func:`~llmsizing.memory.step_phases`), with the adapters as the trainable states. Activations: the base
model's (:func:`~llmsizing.activations.activation_memory`, the same stack, attention and recomputation) less
what a frozen model does not save (a frozen linear layer or norm weight needs no input for a weight gradient),
plus what the adapters save. Against real PEFT LoRA steps (``data/lora_step_measurements.csv``, chapter 16)
the adapters' saved bytes are exact and the step's peak within 1%. So are the steps with ``lora_dropout``,
once the dropout's mask is counted as the CPU keeps it (PyTorch's CPU dropout keeps its noise in the input's
dtype, fp32 for the adapters' input, where a GPU's ``native_dropout`` keeps a 1-byte mask: ``mask_bytes=4``)
and only where the input needs a gradient (not for the first layer's q, k and v, whose input comes from the
frozen embedding).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ._validate import check_bool, check_choice, check_fraction, check_int, check_number, check_sequence
from .activations import DROPOUT_MASK_BYTES
from .catalog import resolve_model
from .finetune_base import METHODS, _prep_bytes, _recipe, frozen_base_bytes, kbit_prep_bytes  # noqa: F401
from .memory import (LAYER_WORKING_SET, LOSS_BACKWARD_BYTES_PER_LOGIT, ModelStates, _frame, _states,
                     default_overhead_bytes, model_states_for_params, step_phases, training_memory)
from .model import Model
from .parallel import Parallel
from .precision import DTYPE_BYTES, OPTIMIZERS

#: The training loops :func:`finetune_memory` sizes (its ``loop``): ``"trainer"``, Hugging Face's Trainer,
#: whose ``compute_loss`` returns the loss alone, so the model's output (the 16-bit logits) is freed before
#: the backward; ``"keep_output"``, a hand-written loop that keeps it (``out = model(**batch);
#: out.loss.backward()``, as accelerate's examples run), so one more logits-sized tensor is alive at every
#: phase of the step (the last micro-batch's until the next forward returns).
LOOPS = ("trainer", "keep_output")

#: The settings of the QLoRA paper's 65B script (``artidoro/qlora``, ``qlora.py`` and
#: ``scripts/finetune_guanaco_65b.sh``) as :func:`finetune_memory` keywords: nf4 with double quantisation
#: (``method="qlora"``), LoRA r=64 (``lora_alpha`` 16) on every linear layer of the blocks with
#: ``--lora_dropout 0.05``, bf16 adapters (``--bf16``), ``paged_adamw_32bit``, gradient checkpointing,
#: ``prepare_model_for_kbit_training`` followed by the script's own casts (the embedding and the LM head back
#: to bf16, the norms kept in fp32: ``recast_embeddings=True``), ``--per_device_train_batch_size 1`` and
#: ``--gradient_accumulation_steps 16``, on the HF stack. A sequence is at most ``--source_max_len 16`` +
#: ``--target_max_len 512`` = 528 tokens.
QLORA_SCRIPT = dict(method="qlora", rank=64, alpha=16, targets="all-linear", optimizer="adamw",
                    adapter_dtype="bf16", paged_optimizer=True, kbit_prep=True, recast_embeddings=True,
                    recompute="full", stack="hf", batch=1, seq=16 + 512, grad_accum=16, lora_dropout=True)

#: PEFT's module names for the matrices of a block, and the short names the book also accepts. ``qkv`` is the
#: fused query/key/value matrix of a model with :attr:`~llmsizing.model.Model.fused_qkv` (GPT-2's ``c_attn``).
TARGETS = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj", "gate": "gate_proj", "up": "up_proj",
           "down": "down_proj", "qkv": "qkv_proj"}
#: PEFT's ``target_modules="all-linear"``: every linear layer of the model but the output layer.
ALL_LINEAR = "all-linear"
ATTENTION_ONLY = ("q", "k", "v", "o")
_QKV = ("q_proj", "k_proj", "v_proj")


def block_matrices(model: Model | str) -> dict[str, tuple[int, int]]:
    """``{PEFT name: (d_out, d_in)}`` of every matrix of one block, in block order: what ``"all-linear"``
    adapts. ``q_proj``, ``k_proj`` and ``v_proj`` are one ``qkv_proj`` in a model with fused q, k and v."""
    model = resolve_model(model)
    shapes = {name.removesuffix(".weight"): shape for comp, name, shape in model.layer_tensors()
              if comp in ("attention", "mlp") and name.endswith(".weight")}
    if model.fused_qkv:
        q, k, v = (shapes.pop(n) for n in _QKV)
        shapes = {"qkv_proj": (q[0] + k[0] + v[0], q[1]), **shapes}
    return shapes


def _check_target_names(targets) -> None:
    """Refuse ``targets`` that name no block matrix of any model (a typo), without asking whether this model
    has them: full fine-tuning does not read them, and ``"gate"`` must not fail there on a model without a
    gate."""
    if isinstance(targets, str) and targets.lower() == ALL_LINEAR:
        return
    known = set(TARGETS) | set(TARGETS.values())
    for t in check_sequence("targets", targets, example='("q", "k", "v", "o") or "all-linear"'):
        if not isinstance(t, str):
            raise TypeError(f"targets must be names such as 'q' or 'q_proj', got {type(t).__name__} {t!r}")
        if t not in known:
            raise ValueError(f"unknown LoRA target {t!r}: targets are {', '.join(TARGETS)} (or their PEFT "
                             f"names {', '.join(TARGETS.values())}), or {ALL_LINEAR!r}")


def _target_shapes(model: Model, targets) -> dict[str, tuple[int, int]]:
    """``{peft name: (d_out, d_in)}`` of the block matrices named by ``targets`` (short or PEFT names, or
    ``"all-linear"``)."""
    shapes = block_matrices(model)
    if isinstance(targets, str) and targets.lower() == ALL_LINEAR:
        return shapes
    items = check_sequence("targets", targets, example='("q", "k", "v", "o") or "all-linear"')
    valid = [k for k, v in TARGETS.items() if v in shapes]
    out, parts = {}, set()
    for t in items:
        if not isinstance(t, str):
            raise TypeError(f"targets must be names such as 'q' or 'q_proj', got {type(t).__name__} {t!r}")
        name = TARGETS.get(t, t)
        if model.fused_qkv and name in _QKV:          # q, k and v are rows of one matrix: all three, or none
            parts.add(name)
            name = "qkv_proj"
        if name not in shapes:
            raise ValueError(f"unknown LoRA target {t!r} for {model.name}: valid targets are "
                             f"{', '.join(valid)} (or their PEFT names "
                             f"{', '.join(TARGETS[k] for k in valid)}), or {ALL_LINEAR!r}")
        out[name] = shapes[name]
    if parts and len(parts) < 3:
        raise ValueError(f"targets {list(items)!r}: {model.name} has one fused q, k, v matrix (fused_qkv, as "
                         "GPT-2's c_attn), which LoRA adapts whole: name all of q, k and v, or 'qkv'")
    return {k: v for k, v in shapes.items() if k in out}      # (block order)


#: For the first layer with dropout: the adapted matrices upstream of each one's input within a block. The
#: first layer's q, k and v read the first norm's output of the frozen embedding, which needs no gradient, so
#: their dropout keeps no mask; o's input needs one once q, k or v is adapted, and so on down the block.
#: This assumes the embedding's output needs no gradient, as in a plain PEFT model;
#: ``enable_input_require_grads()`` (which PEFT's ``prepare_model_for_kbit_training`` calls) makes it need
#: one, and then the first layer keeps its masks too: ``tokens x d_in x mask_bytes`` more for each of those
#: matrices, in one layer.
_ATTN_IN = ("q_proj", "k_proj", "v_proj", "qkv_proj")
_UPSTREAM = {"q_proj": (), "k_proj": (), "v_proj": (), "qkv_proj": (), "o_proj": _ATTN_IN,
             "gate_proj": (*_ATTN_IN, "o_proj"), "up_proj": (*_ATTN_IN, "o_proj"),
             "down_proj": (*_ATTN_IN, "o_proj", "gate_proj", "up_proj")}


def _adapter_saved_bytes(shapes: dict, *, tokens: int, rank: int, act_bytes: float, dropout: bool,
                         first_layer: bool = False, mask_bytes: float = DROPOUT_MASK_BYTES,
                         adapter_bytes: float = 4.0) -> float:
    """What one layer's adapters save for the backward beyond the frozen base (PEFT's LoRA forward,
    ``B(A(dropout(x.to(adapter dtype))))``, fp32 adapters): ``A``'s fp32 output per adapted matrix, and its
    input:

    * with dropout, per matrix, the fp32 dropout output (``A``'s input) and, where the matrix's input needs a
      gradient, the dropout's mask (``mask_bytes`` per number, 1 on a GPU:
      :data:`~llmsizing.activations.DROPOUT_MASK_BYTES`). Every input needs one except, in the
      ``first_layer``, those with no adapted matrix upstream in the block (``_UPSTREAM``);
    * else, where the base's dtype differs from the adapters' (``adapter_bytes``), per matrix the cast copy of
      its input;
    * else (same dtype: no cast) the input itself, once per distinct input (q, k and v share the first norm's
      output, gate and up the second's), except o_proj's, which attention saves anyway.

    Measured to the byte in ``data/lora_step_measurements.csv`` (``saved_lora_only_bytes``; with dropout on
    the CPU, ``mask_bytes=4``)."""
    ab = adapter_bytes            # (bf16 adapters: 2, and no cast of a bf16 input)
    a_out = sum(tokens * rank * ab for _ in shapes)
    if dropout:
        def needs_grad(name):
            return not first_layer or any(u in shapes for u in _UPSTREAM.get(name, ()))
        return a_out + sum(tokens * d_in * (ab + mask_bytes * needs_grad(name)) for name,
                           (_, d_in) in shapes.items())
    if act_bytes != ab:
        return a_out + sum(tokens * d_in * ab for _, d_in in shapes.values())
    groups = {"q_proj": "attn_in", "k_proj": "attn_in", "v_proj": "attn_in", "qkv_proj": "attn_in",
              "gate_proj": "mlp_in", "up_proj": "mlp_in", "down_proj": "down_in"}
    distinct = {groups[n]: d_in for n, (_, d_in) in shapes.items() if n in groups}
    return a_out + sum(tokens * d_in * act_bytes for d_in in distinct.values())


def lora_params(model: Model | str, *, rank: int = 16, targets=ALL_LINEAR) -> int:
    """Trainable parameters LoRA adds: ``rank x (d_in + d_out)`` per adapted matrix and layer (Hu et al.
    2021), what PEFT's ``print_trainable_parameters()`` reports for a model built from the same config.
    ``targets`` defaults to ``"all-linear"``: every matrix the model's blocks have (module docstring)."""
    model = resolve_model(model)
    rank = check_int("rank", rank, maximum=65536)
    return model.layers * sum(rank * (d_out + d_in) for d_out, d_in in _target_shapes(model,
                                                                                      targets).values())


@dataclass(frozen=True)
class FinetuneMemory:
    """Per-GPU memory of one fine-tuning step (:func:`finetune_memory`): the frozen ``base_weights_bytes``,
    the trainable ``adapter_bytes`` (all weights for full fine-tuning), their gradients and optimizer states,
    the activations, the peak of the step's phases and the total with the book's allowance."""

    method: str
    trainable_params: int
    base_weights_bytes: float
    adapter_bytes: float
    gradients_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    peak_bytes: float
    overhead_bytes: float
    peak_phase: str
    dequantised_bytes: float = 0.0
    host_bytes: float = 0.0
    #: the training loop sized (:data:`LOOPS`) and the logits a ``"keep_output"`` loop keeps (in the peak)
    loop: str = "trainer"
    kept_output_bytes: float = 0.0
    #: what the answer assumes where recipes differ (the loop, PEFT's k-bit preparation, ...), one per item
    assumptions: tuple = ()

    @property
    def total_bytes(self) -> float:
        return self.peak_bytes + self.overhead_bytes

    @property
    def assumes(self) -> str:
        """The assumptions, as one line (what the command line prints)."""
        return "; ".join(self.assumptions)

    def to_frame(self):
        """One row per part (bytes, GiB, bytes per trainable parameter); ``kept output`` only when a
        ``"keep_output"`` loop keeps the logits."""
        rows = {"base weights": self.base_weights_bytes, "adapters": self.adapter_bytes,
                "gradients": self.gradients_bytes, "optimizer": self.optimizer_bytes,
                "activations": self.activations_bytes}
        if self.kept_output_bytes:
            rows["kept output"] = self.kept_output_bytes
        rows.update({"peak": self.peak_bytes, "overhead": self.overhead_bytes, "total": self.total_bytes})
        return _frame(rows, max(self.trainable_params, 1))


def _assumptions(method: str, loop: str, kbit_prep: bool, recast: bool, adapter_dtype: str,
                 paged: bool) -> tuple:
    out = ["loop='trainer': Hugging Face's Trainer, the model's output freed before the backward "
           "('keep_output': a loop that keeps out.logits)" if loop == "trainer" else
           "loop='keep_output': the model's output kept, one logits tensor alive through the step "
           "('trainer': HF's Trainer frees it)"]
    if method == "qlora":
        if kbit_prep:
            out.append("kbit_prep=True: PEFT's prepare_model_for_kbit_training, as most QLoRA recipes run; "
                       + ("norms fp32, embedding and LM head recast to bf16 (recast_embeddings=True)"
                          if recast else "embeddings, LM head and norms fp32") + ", fp32 checkpoints")
        else:
            out.append("kbit_prep=False: no k-bit preparation, the base's 16-bit parts stay 16-bit")
    if method != "full":
        out.append(f"adapter_dtype={adapter_dtype!r}, fp32 optimizer states "
                   + ("paged to the host (paged_optimizer=True)" if paged else "on the GPU"))
    return tuple(out)


def finetune_memory(model: Model | str, *, method: str = "lora", rank: int = 16, alpha: float | None = None,
                    targets=ALL_LINEAR,
                    optimizer: str = "adamw", batch: int, seq: int, recompute: str = "none",
                    attention: str = "flash", stack: str = "hf", lora_dropout: bool = False,
                    grad_accum: int = 1, dtype: str = "bf16", parallel=None,
                    overhead_bytes: float | None = None, mask_bytes: float = DROPOUT_MASK_BYTES,
                    adapter_dtype: str = "fp32", paged_optimizer: bool = False, kbit_prep: bool | None = None,
                    recast_embeddings: bool = False, loop: str = "trainer") -> FinetuneMemory:
    """Memory of one fine-tuning step on one GPU, with the same peak semantics as
    :func:`~llmsizing.memory.training_memory` (its phases, its allowance).

    ``method="full"`` is :func:`~llmsizing.memory.training_memory` itself (bf16 mixed precision; ``parallel``
    for ZeRO/FSDP and offload). ``"lora"`` freezes the bf16 base and trains ``rank``-``r`` adapters on
    ``targets`` (default ``"all-linear"``: every matrix the model's blocks have, as PEFT's shorthand; for
    ``"full"`` only checked for typos, since every weight trains) (``dtype="fp32"`` for a base kept in fp32,
    as the book's CPU measurements run it); ``"qlora"``
    stores the base's block matrices in nf4 (module docstring). ``lora_dropout=True``
    adds the dropout's saved output and mask per adapted matrix (PEFT's ``lora_dropout > 0``): the mask is
    ``mask_bytes`` per number, as in :func:`~llmsizing.activations.activation_memory` (1 on a GPU; on the CPU,
    PyTorch keeps the noise in the input's dtype, fp32 for PEFT's adapters: 4), and is not kept where the
    input needs no gradient (the first layer's q, k and v). ``alpha`` (PEFT's
    ``lora_alpha``) scales the adapters' update by ``alpha / rank`` and costs no memory; it is accepted and
    checked. ``recompute="full"``
    is gradient checkpointing as PEFT users enable it (``gradient_checkpointing_enable()``). Taught in the
    fine-tuning chapter; checked against PEFT's counts and measured LoRA steps.

    ``loop`` (:data:`LOOPS`) is the training loop sized: ``"trainer"`` (default), Hugging Face's Trainer,
    which frees the model's output before the backward; ``"keep_output"``, a loop that keeps it (``out =
    model(**batch); out.loss.backward()``, accelerate's examples): the logits, ``batch x seq x vocab`` numbers
    in the model's dtype (16-bit under mixed precision and for QLoRA's autocast), stay alive through every
    phase (``kept_output_bytes``, in the peak). For full fine-tuning it is modelled on data parallelism and
    ZeRO only (no tensor, pipeline or context parallelism, which split the logits). The result's ``assumes``
    says which loop, and what else it assumes where recipes differ.

    Options of the QLoRA recipe as shipped (``qlora.py`` of Dettmers et al.); ``kbit_prep`` defaults to what
    most recipes run, the others are off by default (:data:`QLORA_SCRIPT` turns them all on, as the script
    runs):

    * ``adapter_dtype="bf16"``: the adapters (and their gradients) in bf16, as the script's ``--bf16`` casts
      them; their optimizer states stay fp32 (bitsandbytes' 32-bit optimizers keep fp32 states for 16-bit
      parameters), and they save their bf16 input itself, not an fp32 copy.
    * ``paged_optimizer=True`` (bitsandbytes' ``paged_adamw_32bit``): the optimizer states live in unified
      memory that the driver evicts to the host while the forward and backward need the GPU. Assumed here (the
      least the GPU must hold): they all live on the host (``host_bytes`` reports them), and the optimizer
      step, which bitsandbytes runs one tensor at a time (fused: no ``foreach`` temporaries), pages in the
      states of one tensor, the largest adapter matrix's. With free memory the driver leaves more of them on
      the GPU; they are evicted again when the next forward needs the room.
    * ``kbit_prep`` (default ``None``: ``True`` for ``"qlora"``, the only method it applies to; the QLoRA
      script and most QLoRA recipes call it, so the default sizes what they run; ``False`` for a bare PEFT
      model): PEFT's ``prepare_model_for_kbit_training`` (peft 0.21, ``peft/utils/other.py``) casts every
      16-bit parameter that is not a bitsandbytes ``Params4bit`` to fp32: the embeddings, the LM head and the
      norms (+2 bytes each). It has two consequences, measured in ``data/loss_logits_measurements.csv`` (mode
      ``nf4-kbit``): the fp32 embedding makes the residual stream fp32 (``Linear4bit`` returns its input's
      dtype), so gradient checkpointing keeps 4-byte layer inputs, not 2; and under autocast the LM head's
      matmul saves a bf16 copy of its fp32 weight until the head's backward (:func:`kbit_prep_bytes`).
    * ``recast_embeddings=True`` (with ``kbit_prep``): what ``qlora.py`` does after the preparation under
      ``--bf16``: the embedding and the LM head cast back to bf16, the norms left in fp32. Only the norms (and
      biases) keep the +2 bytes; the LM head needs no autocast copy; the first layer's input is the bf16
      embedding's output, and from its first fp32 norm on the residual stream is fp32 again (a bf16 residual
      plus an fp32 branch), so every later checkpoint is 4 bytes per number. Derived from the casts, not
      measured.

    The HF loss (``stack="hf"``) upcasts the logits to fp32: 4 bytes per logit saved by ``log_softmax`` and 8
    more in its backward (:data:`~llmsizing.memory.LOSS_BACKWARD_BYTES_PER_LOGIT`), measured at long context
    and a 128K vocabulary in ``data/loss_logits_measurements.csv``.
    """
    from .activations import activation_memory, layer_terms

    model = resolve_model(model)
    method = check_choice("method", method, METHODS)
    batch, seq, grad_accum = check_int("batch", batch), check_int("seq", seq), check_int("grad_accum",
                                                                                         grad_accum)
    check_choice("optimizer", optimizer, OPTIMIZERS)
    check_bool("lora_dropout", lora_dropout)
    mask_bytes = check_number("mask_bytes", mask_bytes, minimum=0.0)    # (as activation_memory checks it)
    dtype = check_choice("dtype", dtype, ("bf16", "fp32"))
    if overhead_bytes is not None:
        overhead_bytes = check_number("overhead_bytes", overhead_bytes)
    rank = check_int("rank", rank, maximum=65536)
    adapter_dtype = check_choice("adapter_dtype", adapter_dtype, ("fp32", "bf16"))
    check_bool("paged_optimizer", paged_optimizer)
    kbit_prep, recast_embeddings = _recipe(method, kbit_prep, recast_embeddings)
    loop = check_choice("loop", loop, LOOPS)
    notes = _assumptions(method, loop, kbit_prep, recast_embeddings, adapter_dtype, paged_optimizer)
    if method == "full" and (adapter_dtype != "fp32" or paged_optimizer):
        raise ValueError(f"adapter_dtype={adapter_dtype!r}, paged_optimizer={paged_optimizer!r}: these "
                         "options are for LoRA/QLoRA adapters; full fine-tuning takes precision and parallel "
                         "via training_memory")
    # LoRA's scale alpha / r changes the update, not a byte of memory: checked, unused
    if alpha is not None:
        check_number("alpha", alpha, allow_equal=False)
    if method == "full":         # every weight trains: the targets are not read, only checked for typos
        _check_target_names(targets)
        t = training_memory(model, batch=batch, seq=seq, precision="bf16-mixed", optimizer=optimizer,
                            attention=attention, recompute=recompute, grad_accum=grad_accum,
                            parallel=parallel, overhead_bytes=overhead_bytes, stack=stack)
        kept, peak, overhead = 0.0, t.peak_bytes, t.overhead_bytes
        if loop == "keep_output":       # the bf16 logits, alive in every phase: the peak phase stays the peak
            if parallel is not None and (parallel.tp, parallel.pp, parallel.cp) != (1, 1, 1):
                raise ValueError(f"loop='keep_output' with parallel={parallel!r}: the kept logits are "
                                 "modelled for data parallelism and ZeRO only (tp, pp and cp split them); "
                                 "use loop='trainer' or a layout with tp=pp=cp=1")
            kept = batch * seq * model.vocab * DTYPE_BYTES["bf16"]
            peak = t.peak_bytes + kept
            overhead = default_overhead_bytes(peak) if overhead_bytes is None else overhead_bytes
        return FinetuneMemory("full", model.n_params, 0.0, t.weights_bytes, t.gradients_bytes,
                              t.optimizer_bytes, t.activations_bytes, peak, overhead, t.peak_phase,
                              host_bytes=t.states.host_bytes, loop=loop, kept_output_bytes=kept,
                              assumptions=notes)
    if parallel is not None:
        raise ValueError(f"parallel={parallel!r}: finetune_memory models LoRA/QLoRA on one GPU (give "
                         "parallel=None); for several GPUs use "
                         "llmsizing.finetune_time.finetune_memory_per_gpu(model, n_gpus=..., strategy='ddp', "
                         "'fsdp' or 'zero3', ...), which replicates or shards the frozen base. Full "
                         "fine-tuning (method='full') takes a layout here")
    shapes = _target_shapes(model, targets)
    trainable = model.layers * sum(rank * (d_out + d_in) for d_out, d_in in shapes.values())
    prep = _prep_bytes(model, kbit_prep, recast_embeddings)
    base = frozen_base_bytes(model, method, kbit_prep=kbit_prep, recast_embeddings=recast_embeddings,
                             dtype=dtype)
    adapters = _states(trainable, _adapter_state_elements(shapes, rank, model.layers, optimizer), "fp32",
                       optimizer, Parallel())                            # fp32 states (and adapters), one GPU
    ab = DTYPE_BYTES[adapter_dtype]
    adapter_w, adapter_g = trainable * ab, trainable * ab
    opt_states = adapters.optimizer_state_bytes
    host = opt_states if paged_optimizer else 0.0
    states = ModelStates(trainable, adapter_dtype, optimizer, base + adapter_w, adapter_g, 0.0,
                         0.0 if paged_optimizer else opt_states, host_bytes=host)
    acts = activation_memory(model, batch=batch, seq=seq, dtype=dtype, attention=attention,
                             recompute=recompute, stack=stack)
    tokens = batch * seq
    act_bytes = DTYPE_BYTES[dtype]
    h, f = model.hidden, model.ffn_hidden
    # a frozen linear layer keeps no input (only its weight gradient would need it), nor does a frozen norm's
    # multiply by its weight: per layer the two norms' normalised values and outputs (4h) and the down
    # projection's input (f), plus the final norm's two (2h), are not saved. With it the predicted peak is
    # within 1.5% of every measured step without dropout in data/lora_step_measurements.csv
    # (tests/test_finetune.py)
    layer_saving = tokens * act_bytes * (4 * h + f)
    head_saving = tokens * act_bytes * 2 * h                          # the final norm's, before the LM head
    kw = dict(tokens=tokens, rank=rank, act_bytes=act_bytes, dropout=lora_dropout, mask_bytes=mask_bytes,
              adapter_bytes=ab)
    layer_adapters = _adapter_saved_bytes(shapes, **kw)
    # (no mask there)
    first_layer_less = layer_adapters - _adapter_saved_bytes(shapes, first_layer=True, **kw)
    # layers keep only their inputs; the one rebuilt in the backward holds the rest
    if recompute == "full":
        # after kbit_prep the residual stream is fp32 (the fp32 embedding feeds it): 4-byte checkpoints; with
        # the embedding recast to bf16 the first layer's input is bf16, and its fp32 norms make the rest fp32
        fp32_layers = (model.layers - 1 if recast_embeddings else model.layers) if kbit_prep else 0
        fp32_stream = fp32_layers * tokens * h * (4 - act_bytes)
        acts = replace(acts, layers_bytes=acts.layers_bytes - layer_saving + layer_adapters + fp32_stream,
                       logits_bytes=acts.logits_bytes - head_saving)
    else:
        per_layer = acts.per_layer_bytes - layer_saving + layer_adapters
        acts = replace(acts, per_layer_bytes=per_layer,
                       layers_bytes=acts.layers_bytes + model.layers * (per_layer - acts.per_layer_bytes)
                       - first_layer_less,
                       logits_bytes=acts.logits_bytes - head_saving)
    largest = max(d_out * d_in for d_out, d_in in block_matrices(model).values())
    dequant = 2.0 * largest if method == "qlora" else 0.0     # the 16-bit copy of the matrix being multiplied
    working = LAYER_WORKING_SET * (sum(layer_terms(model, batch=batch, seq=seq, dtype=dtype,
                                                   attention=attention, stack=stack).values()))
    loss = LOSS_BACKWARD_BYTES_PER_LOGIT[stack] * tokens * model.vocab
    opt_tmp = 8.0 * trainable if optimizer in ("adam", "adamw") else 0.0   # foreach temporaries, fp32 states
    # one tensor's states paged in at a time (fused per tensor: no foreach temporaries)
    if paged_optimizer:
        opt_tmp = opt_states / trainable * rank * max(max(d) for d in shapes.values())
    pieces = step_phases(states, acts, grad_accum=grad_accum, autocast_bytes=prep["head_copy"],
                         loss_bytes=loss, optimizer_bytes=opt_tmp, layer_working_bytes=working,
                         head_grad_bytes=0.0, head_copy_bytes=prep["head_copy"], gathered_bytes=dequant)
    # a loop that keeps the model's output holds its logits in every phase: the 16-bit LM head's output
    # (QLoRA's under autocast; a LoRA base's own dtype, fp32 for an fp32 base: HF's .float() is then the
    # tensor itself)
    kept = tokens * model.vocab * (DTYPE_BYTES["bf16"] if method == "qlora" else act_bytes) \
        if loop == "keep_output" else 0.0
    totals = {k: sum(v.values()) + kept for k, v in pieces.items()}
    phase = max(totals, key=totals.get)
    peak = totals[phase]
    overhead = default_overhead_bytes(peak) if overhead_bytes is None else overhead_bytes
    return FinetuneMemory(method, trainable, base, adapter_w, adapter_g,
                          0.0 if paged_optimizer else opt_states, acts.total_bytes, peak, overhead,
                          phase.replace(" (start)", "").replace(" (end)", ""), dequant, host_bytes=host,
                          loop=loop, kept_output_bytes=kept, assumptions=notes)


def _adapter_state_elements(shapes: dict, rank: int, layers: int, optimizer: str) -> float:
    """Numbers the optimizer keeps for the adapters: ``states`` per parameter, or with Adafactor its factored
    second moment, a row and a column vector per matrix (``r + d_in`` for ``A``, ``d_out + r`` for ``B``:
    Shazeer & Stern 2018, Alg. 4, as :func:`~llmsizing.memory.optimizer_state_elements` counts a model's)."""
    opt = OPTIMIZERS[optimizer]
    per_layer = sum(rank * (d_out + d_in) for d_out, d_in in shapes.values())
    # the adapters are hidden matrices: Muon keeps its one buffer for them
    n = (opt.states if opt.matrix_states is None else opt.matrix_states) * per_layer
    if opt.factored:
        n += sum((rank + d_in) + (d_out + rank) for d_out, d_in in shapes.values())
    return layers * n


def bytes_per_param(method: str, *, optimizer: str = "adamw") -> float:
    """Bytes per parameter of the model states alone, for the seeds' rules of thumb: full fine-tuning in bf16
    mixed precision (2 + 2 + 12 = 16 with AdamW), or the frozen base of LoRA (2) and QLoRA (nf4, 0.516)."""
    method = check_choice("method", method, METHODS)
    check_choice("optimizer", optimizer, OPTIMIZERS)     # (checked for LoRA too, where it changes nothing)
    if method == "full":
        s = model_states_for_params(1, precision="bf16-mixed", optimizer=optimizer)
        return s.total_bytes
    return DTYPE_BYTES["nf4" if method == "qlora" else "bf16"]


def max_batch(model: Model | str, gpu, *, method: str = "lora", seq: int, usable_fraction: float = 0.9,
              limit: int = 4096, **kw) -> int:
    """The largest micro-batch (sequences of ``seq`` tokens) whose :func:`finetune_memory` total fits in
    ``usable_fraction`` of ``gpu``'s memory (0 if not even one sequence fits); ``kw`` as for
    :func:`finetune_memory`. The total grows with the batch, so a bisection up to ``limit`` finds it."""
    from .catalog import get_gpu

    g = get_gpu(gpu)
    frac = check_fraction("usable_fraction", usable_fraction)
    limit = check_int("limit", limit, maximum=2**20)
    room = frac * g.memory_bytes

    def fits(b: int) -> bool:
        return finetune_memory(model, method=method, batch=b, seq=seq, **kw).total_bytes <= room

    return _largest(fits, limit)


def _largest(fits, limit: int) -> int:
    """The largest ``n`` in ``1..limit`` with ``fits(n)`` (0 if not even 1), for a ``fits`` that stays false
    once false (the total grows with the batch and with the sequence): a bisection."""
    if not fits(1):
        return 0
    lo, hi = 1, limit
    if fits(hi):
        return hi
    while hi - lo > 1:                      # fits(lo) and not fits(hi)
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def max_context(model: Model | str, gpu, *, method: str = "qlora", batch: int = 1,
                usable_fraction: float = 0.9, limit: int = 2**20, **kw) -> int:
    """The longest sequence (tokens, with ``batch`` sequences per step) whose :func:`finetune_memory` total
    fits in ``usable_fraction`` of ``gpu``'s memory (0 if not one token fits), by the same bisection as
    :func:`max_batch`; ``kw`` as for :func:`finetune_memory`. Long-context fine-tuning wants
    ``recompute="full"`` and ``stack="hf"`` (the HF loss's fp32 logits, 12 bytes per logit at the loss's
    backward, are what grows fastest at a 128K vocabulary); compared with published maxima in chapter 16
    (``data/finetune_max_context.csv``)."""
    from .catalog import get_gpu

    g = get_gpu(gpu)
    frac = check_fraction("usable_fraction", usable_fraction)
    limit = check_int("limit", limit, maximum=2**24)
    batch = check_int("batch", batch)
    room = frac * g.memory_bytes

    def fits(s: int) -> bool:
        return finetune_memory(model, method=method, batch=batch, seq=s, **kw).total_bytes <= room

    return _largest(fits, limit)
