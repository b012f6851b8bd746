"""What autograd saves per rank for one torchtitan Llama block under tensor (and sequence) parallelism with NO
recomputation, measured with PyTorch itself (issue 38, tp47); writes ``data/tp_saved.csv``.

The block, its sizes, its split and its input are those of ``tools/measure_op_sac_tp.py`` (imported from
there: :func:`measure_op_sac_tp._setup`; torchtitan's model and TP plan at 9dec370ad26b over ``tp`` CPU
processes joined by gloo), run without any checkpoint. What is counted, on each rank: every tensor autograd
saves for the backward during the forward (``torch.autograd.graph.saved_tensors_hooks``), each storage once,
DTensors by their local shard, parameters (their local shards) left out, as ``tools/measure/saved.py`` and
``tools/measure/dist.py`` count. Each storage is labelled by the innermost module running when it was first
saved, the ``grad_fn`` that produced it (``-`` for a tensor made without grad, e.g. RoPE's ``freqs_cis``), its
dtype and its local shape; one CSV row per label. The backward then runs and its input gradient is compared
with the same block run without parallelism (``max_abs_grad_diff``).

Compared with :func:`llmsizing.activations.activation_memory` (Korthikanti et al. 2022's count, the appendix's
"Tensor/sequence parallelism" entry) in ``tests/test_tp_saved.py`` and by
:func:`llmsizing.op_sac.tp_saved_measured`. Run in the measurement venv (torch 2.13, CPU):
``.venv-measure/bin/python tools/measure_tp_saved.py`` (about a minute).
"""

from __future__ import annotations

import datetime as dt
import socket
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import measure_op_sac_tp as opsac  # noqa: E402  (the block, its plan and sizes: one copy)

OUT = Path(__file__).resolve().parents[1] / "data" / "tp_saved.csv"
LAYOUTS = ((1, 0), (2, 0), (4, 0), (2, 1), (4, 1))       # (tp, sp)


def _rank(rank, world, port, sp, queue):
    import torch
    import torch.distributed as dist
    from torch.distributed.tensor import DTensor

    block, freqs_cis, x, x_ref = opsac._setup(rank, world, port, sp)

    def local(t):
        return t.to_local() if isinstance(t, DTensor) else t

    params = {local(p).untyped_storage().data_ptr() for p in block.parameters()}
    stack, kept, rows = ["block"], [], {}

    def push(name):
        return lambda mod, args: stack.append(name)

    def pop(mod, args, out):
        stack.pop()

    for name, mod in block.named_modules():
        if name:
            mod.register_forward_pre_hook(push(name))
            mod.register_forward_hook(pop)

    def pack(t):
        if not isinstance(t, torch.Tensor):
            return t
        st = local(t).untyped_storage()
        if st.nbytes() == 0 or st.data_ptr() in params or any(st.data_ptr() == k.data_ptr() for k in kept):
            return t
        kept.append(st)                # held, so that no freed storage's address is reused and miscounted
        key = (stack[-1], type(t.grad_fn).__name__ if t.grad_fn is not None else "-",
               str(local(t).dtype).replace("torch.", ""), "x".join(map(str, local(t).shape)))
        n, b = rows.get(key, (0, 0))
        rows[key] = (n + 1, b + st.nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = block(x, freqs_cis)
    loss = local(out).float().pow(2).sum()      # (with sp each rank's share of the loss: its own tokens)
    loss.backward()
    diff = opsac._grad_diff(x, x_ref, rank, world, sp)
    if rank == 0:
        queue.put((rows, diff))
    dist.destroy_process_group()


def main() -> int:
    import torch

    rows, today = [], dt.date.today().isoformat()
    for tp, sp, (saved, diff) in opsac.run_layouts(_rank, LAYOUTS):
        for (module, producer, dtype, shape), (n, b) in saved.items():
            rows.append(dict(tp=tp, sp=sp, batch=opsac.BATCH, seq=opsac.SEQ, hidden=opsac.HIDDEN,
                             heads=opsac.HEADS, kv_heads=opsac.KV_HEADS, ffn_hidden=opsac.FFN,
                             dtype="bf16", recompute="none", module=module, producer=producer,
                             saved_dtype=dtype, local_shape=shape, tensors=n, bytes=b,
                             max_abs_grad_diff=f"{diff:.3g}", torch=torch.__version__,
                             host=socket.gethostname(),
                             source="tools/measure_tp_saved.py (saved_tensors_hooks, gloo CPU)", as_of=today))
        print(tp, sp, sum(b for _, b in saved.values()), f"grad diff {diff:.3g}", file=sys.stderr)
    opsac.write_rows(rows, OUT)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
