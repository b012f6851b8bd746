"""Sub-command ``dropout``: the tensors PyTorch's dropout keeps for its backward (CPU).

It writes data/dropout_saved.csv: the tensors PyTorch's dropout keeps for its backward
(p = 0.05, as PEFT's lora_dropout), per op, input dtype and whether the input needs a gradient.
``F.dropout`` on a CPU tensor computes ``input * noise`` (the noise scaled by 1 / (1 - p)); on a CUDA tensor
it calls ``torch.native_dropout`` (aten/src/ATen/native/Dropout.cpp, is_fused_kernel_acceptable), which
returns a bool mask. native_dropout runs on the CPU too, so the GPU path's op is measured here directly.
Columns: op, input_dtype, input_requires_grad, n_elements, n_saved, saved_dtypes, saved_bytes,
saved_bytes_per_element, torch_version, measured_on
"""

from __future__ import annotations

import itertools

import torch

from .core import date_today, dtype_name, write_csv

DROPOUT_OPS = {
    "F.dropout (CPU path: input * noise)": lambda x: torch.nn.functional.dropout(x, 0.05, True),
    "torch.native_dropout (the op F.dropout calls on CUDA)": lambda x: torch.native_dropout(x, 0.05, True)[0],
}


def cmd_dropout(args):
    """Sub-command ``dropout``: the bytes dropout keeps for its backward, per element of its input."""
    today = date_today()
    rows = []
    for (op, fn), dtype, grad in itertools.product(DROPOUT_OPS.items(), (torch.float32, torch.bfloat16),
                                                   (True, False)):
        x = torch.randn(512, 256).to(dtype).requires_grad_(grad)
        saved = []
        with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
            fn(x)
        nbytes = sum(t.untyped_storage().nbytes() for t in saved)
        rows.append({"op": op, "input_dtype": dtype_name(dtype), "input_requires_grad": grad,
                     "n_elements": x.numel(), "n_saved": len(saved),
                     "saved_dtypes": ";".join(dtype_name(t.dtype) for t in saved), "saved_bytes": nbytes,
                     "saved_bytes_per_element": nbytes / x.numel(), "torch_version": torch.__version__,
                     "measured_on": today})
        print(f"{op:55s} {dtype_name(dtype):9s} grad={grad!s:5s} keeps {nbytes / x.numel():.2f} B per element")
    write_csv(args.out, rows)
    print(f"wrote {len(rows)} rows to {args.out}")
