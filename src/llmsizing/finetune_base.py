"""The frozen base of a LoRA/QLoRA run as its recipe holds it (chapter 16, "Frozen base"), split out of
:mod:`llmsizing.finetune` (review25a L10), which re-exports every name: the methods, the one check of the
k-bit recipe's two switches, PEFT's k-bit preparation (``prepare_model_for_kbit_training``, peft 0.21,
``peft/utils/other.py``; measured in ``data/loss_logits_measurements.csv``) and the bytes of the base that a
step's memory and a sharded step's gathers share.
"""

from __future__ import annotations

from ._validate import check_bool, check_choice
from .catalog import resolve_model
from .model import Model

#: What :func:`~llmsizing.finetune.finetune_memory` trains: every weight, LoRA adapters on a 16-bit base, or
#: LoRA adapters on a 4-bit (nf4) base.
METHODS = ("full", "lora", "qlora")


def _recipe(method: str, kbit_prep, recast_embeddings) -> tuple[bool, bool]:
    """``(kbit_prep, recast_embeddings)`` checked, the one place :func:`~llmsizing.finetune.finetune_memory`
    and :func:`frozen_base_bytes` refuse a recipe no script runs: ``kbit_prep`` defaults to ``True`` for
    ``"qlora"`` and is only for it; ``recast_embeddings`` undoes part of the preparation, so needs it."""
    kbit_prep = method == "qlora" if kbit_prep is None else check_bool("kbit_prep", kbit_prep)
    recast_embeddings = check_bool("recast_embeddings", recast_embeddings)
    if kbit_prep and method != "qlora":
        raise ValueError(f"kbit_prep=True with method={method!r}: prepare_model_for_kbit_training is for a "
                         "quantised base (method='qlora'); on a 16-bit base it would cast every weight to "
                         "fp32")
    if recast_embeddings and not kbit_prep:
        raise ValueError(f"recast_embeddings=True with kbit_prep={kbit_prep!r}, method={method!r}: it undoes "
                         "part of prepare_model_for_kbit_training (qlora.py's casts after it); give "
                         "method='qlora' with kbit_prep=True")
    return kbit_prep, recast_embeddings


def _prep_bytes(model: Model, kbit_prep: bool, recast_embeddings: bool) -> dict[str, float]:
    """:func:`kbit_prep_bytes` as a recipe applies it: nothing without the preparation; with
    ``recast_embeddings`` (``qlora.py``: embedding and LM head back to bf16) only the norms' (and biases')."""
    prep = kbit_prep_bytes(model) if kbit_prep else {"weights": 0.0, "head_copy": 0.0}
    if recast_embeddings:
        parts = model.param_breakdown()
        embeddings = parts["embedding"] + (0.0 if model.tied_embeddings else parts["lm_head"])
        prep = {"weights": prep["weights"] - 2.0 * embeddings, "head_copy": 0.0}
    return prep


def frozen_base_bytes(model: Model | str, method: str = "lora", *, kbit_prep: bool | None = None,
                      recast_embeddings: bool = False, dtype: str = "bf16") -> float:
    """Bytes of a LoRA/QLoRA run's frozen base as the recipe holds it (chapter 16, "Frozen base"): the
    weights in their storage format (:func:`~llmsizing.inference.weights_bytes`: nf4 block matrices for
    ``"qlora"``, embeddings, head and norms in 16 bits; ``dtype`` for ``"lora"``), plus the fp32 casts of
    PEFT's k-bit preparation when ``kbit_prep`` (default: ``True`` for ``"qlora"``, as
    :func:`~llmsizing.finetune.finetune_memory`; :func:`kbit_prep_bytes`). The one count of the base that the
    memory of a step (``FinetuneMemory.base_weights_bytes``) and the gathers of a sharded step
    (:func:`~llmsizing.finetune_terms.finetune_communication`) share, so one row never assumes two recipes.
    Raises ``ValueError`` for a recipe :func:`~llmsizing.finetune.finetune_memory` refuses (``_recipe``)."""
    from .inference import weights_bytes

    model = resolve_model(model)
    method = check_choice("method", method, METHODS)
    if method == "full":
        raise ValueError("method='full': a full fine-tune has no frozen base; give 'lora' or 'qlora'")
    kbit_prep, recast_embeddings = _recipe(method, kbit_prep, recast_embeddings)
    prep = _prep_bytes(model, kbit_prep, recast_embeddings)
    return weights_bytes(model, "nf4" if method == "qlora" else dtype) + prep["weights"]


