"""Sub-command ``step``: live bytes over one whole training step, real HF models and the book's fused stack.

A live-bytes tracker (:class:`~measure.core.LiveBytes`, a ``TorchDispatchMode``) sees every op, also in backward
(the autograd engine runs CPU backward on the calling thread; :func:`~measure.core.selfcheck` verifies it against a
hand-computed gradient size). Each new output storage adds its ``nbytes`` to a running count and a
``weakref.finalize`` on the storage subtracts it when the storage is freed. Storages alive before the step
(parameters, AdamW states, buffers, the input ids and labels) are the baseline. After the step (and dropping the
loss) the count must equal baseline + gradients; ``end_residual_bytes`` in the CSV is that difference (0 in every
row). Blind spot: scratch buffers a kernel allocates internally and never returns as a tensor.

Models: real Hugging Face ``transformers`` classes built from small config objects (random, seeded weights;
nothing is downloaded): ``GPT2LMHeadModel`` (gelu_new), ``LlamaForCausalLM`` (GQA 8/2 heads, untied),
``Qwen2ForCausalLM`` (GQA, QKV bias, tied), and, as stack ``fused``, the book's own
:class:`~measure.book_modules.Transformer` with its stand-ins (named in the CSV's ``stand_ins`` column) at the
same shapes. One warm-up step creates the AdamW states; ``zero_grad(set_to_none=True)``; then one measured step
with the phases

* ``forward`` (until the LM head's output, the logits), ``loss_forward`` (HF computes the loss inside the
  model from ``labels``, its ForCausalLMLoss upcasting the logits to fp32; the model's outputs are then
  dropped, as the HF Trainer does), ``forward_end_bytes`` (live bytes when the forward returns);
* ``loss_backward`` (until the gradient w.r.t. the logits exists: a tensor hook on the logits),
  ``head_backward`` (LM head + final norm: until the final norm's input has its gradient), ``backward``
  (the rest);
* ``optimizer`` (AdamW ``foreach``, for-loop, or ``fused``).

Modes: ``fp32``; ``bf16`` (``model.to(torch.bfloat16)``, pure); ``autocast-bf16`` (fp32 model, forward under
``torch.autocast("cpu", dtype=torch.bfloat16)``, backward and step outside it, as the HF Trainer's bf16=True).
Recompute ``full`` is ``model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant":
False})`` (transformers 5.23 warns the name becomes ``activation_checkpointing_enable`` in v6).

It writes data/step_measurements.csv (one row per configuration), data/step_timeline_example.csv (live bytes
after every op of one configuration, with the phase) and data/step_saved_tensors.csv (the storages one decoder
layer saves for backward, deduplicated by storage, with the module that saved and the one that made each,
parameters and views of them left out, autocast's bf16 weight copies as ``kind=weight_copy``, tensors shared
by all layers -- rotary tables -- as ``kind=shared``; ``term`` names the size, e.g. ``b*s*h``).
"""

from __future__ import annotations

import itertools
import math
import re
import time

import torch

from llmsizing import Model

from .book_modules import Transformer
from .core import (MODES, STEP_MODES, LiveBytes, ModuleTagger, PhaseMarkers, adamw, attention_impl, autocast,
                   date_today, dtype_name, end_state, is_weight_copy, measured_step, phase_columns, recompute_full,
                   saved_storage, selfcheck, start_tracker, token_batch, warm_up, write_csv)

