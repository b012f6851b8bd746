"""Sub-command ``mask``: what an attention mask changes in the tensors a Hugging Face Llama saves (issue 26).

Hugging Face's SDPA path (``transformers/integrations/sdpa_attention.py``, 5.23) calls
``F.scaled_dot_product_attention(..., enable_gqa=True)`` with K and V at the KV heads' width only when
``use_gqa_in_sdpa`` holds: on CUDA and CPU, ``attention_mask is None`` (and head_dim <= 256). A padded batch
passes a mask, so HF repeats K and V to every query head first (``repeat_kv``) and SDPA saves the repeated copies
for its backward. This experiment measures it on the `step` sweep's small HF ``LlamaForCausalLM`` (GQA, 8 query
heads over 2 KV heads; random seeded weights, nothing downloaded) on the CPU, with ``attn_implementation="sdpa"``
and three inputs:

* ``none``: no ``attention_mask`` (what chapter 5's other measurements pass);
* ``ones``: an all-ones ``attention_mask`` (what a tokenizer returns for an unpadded batch; HF's mask builder
  may drop it, and the rows show whether it does);
* ``padded``: the last quarter of the first sequence padded (mask 0, label -100), as a right-padded batch.

It writes data/masked_sdpa.csv, one row per configuration::

  model, layers, hidden, heads, kv_heads, head_dim, ffn, vocab   the shape
  mode, param_dtype            fp32 / bf16 (model.to(bf16)) / autocast-bf16, as in `step`
  mask                         none / ones / padded (above); mask_passed: whether SDPA received a mask tensor
  batch, seq
  saved_layer_bytes            storages saved for backward by decoder layer 1, deduplicated by storage
                               (parameters, inputs, autocast's weight copies and tensors shared by all layers
                               -- rotary tables, the mask itself -- left out)
  saved_kv_bytes               of those, the K and V SDPA saved (the tensors SDPA saves other than Q, output and
                               log-sum-exp: kv_width says their width in columns, g*d or a*d)
  saved_shared_bytes           storages saved in layer 1 but made outside the layers or saved by several
                               (the rotary tables; HF's boolean mask itself is not saved: each layer's SDPA saves
                               its own additive copy, which counts in saved_layer_bytes)
  forward_end_bytes            live bytes (beyond the baseline) when the forward with the loss returns
  peak_bytes, peak_phase       the step's maximum live bytes beyond the baseline, and its phase
  attention_impl, loss, torch_version, transformers_version, measured_on
"""

from __future__ import annotations

import itertools
import re

import torch

from .core import (MODES, ModuleTagger, PhaseMarkers, adamw, attention_impl, date_today, dtype_name, is_weight_copy,
                   measured_step, phase_columns, saved_storage, start_tracker, token_batch, warm_up, write_csv)
from .step import HF_CLASSES, STEP_SHAPES, _hf_config

MASKS = ("none", "ones", "padded")
_LAYER_RE = re.compile(r"(?:^|\.)layers\.(\d+)(?:\.|$)")


def _inputs(vocab, batch, seq, mask):
    ids, labels = token_batch(vocab, batch, seq)
    if mask == "none":
        return ids, labels, None
    am = torch.ones(batch, seq, dtype=torch.long)
    if mask == "padded":
        pad = seq // 4
        am[0, seq - pad:] = 0
        labels[0, seq - pad:] = -100
    return ids, labels, am