def kbit_prep_bytes(model: Model | str) -> dict[str, float]:
    """What PEFT's ``prepare_model_for_kbit_training`` adds to a QLoRA model (peft 0.21): ``"weights"``, 2
    more bytes for every parameter it casts from 16 bits to fp32 (all but the blocks' nf4 matrices:
    embeddings, LM head, norms and biases), and ``"head_copy"``, the bf16 copy of the now-fp32 LM head that
    its matmul saves under autocast (2 bytes per LM-head weight; with tied embeddings the shared matrix).
    Measured in ``data/loss_logits_measurements.csv`` (mode ``nf4-kbit``)."""
    model = resolve_model(model)
    quantised = sum(shape[0] * shape[1] * k for comp, _, shape, k in model.tensors()
                    if comp in ("attention", "mlp") and len(shape) == 2)
    parts = model.param_breakdown()
    head = parts["embedding"] if model.tied_embeddings else parts["lm_head"]
    return {"weights": 2.0 * (model.n_params - quantised), "head_copy": 2.0 * head}


def kbit_prep_checks():
    """PEFT's k-bit preparation against ``data/loss_logits_measurements.csv`` (``tools/measure/loss.py``;
    chapter 16), one row per ``(vocab, seq)`` of the measured model (2 Llama layers, hidden 256):

    * ``base_error``: :func:`frozen_base_bytes` of the nf4 base after the preparation over the measured one,
      less 1. The measured base is the ``nf4-kbit`` step's ``baseline_bytes`` less what the ``bf16`` step
      holds beside its weights (its baseline less ``2 N``: the fp32 adapters and their states, alike in both).
    * ``head_copy_error``: :func:`kbit_prep_bytes`' ``head_copy`` (``2 V h``) over what the ``nf4-kbit``
      step's forward leaves alive from the LM head on beyond the ``bf16-kbit`` step's (both prepared; only the
      nf4 one runs under autocast, which saves the bf16 copy of the fp32 head), less 1.
    * ``fp32_stream``: both prepared steps' residual stream (``layer_input_dtype``) is fp32."""
    import pandas as pd

    from .catalog import DATA_DIR
    from .inference import weights_bytes

    df = pd.read_csv(DATA_DIR / "loss_logits_measurements.csv").set_index(["vocab", "seq", "mode"])
    rows = []
    for vocab, seq in sorted({k[:2] for k in df.index}):
        bf, kb, nf = (df.loc[(vocab, seq, mode)] for mode in ("bf16", "bf16-kbit", "nf4-kbit"))
        m = Model(f"loss-llama-v{vocab}", layers=int(nf["layers"]), hidden=int(nf["hidden"]), heads=8,
                  kv_heads=2, ffn_hidden=688, vocab=int(vocab), gated_mlp=True, tied_embeddings=False,
                  norm="rmsnorm", max_seq=8192)                   # tools/measure/loss.py's loss_shape
        base = nf["baseline_bytes"] - (bf["baseline_bytes"] - weights_bytes(m, "bf16"))
        copy = nf["saved_loss_bytes"] - kb["saved_loss_bytes"]
        rows.append({"vocab": int(vocab), "seq": int(seq),
                     "base_error": frozen_base_bytes(m, "qlora") / base - 1,
                     "head_copy_error": kbit_prep_bytes(m)["head_copy"] / copy - 1,
                     "fp32_stream": kb["layer_input_dtype"] == nf["layer_input_dtype"] == "float32"})
    return pd.DataFrame(rows)