# ============================================================================ the models of `step`
# One llmsizing.Model per shape: the HF config and the fused stack's modules are both built from it.
STEP_SHAPES = {
    "gpt2": Model("step-gpt2", layers=4, hidden=256, heads=4, ffn_hidden=1024, vocab=16384, gated_mlp=False,
                  tied_embeddings=True, norm="layernorm", bias=True, learned_pos=True, max_seq=512),
    "llama": Model("step-llama", layers=4, hidden=256, heads=8, kv_heads=2, ffn_hidden=688, vocab=32000,
                   gated_mlp=True, tied_embeddings=False, norm="rmsnorm", max_seq=512),
    "qwen2": Model("step-qwen2", layers=4, hidden=256, heads=8, kv_heads=2, ffn_hidden=688, vocab=16384,
                   gated_mlp=True, tied_embeddings=True, norm="rmsnorm", qkv_bias=True, max_seq=512),
}
HF_CLASSES = {"gpt2": "GPT2LMHeadModel", "llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM"}
#: The ``model_class`` of the fused stack in the CSVs: where :class:`~measure.book_modules.Transformer` lived when
#: the committed data were measured (tools/measure_memory.py was one script then). Kept, so that a new run
#: writes the same strings as the committed CSVs.
FUSED_MODEL_CLASS = "tools.measure_memory.Transformer"
FUSED_STAND_INS = {
    "gpt": "LayerNorm=F.layer_norm; GELU=F.gelu(tanh); eager=matmul+softmax (GQA folded, no K/V copy); "
           "sdpa=F.scaled_dot_product_attention; loss=F.cross_entropy on .float() logits",
    "llama": "RMSNorm=RMSNormFn (fused-kernel stand-in: saves input + fp32 rstd); SwiGLU=SwiGLUFn (fused-kernel stand-in: saves gate and up, recomputes SiLU); "
             "Rotary (rotate-half, tables in activation dtype); eager=matmul+softmax (GQA folded); "
             "sdpa=F.scaled_dot_product_attention(enable_gqa); loss=F.cross_entropy on .float() logits",
}


def _hf_config(key, attention):
    import transformers as tf
    m = STEP_SHAPES[key]
    if key == "gpt2":
        cfg = tf.GPT2Config(vocab_size=m.vocab, n_positions=m.max_seq, n_embd=m.hidden, n_layer=m.layers,
                            n_head=m.heads, n_inner=m.ffn_hidden, activation_function="gelu_new",
                            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0,
                            use_cache=False)
    else:
        cls = tf.LlamaConfig if key == "llama" else tf.Qwen2Config
        cfg = cls(vocab_size=m.vocab, hidden_size=m.hidden, intermediate_size=m.ffn_hidden,
                  num_hidden_layers=m.layers, num_attention_heads=m.heads, num_key_value_heads=m.kv_heads,
                  max_position_embeddings=m.max_seq, tie_word_embeddings=m.tied_embeddings,
                  attention_dropout=0.0, use_cache=False, bos_token_id=0, eos_token_id=0)
    cfg._attn_implementation = attention
    return cfg


class Harness:
    """One model of the `step` sweep, with what the phase markers need: the LM head (its output are the
    logits) and the final norm (its input's gradient marks the end of the LM-head + final-norm backward)."""

    def __init__(self, stack, key, attention, mode, recompute, seed=0):
        self.stack, self.key, self.attention, self.mode, self.recompute = stack, key, attention, mode, recompute
        torch.manual_seed(seed)
        if stack == "hf":
            import transformers as tf
            self.shape = STEP_SHAPES[key]
            self.model_class = HF_CLASSES[key]
            self.model = getattr(tf, self.model_class)(_hf_config(key, attention))
            if recompute == "full":
                recompute_full(self.model)
            base = self.model.transformer if key == "gpt2" else self.model.model
            self.final_norm = base.ln_f if key == "gpt2" else base.norm
            self.activation = self.model.config.activation_function if key == "gpt2" else self.model.config.hidden_act
            self.stand_ins = ""
        else:
            style = "gpt" if key == "gpt2" else "llama"
            self.shape = STEP_SHAPES[key]
            self.model_class = f"{FUSED_MODEL_CLASS}[{style}]"
            att = "eager" if attention == "eager" else "flash"
            self.model = Transformer(self.shape, attention=att, dropout=0.0, recompute=recompute)
            self.final_norm = self.model.head.norm
            self.activation = "gelu_tanh" if style == "gpt" else "silu"
            self.stand_ins = FUSED_STAND_INS[style]
        self.model = self.model.to(MODES[mode]).train()
        self.on_logits = None

    def loss(self, ids, labels):
        """The loss as a training loop gets it: HF computes it inside the model from ``labels`` (its
        ForCausalLMLoss upcasts the logits to fp32); the model outputs are dropped, as the HF Trainer does."""
        if self.stack == "hf":
            return self.model(input_ids=ids, labels=labels, use_cache=False).loss
        return self.model(ids, labels)

    def inputs(self, batch, seq):
        """Token ids and labels (HF: a copy of the ids, shifted inside its loss; fused: random targets)."""
        return token_batch(self.shape.vocab, batch, seq, labels_are_ids=self.stack == "hf")

    def install_markers(self, markers):
        if self.stack == "hf":
            return markers.install(self.model.lm_head, self.final_norm)
        self.model.head.on_logits = markers.on_logits
        return markers.install(None, self.final_norm)

    def remove_markers(self, handles):
        for h in handles:
            h.remove()
        if self.stack != "hf":
            self.model.head.on_logits = None


