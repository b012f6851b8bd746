"""Sub-command ``peft``: the trainable and total parameters PEFT reports for LoRA, on the meta device.

It writes data/peft_trainable_params.csv, one row per (model, r, targets)::

  model, model_class            catalogue name (data/models.csv) and the HF class built from its shape
  layers .. vocab, tied_embeddings   the catalogue's shape, as passed to the HF config
  r, lora_alpha, lora_dropout   the LoraConfig (alpha = 2r, dropout 0.05: common choices; they change no count)
  targets, target_modules       "attention" (q,k,v,o_proj) or "all-linear" (+ gate,up,down_proj), the exact list
  n_adapted_modules             how many nn.Linear PEFT wrapped (layers x targets)
  trainable_params, total_params   what PeftModel.get_nb_trainable_parameters() returns (the two numbers
                                 print_trainable_parameters() prints); total includes the adapters
  base_params                   total - trainable (the frozen model); catalogue_params: the catalogue's
                                 published count (base_params must equal it)
  peft_version, torch_version, transformers_version, measured_on

Built on the meta device: no weight is downloaded or allocated (a few seconds for all 18 rows).
"""

from __future__ import annotations

import itertools

import torch

from llmsizing import Model

from .core import date_today, write_csv

PEFT_MODELS = ("llama-2-7b", "llama-3-8b", "mistral-7b")
PEFT_RANKS = (8, 16, 64)
LORA_TARGETS = {"attention": ("q_proj", "k_proj", "v_proj", "o_proj"),
                "all-linear": ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")}


def hf_model_from_shape(m: Model, family: str, attention="sdpa"):
    """An HF LlamaForCausalLM / MistralForCausalLM with the shape of ``m`` (random weights; call it under
    ``torch.device("meta")`` to allocate nothing)."""
    import transformers as tf
    kw = dict(vocab_size=m.vocab, hidden_size=m.hidden, intermediate_size=m.ffn_hidden,
              num_hidden_layers=m.layers, num_attention_heads=m.heads, num_key_value_heads=m.kv_heads,
              head_dim=m.head_dim, max_position_embeddings=m.max_seq, tie_word_embeddings=m.tied_embeddings,
              attention_dropout=0.0, use_cache=False, bos_token_id=0, eos_token_id=0)
    if family == "mistral":
        cfg, cls = tf.MistralConfig(sliding_window=m.sliding_window, **kw), tf.MistralForCausalLM
    else:
        cfg, cls = tf.LlamaConfig(**kw), tf.LlamaForCausalLM
    cfg._attn_implementation = attention
    return cls(cfg)


def cmd_peft(args):
    """Sub-command ``peft``: trainable / total parameters PEFT reports for LoRA on real-size models (meta device)."""
    import peft
    import transformers
    from llmsizing.catalog import model_entry
    transformers.logging.set_verbosity_error()
    today = date_today()
    rows = []
    models = PEFT_MODELS[:1] if args.quick else PEFT_MODELS
    for name, r, (tname, targets) in itertools.product(models, PEFT_RANKS, LORA_TARGETS.items()):
        entry = model_entry(name)
        m = entry.model
        family = "mistral" if name.startswith("mistral") else "llama"
        with torch.device("meta"):
            base = hf_model_from_shape(m, family)
            cfg = peft.LoraConfig(r=r, lora_alpha=2 * r, lora_dropout=0.05, target_modules=list(targets),
                                  task_type="CAUSAL_LM")
            pm = peft.get_peft_model(base, cfg)
        trainable, total = pm.get_nb_trainable_parameters()
        n_adapted = sum(1 for mod in pm.modules() if isinstance(mod, peft.tuners.lora.LoraLayer))
        rows.append({"model": name, "model_class": type(base).__name__, "layers": m.layers, "hidden": m.hidden,
                     "heads": m.heads, "kv_heads": m.kv_heads, "head_dim": m.head_dim, "ffn": m.ffn_hidden,
                     "vocab": m.vocab, "tied_embeddings": m.tied_embeddings, "r": r, "lora_alpha": 2 * r,
                     "lora_dropout": 0.05, "targets": tname, "target_modules": ";".join(targets),
                     "n_adapted_modules": n_adapted, "trainable_params": trainable, "total_params": total,
                     "base_params": total - trainable, "catalogue_params": entry.published_params,
                     "peft_version": peft.__version__, "torch_version": torch.__version__,
                     "transformers_version": transformers.__version__, "measured_on": today})
        print(f"{name:11s} r={r:2d} {tname:10s} trainable={trainable:>11,} total={total:>14,} "
              f"base={'ok' if total - trainable == entry.published_params else 'MISMATCH'}", flush=True)
        del pm, base
    write_csv(args.out, rows)
    print(f"wrote {len(rows)} rows to {args.out}")