def measure_mask(*, mode, mask, batch, seq, key="llama", layer=1):
    import transformers as tf

    torch.manual_seed(0)
    m = STEP_SHAPES[key]
    model = getattr(tf, HF_CLASSES[key])(_hf_config(key, "sdpa")).to(MODES[mode]).train()
    params = list(model.parameters())
    opt = adamw(params, "foreach")
    ids, labels, am = _inputs(m.vocab, batch, seq, mask)

    def loss_fn():
        kw = {} if am is None else {"attention_mask": am}
        return model(input_ids=ids, labels=labels, use_cache=False, **kw).loss

    warm_up(loss_fn, opt, mode)
    extra = [am] if am is not None else []
    tr, _ = start_tracker(params, opt, model.buffers(), ids, labels)
    tr.add_baseline(extra)
    tagger = ModuleTagger(model, tr)
    stack = tagger.stack
    seen = {"mask_passed": False}

    # which tensors SDPA itself saves: wrap the function the integration calls
    orig = torch.nn.functional.scaled_dot_product_attention

    def sdpa(q, k, v, attn_mask=None, *a, **kw):
        seen["mask_passed"] |= attn_mask is not None
        mod = stack[-1]
        mm = _LAYER_RE.search(mod)
        if mm and int(mm.group(1)) == layer:
            seen["kv_ptrs"] = {k.untyped_storage().data_ptr(), v.untyped_storage().data_ptr()}
            seen["kv_width"] = k.shape[1] * k.shape[-1]
            seen["mask_ptr"] = attn_mask.untyped_storage().data_ptr() if attn_mask is not None else None
        return orig(q, k, v, attn_mask, *a, **kw)

    saved = {}

    def pack(t):
        st = saved_storage(t, tr.param_ptrs)
        if st is None:
            return t
        ptr = st.data_ptr()
        mm = _LAYER_RE.search(stack[-1])
        rec = saved.setdefault(ptr, {"nbytes": st.nbytes(), "keep": st, "layers": set(), "wc": is_weight_copy(t),
                                     "created": (tr.known.get(ptr) or [0, "-", "-"])[2],
                                     "base": (tr.known.get(ptr) or [0, "-", "-", "-"])[3]})
        rec["layers"].add(int(mm.group(1)) if mm else None)
        return t

    markers = PhaseMarkers(tr)
    handles = markers.install(model.lm_head, model.model.norm)
    torch.nn.functional.scaled_dot_product_attention = sdpa
    try:
        lossval, ends, _ = measured_step(tr, loss_fn, opt, mode, pack=pack)
    finally:
        torch.nn.functional.scaled_dot_product_attention = orig
        tagger.remove()
        for h in handles:
            h.remove()
    cols = phase_columns(tr, markers.info, ends, 0)
    own = shared = kv = 0
    for ptr, rec in saved.items():
        if layer not in rec["layers"] or rec["wc"] or rec["base"] == "baseline":
            continue
        is_shared = len(rec["layers"]) > 1 or not _LAYER_RE.search(rec["created"] or "")
        if is_shared:
            shared += rec["nbytes"]
            continue
        own += rec["nbytes"]
        if ptr in seen.get("kv_ptrs", ()):
            kv += rec["nbytes"]
    return {
        "model": m.name, "layers": m.layers, "hidden": m.hidden, "heads": m.heads, "kv_heads": m.kv_heads,
        "head_dim": m.head_dim, "ffn": m.ffn_hidden, "vocab": m.vocab, "mode": mode,
        "param_dtype": dtype_name(params[0].dtype), "mask": mask, "mask_passed": seen["mask_passed"],
        "batch": batch, "seq": seq, "saved_layer_bytes": own, "saved_kv_bytes": kv, "kv_width": seen["kv_width"],
        "saved_shared_bytes": shared,
        "forward_end_bytes": ends["forward_end"] - tr.baseline,
        "peak_bytes": cols["peak_bytes"] - tr.baseline, "peak_phase": cols["peak_phase"],
        "attention_impl": attention_impl("sdpa", tr.ops_seen), "loss": round(lossval, 4),
    }


def mask_configurations(quick=False):
    if quick:
        return [("bf16", mk, 2, 128) for mk in MASKS]
    return list(itertools.product(("fp32", "bf16", "autocast-bf16"), MASKS, (1, 2), (128, 256, 512)))


def cmd_mask(args):
    """Sub-command ``mask``: HF Llama's saved tensors with and without an attention mask (SDPA, CPU)."""
    import transformers

    transformers.logging.set_verbosity_error()
    today = date_today()
    rows = []
    for i, (mode, mk, b, s) in enumerate(mask_configurations(args.quick), 1):
        row = measure_mask(mode=mode, mask=mk, batch=b, seq=s)
        row.update(torch_version=torch.__version__, transformers_version=transformers.__version__,
                   measured_on=today)
        rows.append(row)
        print(f"[{i:3d}] {mode:13s} {mk:6s} b={b} s={s:3d} passed={row['mask_passed']!s:5s} "
              f"layer={row['saved_layer_bytes']:9d} kv={row['saved_kv_bytes']:8d} (width {row['kv_width']}) "
              f"shared={row['saved_shared_bytes']:8d} peak={row['peak_bytes'] / 2**20:7.2f} MiB", flush=True)
    write_csv(args.out, rows)
    print(f"wrote {len(rows)} rows to {args.out}")