# ============================================================================ one step, op by op
def measure_step(stack, key, *, mode, attention, recompute, optimizer_impl, batch, seq, timeline=False):
    """One steady-state training step (after one warm-up step, grads set to None), op by op."""
    h = Harness(stack, key, attention, mode, recompute)
    m = h.shape
    params = list(h.model.parameters())
    opt = adamw(params, optimizer_impl)
    ids, labels = h.inputs(batch, seq)
    warm_up(lambda: h.loss(ids, labels), opt, mode)
    tr, input_bytes = start_tracker(params, opt, h.model.buffers(), ids, labels, timeline)
    markers = PhaseMarkers(tr)
    handles = h.install_markers(markers)
    lossval, ends, seconds = measured_step(tr, lambda: h.loss(ids, labels), opt, mode)
    h.remove_markers(handles)
    uniq = {p.untyped_storage().data_ptr(): p for p in params}.values()
    info = markers.info
    row = {
        "stack": stack, "model_class": h.model_class, "model": m.name,
        "layers": m.layers, "hidden": m.hidden, "heads": m.heads, "kv_heads": m.kv_heads, "head_dim": m.head_dim,
        "ffn": m.ffn_hidden, "vocab": m.vocab, "norm": m.norm, "activation": h.activation,
        "gated_mlp": m.gated_mlp, "bias": m.bias, "qkv_bias": m.qkv_bias, "tied_embeddings": m.tied_embeddings,
        "learned_pos": m.learned_pos, "max_seq": m.max_seq, "n_params": sum(p.numel() for p in uniq),
        "stand_ins": h.stand_ins,
        "mode": mode, "param_dtype": dtype_name(params[0].dtype), "attention": attention,
        "attention_impl": attention_impl(attention, tr.ops_seen), "recompute": recompute,
        "optimizer_impl": optimizer_impl, "batch": batch, "seq": seq,
        "logits_dtype": dtype_name(info.get("logits_dtype")),
        "logits_grad_dtype": dtype_name(info.get("logits_grad_dtype")),
        **phase_columns(tr, info, ends, input_bytes),
        "weight_copy_forward_end_bytes": ends["wc_forward_end"],
        "weight_copy_backward_end_bytes": ends["wc_backward_end"],
        "param_bytes": sum(p.untyped_storage().nbytes() for p in uniq), **end_state(tr, params, opt),
        "untracked_input_bytes": tr.untracked,
        "n_ops_forward": tr.phase_ops.get("forward", 0) + tr.phase_ops.get("loss_forward", 0),
        "n_ops_backward": sum(tr.phase_ops.get(p, 0) for p in ("loss_backward", "head_backward", "backward")),
        "n_ops_optimizer": tr.phase_ops.get("optimizer", 0),
        "cuda_max_memory_allocated_bytes": (torch.cuda.max_memory_allocated() if torch.cuda.is_available() else ""),
        "loss": round(lossval, 4), "step_seconds": round(seconds, 3),
    }
    return row, tr


def _weight_copy_max(tr):
    return max((wc for _, _, _, wc in tr.timeline), default=0) if tr.timeline else ""


# ============================================================================ saved tensors of one layer
_LAYER_RE = re.compile(r"(?:^|\.)(?:layers|h)\.(\d+)(?:\.|$)")


def _term(elems, shape, m, b, s):
    """Which size a saved storage has, as a symbol: elements = b*s*X (X in h, f, g*d, a*s, ...)."""
    cands = [("h", m.hidden), ("3h", 3 * m.hidden), ("f", m.ffn_hidden), ("2f", 2 * m.ffn_hidden),
             ("a*d", m.heads * m.head_dim), ("g*d", m.kv_heads * m.head_dim),
             ("2g*d", 2 * m.kv_heads * m.head_dim), ("(a+2g)*d", (m.heads + 2 * m.kv_heads) * m.head_dim),
             ("a*s", m.heads * s), ("s", s), ("a", m.heads), ("1", 1)]
    if elems % (b * s) == 0:
        x = elems // (b * s)
        for name, v in cands:
            if v == x:
                return "b*s*" + name
    for name, v in (("s*d", s * m.head_dim), ("s*s", s * s), ("s", s), ("d", m.head_dim), ("h", m.hidden)):
        if elems == v:
            return name
    return "other"


