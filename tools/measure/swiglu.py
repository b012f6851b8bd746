"""Sub-command ``swiglu``: what Megatron-LM's fused SwiGLU saves for its backward, against an unfused SwiGLU (issue 26).

Megatron-LM's MLP (``megatron/core/transformer/mlp.py``) with ``gated_linear_unit`` and ``bias_activation_fusion``
runs ``linear_fc1`` to one ``[gate | up]`` tensor of ``2f`` columns, then ``bias_swiglu_impl`` from
``megatron/core/fusions/fused_bias_swiglu.py``, whose ``SwiGLUFunction`` saves only its input for the backward
(``ctx.save_for_backward(input_for_backward)``) and recomputes SiLU in ``swiglu_back``; ``linear_fc2`` saves its
own input, the product. That is ``2f + f = 3f`` columns per token, where an unfused ``F.silu(gate) * up`` keeps
gate, up, SiLU(gate) and the product: ``4f``.

This experiment runs the reference implementation itself, on the CPU: ``--megatron PATH`` names a Megatron-LM
checkout (or the file ``fused_bias_swiglu.py`` itself). The file is loaded with ``importlib`` as it is, except
that its two imports from ``megatron.core`` that need the rest of the package (``jit_fuser``, which is
``torch.compile`` or ``torch.jit.script`` there, and ``nvtx_decorator``, a profiling range) are stubbed as identity
decorators: neither changes what autograd saves. No Megatron code is kept in this repository. The MLP around it is
a stand-in: ``x @ W1`` for ``linear_fc1`` and ``out @ W2`` for ``linear_fc2`` (plain matrix multiplies, which save
their inputs, as Megatron's ``ColumnParallelLinear``/``RowParallelLinear`` do without TP). The unfused variant is
``F.silu(x @ Wg) * (x @ Wu) @ W2``, as Hugging Face's ``LlamaMLP``.

It writes data/fused_swiglu_saved.csv, one row per (variant, dtype, tokens, hidden, ffn)::

  variant              megatron-fused (SwiGLUFunction via bias_swiglu_impl, bias None) / unfused
  dtype, tokens, hidden, ffn
  saved_bytes          storages autograd saved in the MLP (deduplicated by storage, weights left out)
  saved_f_columns      (saved_bytes - the fc1 input's bytes) / (bytes per element x tokens x ffn): 3 or 4
  megatron_commit      the Megatron-LM commit the file came from (``--megatron-commit``; empty if not given)
  torch_version, measured_on
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import torch
import torch.nn.functional as F

from .core import date_today, dtype_name, saved_storage, write_csv

SHAPES = ((64, 128, 352), (256, 256, 688), (512, 512, 1376))   # (tokens, hidden, ffn)


def load_megatron_swiglu(path):
    """``fused_bias_swiglu.py`` from a Megatron-LM checkout, with ``megatron.core.jit.jit_fuser`` and
    ``megatron.core.utils.nvtx_decorator`` stubbed as identity decorators (module docstring)."""
    path = Path(path)
    if path.is_dir():
        path = path / "megatron" / "core" / "fusions" / "fused_bias_swiglu.py"
    if not path.is_file():
        raise SystemExit(f"--megatron: no fused_bias_swiglu.py at {path}")
    stubs = {"megatron": types.ModuleType("megatron"), "megatron.core": types.ModuleType("megatron.core"),
             "megatron.core.jit": types.ModuleType("megatron.core.jit"),
             "megatron.core.utils": types.ModuleType("megatron.core.utils")}
    stubs["megatron.core.jit"].jit_fuser = lambda fn: fn
    stubs["megatron.core.utils"].nvtx_decorator = lambda *a, **k: (lambda fn: fn)
    saved = {k: sys.modules.get(k) for k in stubs}
    sys.modules.update(stubs)
    try:
        spec = importlib.util.spec_from_file_location("megatron_fused_bias_swiglu", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    return mod


def saved_in_mlp(variant, mod, *, tokens, hidden, ffn, dtype):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(tokens, hidden, generator=gen).to(dtype).requires_grad_()
    w1 = torch.randn(hidden, 2 * ffn, generator=gen).to(dtype).requires_grad_()
    w2 = torch.randn(ffn, hidden, generator=gen).to(dtype).requires_grad_()
    params = {t.untyped_storage().data_ptr() for t in (w1, w2)}
    seen = {}

    def pack(t):
        st = saved_storage(t, params)
        if st is not None:
            seen[st.data_ptr()] = (st.nbytes(), st)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        h = x * 1.0                                      # the MLP's input (the norm's output), a fresh storage
        if variant == "megatron-fused":
            out = mod.bias_swiglu_impl(h @ w1, None)
        else:
            gate, up = h @ w1[:, :ffn], h @ w1[:, ffn:]
            out = F.silu(gate) * up
        y = out @ w2
    y.float().sum().backward()                           # the backward runs: the saved tensors are sufficient
    total = sum(n for n, _ in seen.values())
    p = torch.tensor([], dtype=dtype).element_size()
    return total, (total - p * tokens * hidden) / (p * tokens * ffn)


def cmd_swiglu(args):
    """Sub-command ``swiglu``: Megatron-LM's fused SwiGLU against the unfused one (saved bytes, CPU)."""
    if not args.megatron:     # (``all`` runs it without one: the committed CSV stays as it is)
        print("swiglu: skipped, it needs --megatron PATH (a Megatron-LM checkout or its fused_bias_swiglu.py)")
        return
    mod = load_megatron_swiglu(args.megatron)
    rows, today = [], date_today()
    for variant in ("megatron-fused", "unfused"):
        for dtype in (torch.bfloat16, torch.float32):
            for tokens, hidden, ffn in SHAPES:
                total, cols = saved_in_mlp(variant, mod, tokens=tokens, hidden=hidden, ffn=ffn, dtype=dtype)
                rows.append({"variant": variant, "dtype": dtype_name(dtype), "tokens": tokens, "hidden": hidden,
                             "ffn": ffn, "saved_bytes": total, "saved_f_columns": round(cols, 6),
                             "megatron_commit": args.megatron_commit or "", "torch_version": torch.__version__,
                             "measured_on": today})
                print(f"{variant:15s} {dtype_name(dtype):9s} tokens={tokens:4d} h={hidden:4d} f={ffn:5d} "
                      f"saved={total:9d} B = fc1 input + {cols:.3f} x f columns", flush=True)
    write_csv(args.out, rows)
    print(f"wrote {len(rows)} rows to {args.out}")
