"""Sub-command ``loss-peak``: which tensors are alive at the loss-backward peak of HF GPT-2 fp32 steps (issue 22).

The issue reported the library's loss-backward peak 6-11% under the measured one for GPT-2 in fp32 at 512-1,024
tokens, and asked for the missing tensor. This runs the ``step`` measurement (same harness, same tracker) on
``GPT2LMHeadModel`` in fp32 -- at the sweep's shape (``step-gpt2``) and at the real GPT-2 shape (12 layers,
768 wide, vocabulary 50,257, 1,024 positions; random weights, nothing downloaded) -- and snapshots every
storage the tracker holds at the op where the loss backward (``loss_backward`` + ``head_backward``) reaches
its maximum, each with the op that made it and the innermost module running then (a
:class:`~measure.core.ModuleTagger`; ``-`` in the backward).

It writes data/gpt2_loss_peak_steps.csv (the ``step`` columns, one row per configuration) and
data/gpt2_loss_peak_tensors.csv (one row per configuration x category x op x module x storage size, with the
count; layer indices folded to ``*``).
"""

from __future__ import annotations

import contextlib
import re
import time

import torch

from llmsizing import Model

from . import step as st
from .core import LiveBytes, ModuleTagger, date_today, selfcheck, write_csv

#: The real GPT-2 (124M) shape, as Hugging Face's ``gpt2`` config has it.
GPT2_REAL = Model("gpt2-124m", layers=12, hidden=768, heads=12, ffn_hidden=3072, vocab=50257, gated_mlp=False,
                  tied_embeddings=True, norm="layernorm", bias=True, learned_pos=True, max_seq=1024)
#: (shape, attention, batch, seq): 512 and 1,024 tokens, the range of the issue.
CONFIGS = ([("step-gpt2", a, b, 512) for a in ("eager", "sdpa") for b in (1, 2)]
           + [("gpt2-124m", a, b, s) for a in ("eager", "sdpa") for b, s in ((1, 512), (1, 1024), (2, 512))])
_LOSS_PHASES = ("loss_backward", "head_backward")


class PeakSnapshot(LiveBytes):
    """The live-bytes tracker, keeping a copy of what is alive at the loss backward's maximum."""

    def _record(self, op):
        super()._record(op)
        if self.phase in _LOSS_PHASES and self.live > getattr(self, "peak", -1):
            self.peak, self.peak_op = self.live, op
            self.snapshot = [tuple(v[:4]) for v in self.known.values()]


@contextlib.contextmanager
def _patched(shape):
    """``step``'s harness with GPT-2 at ``shape``, its tracker a :class:`PeakSnapshot`, modules tagged."""
    saved = (st.STEP_SHAPES["gpt2"], st.start_tracker, st.Harness.install_markers)
    orig_start, orig_install = saved[1], saved[2]

    def start_tracker(*a, **k):
        tr, input_bytes = orig_start(*a, **k)
        tr.__class__ = PeakSnapshot
        return tr, input_bytes

    def install_markers(self, markers):
        self.tagger = ModuleTagger(self.model, markers.tr)
        return orig_install(self, markers)

    if shape is not None:
        st.STEP_SHAPES["gpt2"] = shape
    st.start_tracker, st.Harness.install_markers = start_tracker, install_markers
    try:
        yield
    finally:
        st.STEP_SHAPES["gpt2"], st.start_tracker, st.Harness.install_markers = saved


def cmd_loss_peak(args):
    import transformers
    transformers.logging.set_verbosity_error()
    selfcheck()
    today, t0 = date_today(), time.perf_counter()
    configs = CONFIGS[:1] if args.quick else CONFIGS
    rows, listing = [], []
    for name, att, b, s in configs:
        with _patched(GPT2_REAL if name == "gpt2-124m" else None):
            row, tr = st.measure_step("hf", "gpt2", mode="fp32", attention=att, recompute="none",
                                      optimizer_impl="foreach", batch=b, seq=s)
        row.update(torch_version=torch.__version__, transformers_version=transformers.__version__,
                   measured_on=today)
        rows.append(row)
        groups = {}
        for n, op, module, category in tr.snapshot:
            key = (category, op, re.sub(r"\.h\.\d+(?=\.|$)", ".h.*", module), n)
            groups[key] = groups.get(key, 0) + 1
        for (category, op, module, n), count in sorted(groups.items(), key=lambda kv: -kv[0][3] * kv[1]):
            listing.append({"model": name, "attention": att, "batch": b, "seq": s, "peak_op": tr.peak_op,
                            "peak_bytes": tr.peak, "category": category, "op": op, "module": module,
                            "storage_bytes": n, "count": count})
        print(f"{name:9s} {att:5s} b={b} s={s:4d} loss-backward peak {tr.peak / 2**20:9.2f} MiB at {tr.peak_op}",
              flush=True)
    write_csv(args.out, rows)
    write_csv(args.tensors_out, listing)
    print(f"wrote {len(rows)} rows to {args.out}, {len(listing)} to {args.tensors_out} "
          f"in {time.perf_counter() - t0:.0f} s")