def list_saved(stack, key, *, mode, attention, batch=2, seq=80, layer=1):
    """The storages autograd saves in decoder layer ``layer`` during one forward (deduplicated by storage)."""
    h = Harness(stack, key, attention, mode, "none")
    m = h.shape
    params = list(h.model.parameters())
    ids, labels = h.inputs(batch, seq)
    tr = LiveBytes()
    tr.add_baseline(params, params)
    tr.add_baseline(list(h.model.buffers()) + [ids, labels])
    tagger = ModuleTagger(h.model, tr)
    saved = {}                        # ptr -> record

    def pack(t):
        st = saved_storage(t, tr.param_ptrs)
        if st is None:
            return t
        ptr = st.data_ptr()
        mod = tagger.stack[-1]
        mm = _LAYER_RE.search(mod)
        lay = int(mm.group(1)) if mm else None
        rec = saved.get(ptr)
        if rec is None:
            k = tr.known.get(ptr)
            cat = k[3] if k else "untracked"
            if cat == "activation" and is_weight_copy(t):
                cat = "weight_copy"
            saved[ptr] = rec = {"nbytes": st.nbytes(), "keep": st, "dtype": t.dtype, "shape": tuple(t.shape),
                                "elems": st.nbytes() // t.element_size(), "op": k[1] if k else "-",
                                "created_in": k[2] if k else "-", "kind": cat, "savers": [], "layers": set()}
        if mod not in rec["savers"]:
            rec["savers"].append(mod)
        rec["layers"].add(lay)
        return t

    with tr, torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        with autocast(mode):
            loss = h.loss(ids, labels)
    tagger.remove()
    rows = []
    for rec in saved.values():
        if layer not in rec["layers"]:
            continue
        shared = len(rec["layers"]) > 1 or not _LAYER_RE.search(rec["created_in"] or "")
        kind = rec["kind"]
        if kind == "baseline":
            kind = "buffer_or_input"
        elif kind == "activation" and shared:
            kind = "shared"   # saved by several layers or made outside the layers (rotary tables, masks)
        rows.append({"stack": stack, "model_class": h.model_class, "mode": mode, "attention": attention,
                     "attention_impl": attention_impl(attention, tr.ops_seen), "batch": batch, "seq": seq,
                     "hidden": m.hidden, "ffn": m.ffn_hidden, "heads": m.heads, "kv_heads": m.kv_heads,
                     "head_dim": m.head_dim, "layer": layer,
                     "saved_by": ";".join(rec["savers"]), "created_in": rec["created_in"], "op": rec["op"],
                     "kind": kind, "shape": "x".join(map(str, rec["shape"])) or "scalar",
                     "dtype": dtype_name(rec["dtype"]), "elements": rec["elems"], "nbytes": rec["nbytes"],
                     "term": _term(rec["elems"], rec["shape"], m, batch, seq)})
    del loss
    return rows


# ============================================================================ the sweep
def step_configurations(quick=False):
    """(stack, key, mode, attention, recompute, optimizer_impl, batch, seq), deduplicated."""
    out = []
    if quick:
        for mode in STEP_MODES:
            out.append(("hf", "llama", mode, "sdpa", "none", "foreach", 1, 128))
        out += [("hf", "gpt2", "bf16", "eager", "none", "foreach", 1, 128),
                ("hf", "qwen2", "autocast-bf16", "sdpa", "full", "foreach", 1, 128),
                ("hf", "llama", "bf16", "sdpa", "none", "forloop", 1, 128),
                ("hf", "llama", "bf16", "sdpa", "none", "fused", 1, 128),
                ("fused", "llama", "bf16", "sdpa", "none", "foreach", 1, 128)]
        return out
    for key in ("llama", "gpt2", "qwen2"):
        for mode, att, s, b in itertools.product(STEP_MODES, ("eager", "sdpa"), (128, 256, 512), (1, 2)):
            out.append(("hf", key, mode, att, "none", "foreach", b, s))
        for mode, att, s in itertools.product(STEP_MODES, ("eager", "sdpa"), (256, 512)):
            out.append(("hf", key, mode, att, "full", "foreach", 2, s))
        for mode, opt in itertools.product(STEP_MODES, ("forloop", "fused")):
            out.append(("hf", key, mode, "sdpa", "none", opt, 2, 256))
    for key in ("llama", "gpt2"):
        for mode, att, s in itertools.product(STEP_MODES, ("eager", "sdpa"), (128, 256, 512)):
            out.append(("fused", key, mode, att, "none", "foreach", 2, s))
        for mode, att in itertools.product(STEP_MODES, ("eager", "sdpa")):
            out.append(("fused", key, mode, att, "full", "foreach", 2, 256))
        for mode, opt in itertools.product(STEP_MODES, ("forloop", "fused")):
            out.append(("fused", key, mode, "sdpa", "none", opt, 2, 256))
    return list(dict.fromkeys(out))


