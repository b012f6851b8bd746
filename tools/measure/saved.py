"""Sub-command ``saved``: the tensors autograd saves for backward, of the book's own module code (chapter 5).

It builds small GPT-style and Llama-style decoder-only transformers *from an* :class:`llmsizing.Model`, so the
PyTorch modules and the library's prediction use exactly the same shapes, with random (seeded) weights; nothing
is downloaded. For each configuration it runs one training step (forward, cross-entropy on random targets,
backward, AdamW step) on the CPU and records

* parameter, gradient and optimizer-state bytes (sum of ``nbytes`` of the tensors the step leaves behind);
* activation bytes: every tensor autograd saves for the backward pass, captured with
  ``torch.autograd.graph.saved_tensors_hooks``, deduplicated by storage (``untyped_storage().data_ptr()``), and
  excluding parameters, views of parameters (``weight.t()``) and autocast's 16-bit copies of the weights
  (reported separately). Each storage is attributed to the component (norms, attention, MLP, ...) of the
  module that saved it last, using forward pre-hooks that tag the running module.
* with recomputation (checkpointing), the peak: everything saved in the forward plus the new tensors the
  most expensive layer saves while it is rebuilt during backward (tensors already alive since the forward,
  such as a checkpoint's inputs, are not counted twice).

CPU memory is measured, not time, so a laptop is enough: the whole sweep takes a few minutes on 2 cores.
torch is an optional, heavy dependency: the book only reads the CSVs this tool writes.

What torch 2.13 on the CPU does (found by this tool, discussed in chapter 5):

* dropout keeps a mask of the activation's dtype (0 or 1/(1-p)), not CUDA's 1-byte mask; the CSV gives both
  the bytes and the element count of the masks (``mask_bytes``, ``mask_elements``);
* ``scaled_dot_product_attention`` runs ``_scaled_dot_product_flash_attention_for_cpu`` (saves q, k, v, out and
  an fp32 log-sum-exp) without dropout, but the "math" path (fp32 s^2 tensors) with dropout, hence the
  :class:`~measure.book_modules.FlashAttentionFn` stand-in for flash with dropout;
* LayerNorm keeps its mean/rstd in the input dtype (bf16 in bf16; CUDA keeps fp32);
* ``F.rms_norm`` is a composite that saves fp32 copies (hence :class:`~measure.book_modules.RMSNormFn`, a
  fused-kernel stand-in);
* autocast runs ``layer_norm`` in fp32 and keeps ``softmax`` in bf16; every linear layer saves its own bf16
  cast of an fp32 input. (More precisely: CPU autocast leaves ``layer_norm`` alone, so it runs in the dtype of
  its input, which is the fp32 residual stream of an fp32 model; CUDA autocast casts it to fp32 whatever the
  input. On CPU only matmul-like ops are cast down to bf16 and only the losses (``cross_entropy``,
  ``nll_loss``, ...) up to fp32; ``softmax``, ``log_softmax``, ``pow``, ``rsqrt``, ``exp``, ``sum`` and
  ``mean`` keep their input's dtype, while CUDA runs them in fp32.)
"""

from __future__ import annotations

import itertools

import torch

from llmsizing import Model
from llmsizing.activations import ACT_COMPONENTS

from .book_modules import TAGGER, Transformer
from .core import MODES, autocast, date_today, is_weight_copy, optimizer_states, saved_storage, write_csv

# The two tiny models of the sweep. Same fields as the catalogue's real models, only smaller.
GPT = Model("tiny-gpt", layers=4, hidden=256, heads=4, ffn_hidden=1024, vocab=2048, gated_mlp=False,
            tied_embeddings=True, norm="layernorm", bias=True, learned_pos=True, max_seq=512)
LLAMA = Model("tiny-llama", layers=4, hidden=256, heads=8, kv_heads=2, ffn_hidden=688, vocab=2048,
              gated_mlp=True, tied_embeddings=False, norm="rmsnorm", max_seq=512)


