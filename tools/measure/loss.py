"""Sub-command ``loss``: the bytes of HF's causal-LM loss at long context (its fp32 logits and their backward).

It writes data/loss_logits_measurements.csv: one PEFT LoRA step (r=16, all linear layers, gradient
checkpointing, batch 1) of a small HF ``LlamaForCausalLM`` built from a config (random seeded weights, nothing
downloaded) with a large vocabulary (32,000 and 128,256), at several sequence lengths, on the CPU, with the
``step`` mode's live-bytes tracker (:class:`~measure.core.LiveBytes`) and phases (:class:`~measure.core.PhaseMarkers`).
The body is tiny (2 layers, hidden 256), so the loss's tensors dominate: what the step allocates around the loss
is read as bytes per logit (per ``seq x vocab`` element).

transformers 5.23's ``ForCausalLMLoss`` (``transformers/loss/loss_utils.py``) does ``logits = logits.float()``
and then ``cross_entropy`` (``log_softmax`` + ``nll_loss``): on a bf16 base the LM head's bf16 logits get an fp32
copy, log_softmax saves its fp32 output for its backward; in the backward ``nll_loss`` writes an fp32 gradient of
the log-probabilities, ``log_softmax`` an fp32 gradient of the logits, and the cast back writes a bf16 one.

Modes: ``bf16`` (``model.to(bf16)`` before ``get_peft_model``: PEFT keeps the adapters in fp32) and
``bf16-kbit`` (the same after PEFT's ``prepare_model_for_kbit_training``, which casts every 16-bit parameter that
is not a bitsandbytes ``Params4bit`` to fp32 -- on this unquantised model that is every weight, so the LM head
is fp32 and so are its logits) and ``nf4-kbit`` (the QLoRA recipe: the model saved and reloaded with
transformers' ``BitsAndBytesConfig`` -- nf4, double quantisation, bf16 compute -- on the CPU, then
``prepare_model_for_kbit_training``, which casts the embeddings, norms and LM head to fp32, then LoRA; the step
runs under ``torch.autocast(bf16)`` as the Trainer's ``bf16=True``). ``layer_input_dtype`` is the dtype of the
second decoder layer's input, i.e. of the residual stream and of gradient checkpointing's saved inputs: fp32
after ``prepare_model_for_kbit_training``, since the fp32 embedding feeds it and bitsandbytes' ``Linear4bit``
returns its input's dtype. Columns::

  model, vocab, hidden, layers, mode, seq, batch, logits, logits_dtype, logits_grad_dtype   logits = seq x vocab
  baseline_bytes, forward_end_bytes, <phase>_max_bytes (forward, loss_forward, loss_backward, head_backward,
                               backward, optimizer), logits_grad_bytes (live when the logits get their gradient)
  loss_forward_extra_bytes     loss_forward_max - (live when the LM head returned): the loss's forward transients
  saved_loss_bytes             forward_end - live before the LM head ran, less nothing: what the forward leaves
                               alive from the LM head on (the logits' saved log-probabilities, the targets)
  loss_backward_extra_bytes    loss_backward_max - forward_end: what the loss's backward adds on top
  *_per_logit                  the three above divided by ``logits``
  peak_bytes, peak_phase, torch_version, transformers_version, peft_version, measured_on
"""

from __future__ import annotations

import itertools

import torch

from llmsizing import Model

from .core import (MODES, PhaseMarkers, adamw, date_today, dtype_name, measured_step, phase_columns, recompute_full,
                   selfcheck, start_tracker, token_batch, warm_up, write_csv)
from .peft_counts import hf_model_from_shape

LOSS_VOCABS = (32000, 128256)
LOSS_SEQS = (512, 1024, 2048, 4096)
LOSS_MODES = ("bf16", "bf16-kbit", "nf4-kbit")


def loss_shape(vocab: int) -> Model:
    return Model(f"loss-llama-v{vocab}", layers=2, hidden=256, heads=8, kv_heads=2, ffn_hidden=688, vocab=vocab,
                 gated_mlp=True, tied_embeddings=False, norm="rmsnorm", max_seq=8192)


def _nf4_reload(model):
    """The same model saved and loaded back the way QLoRA loads one: transformers' ``BitsAndBytesConfig`` (nf4,
    double quantisation, bf16 compute) on the CPU, which makes every linear layer of the blocks a bitsandbytes
    ``Linear4bit`` and leaves the embeddings, norms and LM head in bf16."""
    import tempfile

    import transformers as tf
    q = tf.BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                              bnb_4bit_compute_dtype=torch.bfloat16)
    with tempfile.TemporaryDirectory() as d:
        model.save_pretrained(d)
        qm = tf.AutoModelForCausalLM.from_pretrained(d, quantization_config=q, device_map="cpu", dtype=torch.bfloat16)
    qm.config._attn_implementation = "sdpa"
    return qm