TIMELINE_CONFIG = ("hf", "llama", "autocast-bf16", "sdpa", "none", "foreach", 2, 512)


def _downsample(timeline, limit=2000):
    """At most ``limit`` rows: every k-th op, plus every phase marker and each phase's maximum."""
    keep = set()
    best = {}
    for i, (ph, op, live, _) in enumerate(timeline):
        if op.startswith("<"):
            keep.add(i)
        if live > timeline[best[ph]][2] if ph in best else True:
            best[ph] = i
    keep |= set(best.values())
    k = max(1, math.ceil(len(timeline) / max(1, limit - len(keep))))
    keep |= set(range(0, len(timeline), k))
    keep.add(len(timeline) - 1)
    return sorted(keep)


def cmd_step(args):
    """Sub-command ``step``: live bytes over one whole training step, HF models and the fused stack."""
    import transformers
    tf_version = transformers.__version__
    transformers.logging.set_verbosity_error()
    today = date_today()
    selfcheck()
    t_start = time.perf_counter()
    cfgs = step_configurations(args.quick)
    if TIMELINE_CONFIG not in cfgs:
        cfgs = [TIMELINE_CONFIG] + cfgs
    rows, timeline_rows = [], []
    for i, c in enumerate(cfgs, 1):
        stack, key, mode, att, rc, oi, b, s = c
        want_tl = c == TIMELINE_CONFIG
        row, tr = measure_step(stack, key, mode=mode, attention=att, recompute=rc, optimizer_impl=oi,
                               batch=b, seq=s, timeline=True)
        row["weight_copy_max_bytes"] = _weight_copy_max(tr)
        row.update(torch_version=torch.__version__, transformers_version=tf_version if stack == "hf" else "",
                   measured_on=today)
        rows.append(row)
        if want_tl:
            for j in _downsample(tr.timeline):
                ph, op, live, wc = tr.timeline[j]
                timeline_rows.append({"op_index": j, "phase": ph, "op": op, "live_bytes": live,
                                      "weight_copy_bytes": wc, "stack": stack, "model_class": row["model_class"],
                                      "mode": mode, "attention": att, "recompute": rc, "optimizer_impl": oi,
                                      "batch": b, "seq": s})
        print(f"[{i:3d}/{len(cfgs)}] {stack:5s} {key:5s} {mode:13s} {att:5s} {rc:4s} {oi:7s} b={b} s={s:3d} "
              f"peak={row['peak_bytes'] / 2**20:8.2f} MiB ({row['peak_phase']:13s}) base="
              f"{row['baseline_bytes'] / 2**20:7.2f} resid={row['end_residual_bytes']} "
              f"t={row['step_seconds']:.2f}s", flush=True)
    write_csv(args.out, rows)
    write_csv(args.timeline_out, timeline_rows)
    listing = []
    stacks = [("hf", k) for k in HF_CLASSES] + [("fused", "gpt2"), ("fused", "llama")]
    if args.quick:
        stacks = [("hf", "llama")]
    for (stack, key), mode, att in itertools.product(stacks, STEP_MODES, ("eager", "sdpa")):
        listing += list_saved(stack, key, mode=mode, attention=att)
    write_csv(args.tensors_out, listing)
    print(f"wrote {len(rows)} rows to {args.out}, {len(timeline_rows)} to {args.timeline_out}, "
          f"{len(listing)} to {args.tensors_out} in {time.perf_counter() - t_start:.0f} s")
