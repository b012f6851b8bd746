"""Sub-command ``lora``: live bytes over one PEFT LoRA training step of small HF Llama models.

It writes data/lora_step_measurements.csv, one row per configuration: a real PEFT LoRA step (forward, HF's
in-model loss, backward, AdamW on the adapters only) of a small HF LlamaForCausalLM on the CPU, with the `step`
mode's live-bytes tracker (:class:`~measure.core.LiveBytes`) and its phases. One warm-up step creates AdamW's
states; ``zero_grad(set_to_none=True)``; then the measured step. It builds on :mod:`measure.peft_counts`: the
same ranks and target sets (:data:`PEFT_RANKS`, :data:`LORA_TARGETS`) and the same HF model builder. Columns::

  model .. tied_embeddings     the small shape (random seeded weights; nothing downloaded)
  mode, param_dtype, adapter_dtype   fp32 / bf16 (model.to(bf16) *before* get_peft_model) / autocast-bf16
                               (fp32 model, forward under CPU autocast), as in `step`. PEFT's get_peft_model
                               (autocast_adapter_dtype=True, its default) keeps the adapters in fp32 on a
                               bf16 base: adapter_dtype says what it did
  attention, attention_impl, recompute   sdpa; recompute "full" = gradient_checkpointing_enable(use_reentrant=
                               False) on the HF model before wrapping, as PEFT users do
  r, lora_alpha, lora_dropout, targets, n_adapted_modules   the LoraConfig (alpha = 2r) and targets as in `peft`
  batch, seq
  trainable_params, total_params   PeftModel.get_nb_trainable_parameters()
  base_weight_bytes            bytes of the frozen parameters (requires_grad False: the whole base model)
  adapter_bytes                bytes of the trainable parameters (lora_A, lora_B)
  grad_bytes                   gradients after the step (= adapter_bytes: frozen weights get none)
  optimizer_state_bytes, optimizer_step_bytes   AdamW exp_avg + exp_avg_sq (adapters only); the step counters
  baseline_bytes               live before the step: all parameters + AdamW states + buffers + ids/labels
  input_bytes                  ids + labels
  <phase>_max_bytes            the maximum live bytes in each phase of `step` (forward, loss_forward,
                               loss_backward, head_backward, backward, optimizer); forward_end_bytes: live bytes
                               when the forward (with the loss) returns; backward_end_bytes, optimizer_end_bytes
  peak_bytes, peak_phase       the step's maximum live bytes (baseline included) and where it happens
  saved_bytes                  storages autograd saves in the forward (deduplicated by storage; parameters,
                               buffers, inputs and autocast's weight copies left out; under recompute only what
                               is saved outside the checkpointed layers)
  saved_lora_bytes             of those, the storages saved by a LoRA module (lora_dropout, lora_A, lora_B)
  saved_lora_only_bytes        ... and saved by nothing else: the memory the adapters' path adds
  saved_lora_fp32_bytes        of saved_lora_bytes, the fp32 ones (PEFT casts a bf16 input to the fp32 adapter)
  weight_copy_forward_end_bytes   autocast's bf16 copies of weights alive at the end of the forward
  end_residual_bytes           live - (baseline + grads) after the step (0: nothing leaks)
  loss, step_seconds, peft_version, torch_version, transformers_version, measured_on
"""

from __future__ import annotations

import itertools

import torch

from llmsizing import Model

from .core import (MODES, STEP_MODES, ModuleTagger, PhaseMarkers, adamw, attention_impl, date_today, dtype_name,
                   end_state, is_weight_copy, measured_step, phase_columns, recompute_full, saved_storage, selfcheck,
                   start_tracker, token_batch, warm_up, write_csv)
from .peft_counts import LORA_TARGETS, PEFT_RANKS, hf_model_from_shape

LORA_SHAPES = {
    "llama-256": Model("lora-llama-256", layers=4, hidden=256, heads=8, kv_heads=2, ffn_hidden=688, vocab=8192,
                       gated_mlp=True, tied_embeddings=False, norm="rmsnorm", max_seq=1024),
    "llama-512": Model("lora-llama-512", layers=2, hidden=512, heads=8, kv_heads=4, ffn_hidden=1376, vocab=8192,
                       gated_mlp=True, tied_embeddings=False, norm="rmsnorm", max_seq=1024),
}