class SavedTensors:
    """Records every tensor autograd saves, once per storage, by phase (forward / recomputation in backward)."""

    def __init__(self, params):
        self.param_ptrs = {p.untyped_storage().data_ptr() for p in params}
        self.phase = "forward"
        self.store = {}               # (phase, layer or None, ptr) -> record
        self.weight_copies = {}

    def pack(self, t):
        st = saved_storage(t, self.param_ptrs)
        if st is None:
            return t
        ptr = st.data_ptr()
        if is_weight_copy(t):
            self.weight_copies[ptr] = st.nbytes()
            return t
        if self.phase == "backward" and ("forward", None, ptr) in self.store:
            return t                  # already alive since the forward (e.g. a checkpoint's input): not new memory
        key = (self.phase, TAGGER.layer if self.phase == "backward" else None, ptr)
        rec = self.store.get(key)
        comp = TAGGER.stack[-1]
        if rec is None:
            self.store[key] = rec = {"nbytes": st.nbytes(), "keep": st, "layer": TAGGER.layer,
                                     "dtype": t.dtype, "shape": tuple(t.shape), "mask": TAGGER.in_dropout > 0,
                                     "producer": type(t.grad_fn).__name__ if t.grad_fn else "-"}
        rec["component"] = comp       # the last module that saves a storage gets it
        return t

    @staticmethod
    def unpack(t):
        return t

    def records(self, phase):
        return [r for (ph, _, _), r in self.store.items() if ph == phase]