def measure_loss(vocab, seq, mode, batch=1):
    import peft
    m = loss_shape(vocab)
    torch.manual_seed(0)
    model = hf_model_from_shape(m, "llama", "sdpa").to(MODES["bf16"])
    if mode == "nf4-kbit":
        model = _nf4_reload(model)
    recompute_full(model)
    model = model.train()
    if mode in ("bf16-kbit", "nf4-kbit"):
        model = peft.prepare_model_for_kbit_training(model, use_gradient_checkpointing=True,
                                                     gradient_checkpointing_kwargs={"use_reentrant": False})
    cfg = peft.LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, task_type="CAUSAL_LM",
                          target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
    pm = peft.get_peft_model(model, cfg).train()
    params = list({id(p): p for p in pm.parameters()}.values())
    opt = adamw([p for p in params if p.requires_grad], "foreach")
    ids, labels = token_batch(vocab, batch, seq)

    def loss_of():
        return pm(input_ids=ids, labels=labels, use_cache=False).loss

    step_mode = "autocast-bf16" if mode == "nf4-kbit" else "bf16"
    warm_up(loss_of, opt, step_mode)
    tr, input_bytes = start_tracker(params, opt, pm.buffers(), ids, labels)
    markers = PhaseMarkers(tr)
    hf = pm.get_base_model()
    before = {}

    def pre(mod, a):                  # (a hook that returns something would replace the LM head's input)
        before["head_in"] = tr.live

    def post(mod, a, o):
        before["head_out"] = tr.live

    h_pre, h_post = hf.lm_head.register_forward_pre_hook(pre), hf.lm_head.register_forward_hook(post)
    def layer_in(mod, a):
        markers.info.setdefault("layer_input_dtype", a[0].dtype)

    h_layer = hf.model.layers[1].register_forward_pre_hook(layer_in)
    handles = markers.install(hf.lm_head, hf.model.norm) + [h_pre, h_post, h_layer]
    _, ends, seconds = measured_step(tr, loss_of, opt, step_mode)
    for hd in handles:
        hd.remove()
    cols = phase_columns(tr, markers.info, ends, input_bytes)
    logits = batch * seq * vocab
    lf_extra = cols["loss_forward_max_bytes"] - before["head_out"]
    saved = ends["forward_end"] - before["head_in"]
    lb_extra = cols["loss_backward_max_bytes"] - ends["forward_end"]
    row = {"model": m.name, "vocab": vocab, "hidden": m.hidden, "layers": m.layers, "mode": mode, "seq": seq,
           "batch": batch, "logits": logits, "logits_dtype": dtype_name(markers.info.get("logits_dtype")),
           "logits_grad_dtype": dtype_name(markers.info.get("logits_grad_dtype")),
           **{k: cols[k] for k in ("baseline_bytes", "forward_max_bytes", "loss_forward_max_bytes",
                                   "forward_end_bytes", "loss_backward_max_bytes", "logits_grad_bytes",
                                   "head_backward_max_bytes", "backward_max_bytes", "optimizer_max_bytes")},
           "layer_input_dtype": dtype_name(markers.info.get("layer_input_dtype")),
           "head_in_live_bytes": before["head_in"], "head_out_live_bytes": before["head_out"],
           "loss_forward_extra_bytes": lf_extra, "saved_loss_bytes": saved, "loss_backward_extra_bytes": lb_extra,
           "loss_forward_extra_per_logit": round(lf_extra / logits, 4),
           "saved_loss_per_logit": round(saved / logits, 4),
           "loss_backward_extra_per_logit": round(lb_extra / logits, 4),
           "peak_bytes": cols["peak_bytes"], "peak_phase": cols["peak_phase"], "step_seconds": round(seconds, 2)}
    return row


def cmd_loss(args):
    """Sub-command ``loss``: the bytes of HF's fp32 loss at long context, per logit."""
    import peft
    import transformers
    transformers.logging.set_verbosity_error()
    today = date_today()
    selfcheck()
    cfgs = [(32000, 512, "bf16"), (32000, 512, "nf4-kbit")] if args.quick else \
        list(itertools.product(LOSS_VOCABS, LOSS_SEQS, LOSS_MODES))
    rows = []
    for i, (v, s, mode) in enumerate(cfgs, 1):
        row = measure_loss(v, s, mode)
        row.update(torch_version=torch.__version__, transformers_version=transformers.__version__,
                   peft_version=peft.__version__, measured_on=today)
        rows.append(row)
        print(f"[{i:2d}/{len(cfgs)}] V={v} s={s} {mode:9s} logits {row['logits_dtype']} "
              f"fwd+ {row['loss_forward_extra_per_logit']:.2f} saved {row['saved_loss_per_logit']:.2f} "
              f"bwd+ {row['loss_backward_extra_per_logit']:.2f} B/logit; peak {row['peak_bytes'] / 2**20:.0f} MiB "
              f"({row['peak_phase']})", flush=True)
    write_csv(args.out, rows)
    print(f"wrote {len(rows)} rows to {args.out}")