def measure_lora(key, *, mode, r, targets, dropout, recompute, batch, seq, attention="sdpa"):
    """One steady-state LoRA step (after one warm-up step), op by op; returns a CSV row."""
    import peft
    m = LORA_SHAPES[key]
    torch.manual_seed(0)
    model = hf_model_from_shape(m, "llama", attention)
    if recompute == "full":
        recompute_full(model)
    model = model.to(MODES[mode]).train()
    cfg = peft.LoraConfig(r=r, lora_alpha=2 * r, lora_dropout=dropout, target_modules=list(LORA_TARGETS[targets]),
                          task_type="CAUSAL_LM")
    pm = peft.get_peft_model(model, cfg).train()
    lora_layers = [mod for mod in pm.modules() if isinstance(mod, peft.tuners.lora.LoraLayer)]
    params = list({id(p): p for p in pm.parameters()}.values())
    trainable = [p for p in params if p.requires_grad]
    frozen = [p for p in params if not p.requires_grad]
    opt = adamw(trainable, "foreach")
    ids, labels = token_batch(m.vocab, batch, seq)

    def loss_of():
        return pm(input_ids=ids, labels=labels, use_cache=False).loss

    warm_up(loss_of, opt, mode)
    tr, input_bytes = start_tracker(params, opt, pm.buffers(), ids, labels)
    markers = PhaseMarkers(tr)
    hf = pm.get_base_model()
    handles = markers.install(hf.lm_head, hf.model.norm)
    tagger = ModuleTagger(pm, tr)
    saved = {}                        # ptr -> [nbytes, saved by a lora module, saved by another, dtype]

    def pack(t):
        st = saved_storage(t, tr.param_ptrs)
        if st is None:
            return t
        ptr = st.data_ptr()
        k = tr.known.get(ptr)
        if (k and k[3] == "baseline") or is_weight_copy(t):
            return t
        rec = saved.setdefault(ptr, [st.nbytes(), False, False, t.dtype])
        rec[1 if ".lora_" in tagger.stack[-1] else 2] = True
        return t

    lossval, ends, seconds = measured_step(tr, loss_of, opt, mode, pack=pack, after_forward=tagger.remove)
    for hd in handles:
        hd.remove()
    end = end_state(tr, params, opt)
    n_trainable, n_total = pm.get_nb_trainable_parameters()
    lora_saved = [v for v in saved.values() if v[1]]
    row = {
        "model": m.name, "model_class": type(hf).__name__, "layers": m.layers, "hidden": m.hidden,
        "heads": m.heads, "kv_heads": m.kv_heads, "head_dim": m.head_dim, "ffn": m.ffn_hidden, "vocab": m.vocab,
        "tied_embeddings": m.tied_embeddings, "mode": mode, "param_dtype": dtype_name(frozen[0].dtype),
        "adapter_dtype": dtype_name(trainable[0].dtype), "attention": attention,
        "attention_impl": attention_impl(attention, tr.ops_seen), "recompute": recompute,
        "r": r, "lora_alpha": 2 * r, "lora_dropout": dropout, "targets": targets,
        "n_adapted_modules": len(lora_layers), "batch": batch, "seq": seq,
        "trainable_params": n_trainable, "total_params": n_total,
        "base_weight_bytes": sum(p.untyped_storage().nbytes() for p in frozen),
        "adapter_bytes": sum(p.untyped_storage().nbytes() for p in trainable),
        "grad_bytes": end["grad_bytes"], "optimizer_state_bytes": end["optimizer_state_bytes"],
        "optimizer_step_bytes": end["optimizer_step_bytes"],
        **phase_columns(tr, markers.info, ends, input_bytes),
        "saved_bytes": sum(v[0] for v in saved.values()),
        "saved_lora_bytes": sum(v[0] for v in lora_saved),
        "saved_lora_only_bytes": sum(v[0] for v in lora_saved if not v[2]),
        "saved_lora_fp32_bytes": sum(v[0] for v in lora_saved if v[3] == torch.float32),
        "weight_copy_forward_end_bytes": ends["wc_forward_end"], "end_residual_bytes": end["end_residual_bytes"],
        "loss": round(lossval, 4), "step_seconds": round(seconds, 3),
    }
    return row


def lora_configurations(quick=False):
    """(key, mode, r, targets, dropout, recompute, batch, seq), deduplicated, around b=2, s=256."""
    if quick:
        return [("llama-256", "fp32", 16, "all-linear", 0.0, "none", 2, 128),
                ("llama-256", "bf16", 16, "attention", 0.05, "none", 2, 128),
                ("llama-256", "fp32", 16, "all-linear", 0.0, "full", 2, 128)]
    out = []
    for key in LORA_SHAPES:
        for mode, r, tg in itertools.product(STEP_MODES, PEFT_RANKS, LORA_TARGETS):
            out.append((key, mode, r, tg, 0.0, "none", 2, 256))                    # rank x targets
        for mode, (b, s) in itertools.product(("fp32", "bf16"), ((1, 128), (1, 512), (4, 256), (2, 512))):
            out.append((key, mode, 16, "all-linear", 0.0, "none", b, s))          # batch, sequence
        for mode, tg in itertools.product(STEP_MODES, LORA_TARGETS):
            out.append((key, mode, 16, tg, 0.0, "full", 2, 256))                  # checkpointing
            out.append((key, mode, 16, tg, 0.05, "none", 2, 256))                 # adapter dropout
        out.append((key, "fp32", 64, "all-linear", 0.0, "full", 2, 256))
        out.append((key, "fp32", 16, "all-linear", 0.05, "full", 2, 256))
    return list(dict.fromkeys(out))


def cmd_lora(args):
    """Sub-command ``lora``: live bytes over one PEFT LoRA training step of small HF Llama models."""
    import peft
    import transformers
    transformers.logging.set_verbosity_error()
    today = date_today()
    selfcheck()
    rows = []
    cfgs = lora_configurations(args.quick)
    for i, (key, mode, r, tg, dp, rc, b, s) in enumerate(cfgs, 1):
        row = measure_lora(key, mode=mode, r=r, targets=tg, dropout=dp, recompute=rc, batch=b, seq=s)
        row.update(peft_version=peft.__version__, torch_version=torch.__version__,
                   transformers_version=transformers.__version__, measured_on=today)
        rows.append(row)
        print(f"[{i:3d}/{len(cfgs)}] {key} {mode:13s} r={r:2d} {tg:10s} drop={dp} {rc:4s} b={b} s={s:3d} "
              f"peak={row['peak_bytes'] / 2**20:7.2f} MiB ({row['peak_phase']}) "
              f"base={row['base_weight_bytes'] / 2**20:.2f} "
              f"adapt={row['adapter_bytes'] / 2**10:.0f} KiB saved={row['saved_bytes'] / 2**20:.2f} "
              f"(lora {row['saved_lora_bytes'] / 2**20:.2f}, only {row['saved_lora_only_bytes'] / 2**20:.2f}) "
              f"resid={row['end_residual_bytes']}", flush=True)
    write_csv(args.out, rows)
    print(f"wrote {len(rows)} rows to {args.out}")