def measure(m: Model, *, batch, seq, mode, attention, dropout, recompute, seed=0, listing=False):
    """One training step of ``m``; returns a dict (one CSV row) and, with ``listing``, the saved tensors of
    layer 0 (or of the whole step for full recomputation)."""
    torch.manual_seed(seed)
    dtype = MODES[mode]
    model = Transformer(m, attention=attention, dropout=dropout, recompute=recompute).to(dtype).train()
    TAGGER.__init__()
    TAGGER.install(model)
    params = list(model.parameters())
    opt = torch.optim.AdamW(params, lr=1e-4)
    ids = torch.randint(0, m.vocab, (batch, seq))
    targets = torch.randint(0, m.vocab, (batch, seq))
    rec = SavedTensors(params)
    loss = None
    with torch.autograd.graph.saved_tensors_hooks(rec.pack, rec.unpack):
        with autocast(mode):
            loss = model(ids, targets)
        rec.phase = "backward"        # recomputation (checkpointing) saves again during backward
        loss.backward()
    opt.step()

    fwd = rec.records("forward")
    comps = dict.fromkeys(ACT_COMPONENTS, 0)
    for r in fwd:
        comps[r["component"] if r["component"] in comps else "residuals"] += r["nbytes"]
    by_layer = {}
    for r in rec.records("backward"):
        by_layer.setdefault(r["layer"], []).append(r)
    peak_layer = max(by_layer, key=lambda i: sum(r["nbytes"] for r in by_layer[i]), default=None)
    work = by_layer.get(peak_layer, [])
    work_bytes = sum(r["nbytes"] for r in work)
    counted = list(fwd)
    if recompute != "none":           # one layer's rebuilt tensors are alive while it is recomputed
        counted += work
        for r in work:
            comps[r["component"] if r["component"] in comps else "residuals"] += r["nbytes"]
    masks = [r for r in counted if r["mask"]]
    mask_bytes = sum(r["nbytes"] for r in masks)
    mask_elem = sum(r["nbytes"] // r["dtype"].itemsize for r in masks)
    row = {
        "model": m.name, "style": "gpt" if m.norm == "layernorm" else "llama",
        "layers": m.layers, "hidden": m.hidden, "heads": m.heads, "kv_heads": m.kv_heads,
        "head_dim": m.head_dim, "ffn": m.ffn_hidden, "vocab": m.vocab, "max_seq": m.max_seq,
        "norm": m.norm, "gated_mlp": m.gated_mlp, "bias": m.bias, "learned_pos": m.learned_pos,
        "tied_embeddings": m.tied_embeddings,
        "batch": batch, "seq": seq, "mode": mode, "attention": attention,
        "attention_impl": model.layers[0].attn.core.impl, "dropout": dropout, "recompute": recompute,
        "act_bytes": sum(r["nbytes"] for r in counted),
        "act_forward_bytes": sum(r["nbytes"] for r in fwd),
        "act_recompute_peak_bytes": work_bytes,
        **{f"act_{k}": v for k, v in comps.items()},
        "mask_bytes": mask_bytes, "mask_elements": int(mask_elem),
        "act_fp32_bytes": sum(r["nbytes"] for r in counted if r["dtype"] == torch.float32),
        "weight_copy_bytes": sum(rec.weight_copies.values()),
        "n_params": sum(p.numel() for p in params),
        "param_bytes": sum(p.nbytes for p in params),
        "grad_bytes": sum(p.grad.nbytes for p in params if p.grad is not None),
        "optimizer_bytes": sum(t.nbytes for t in optimizer_states(opt)),
        "optimizer_step_bytes": sum(t.nbytes for t in optimizer_states(opt, counters=True)),
        "n_param_tensors": len(params),
        "loss": round(loss.item(), 4),
    }
    listing_rows = []
    if listing:
        src = [r for r in fwd if r["layer"] == 0 or r["component"] in ("embedding", "logits", "residuals")]
        for r in sorted(src, key=lambda r: (ACT_COMPONENTS.index(r["component"])
                                            if r["component"] in ACT_COMPONENTS else 99, -r["nbytes"])):
            listing_rows.append({"model": m.name, "mode": mode, "attention": attention, "dropout": dropout,
                                 "recompute": recompute, "batch": batch, "seq": seq,
                                 "component": r["component"], "layer": r["layer"], "producer": r["producer"],
                                 "shape": "x".join(map(str, r["shape"])) or "scalar",
                                 "dtype": str(r["dtype"]).replace("torch.", ""), "nbytes": r["nbytes"]})
    return row, listing_rows


# ============================================================================ the sweep
def configurations(quick=False):
    """(model, batch, seq, mode, attention, dropout, recompute), deduplicated, around a base point."""
    out = []
    seqs = (64, 128, 256, 512) if not quick else (64, 128)
    for m in ((GPT, LLAMA) if not quick else (GPT,)):
        drops = (0.0, 0.1) if m is GPT else (0.0,)
        for mode, att, s, dp in itertools.product(MODES, ("eager", "flash"), seqs, drops):
            out.append((m, 2, s, mode, att, dp, "none"))                         # sequence length
        for mode, att, b in itertools.product(("bf16", "fp32"), ("eager", "flash"), (1, 2, 4, 8)):
            out.append((m, b, 256 if not quick else 64, mode, att, 0.0, "none"))  # batch
        for mode, att, dp, rc in itertools.product(MODES, ("eager", "flash"), drops,
                                                   ("none", "selective", "full")):
            out.append((m, 2, 256 if not quick else 64, mode, att, dp, rc))     # recomputation
    seen, uniq = set(), []
    for c in out:
        key = (c[0].name,) + c[1:]
        if key not in seen:
            seen.add(key)
            uniq.append(c)
    return uniq


LISTINGS = [(GPT, 2, 256, "bf16", "eager", 0.1, "none"), (GPT, 2, 256, "autocast-bf16", "eager", 0.0, "none"),
            (GPT, 2, 256, "bf16", "flash", 0.0, "none"), (LLAMA, 2, 256, "bf16", "flash", 0.0, "none")]


def cmd_saved(args):
    """Sub-command ``saved``: the tensors autograd saves, of the book's own module code (the original experiment)."""
    today = date_today()
    rows = []
    cfgs = configurations(args.quick)
    for i, (m, b, s, mode, att, dp, rc) in enumerate(cfgs, 1):
        row, _ = measure(m, batch=b, seq=s, mode=mode, attention=att, dropout=dp, recompute=rc)
        row.update(torch_version=torch.__version__, measured_on=today)
        rows.append(row)
        print(f"[{i:3d}/{len(cfgs)}] {m.name:10s} b={b} s={s:3d} {mode:13s} {att:5s} drop={dp} {rc:9s} "
              f"act={row['act_bytes'] / 2**20:8.2f} MiB", flush=True)
    write_csv(args.out, rows)
    listing = []
    for m, b, s, mode, att, dp, rc in LISTINGS:
        listing += measure(m, batch=b, seq=s, mode=mode, attention=att, dropout=dp, recompute=rc,
                           listing=True)[1]
    write_csv(args.tensors_out, listing)
    print(f"wrote {len(rows)} rows to {args.out} and {len(listing)} rows to {args.tensors_out}")
