"""What torchtitan's op-level selective activation checkpointing keeps per layer under tensor (and sequence)
parallelism, measured with PyTorch itself (issue 34, sac32); writes ``data/op_sac_tp_saved.csv``.

What runs: one Llama block written as torchtitan's ``models/llama/model.py`` at 9dec370ad26b (``wq, wk, wv``,
RoPE on complex numbers, ``repeat_kv``, causal SDPA, ``wo``; ``w2(silu(w1(x)) * w3(x))``; RMSNorm; the two
residual adds), its weights split over ``tp`` CPU processes joined by gloo with torchtitan's own plan
(``parallelisms/parallelize_llama.py`` l.164-180 at 9dec370: ``SequenceParallel`` norms,
``PrepareModuleInput`` Shard(1) -> Replicate, ``ColwiseParallel`` wq/wk/wv/w1/w3,
``RowwiseParallel(output_layouts=Shard(1))`` wo/w2) through
``torch.distributed.tensor.parallel.parallelize_module``, and, without sequence parallelism (``sp=0``, not a
torchtitan configuration), the same plan with replicated norms and all-reduced
``wo``/``w2`` outputs. The block is wrapped in ``torch.utils.checkpoint.checkpoint(use_reentrant=False)`` with
``create_selective_checkpoint_contexts`` and torchtitan's ``_custom_policy`` (l.214-264: ``_save_list`` =
``mm``, SDPA's flash and efficient kernels, ``reduce_scatter_tensor``, ``abs``, ``max``; every 2nd ``mm`` of
the block's forward recomputed). On the CPU, SDPA dispatches to
``_scaled_dot_product_flash_attention_for_cpu`` (same outputs as the CUDA flash kernel: the bf16 output and an
fp32 log-sum-exp per row and head), added to the list as its stand-in.

What is counted, on each rank after the forward: the tensors the checkpoint's caching mode holds for the
backward (its ``storage``: every MUST_SAVE op's outputs, DTensors by their local shard), by op, each storage
once, plus the checkpoint's input (the block's input ``x``, this rank's shard). ``saved_tensors_hooks`` cannot
see these: inside a checkpoint its own hooks replace autograd's saved tensors by handles. The backward then
runs (so the recomputation is exercised) and its input gradient is compared with the same block run without
parallelism or checkpointing (``max_abs_grad_diff``).

Run in the measurement venv (torch 2.13, CPU): ``.venv-measure/bin/python tools/measure_op_sac_tp.py``
(about a minute). Checked without torch by ``tests/test_op_sac_tp.py``. The same block without any checkpoint:
``tools/measure_tp_saved.py`` (it imports :func:`_setup`).
"""

from __future__ import annotations

import csv
import datetime as dt
import os
import socket
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "data" / "op_sac_tp_saved.csv"
#: the block's sizes (a small Llama: tp must divide heads, KV heads and the MLP width)
HIDDEN, HEADS, KV_HEADS, FFN, BATCH, SEQ = 256, 8, 4, 512, 2, 64
LAYOUTS = ((1, 0), (2, 1), (4, 1), (2, 0), (4, 0))       # (tp, sp)


def _block(torch):
    nn, F = torch.nn, torch.nn.functional
    hd = HIDDEN // HEADS

    class RMSNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(HIDDEN))

        def forward(self, x):
            x32 = x.float()
            return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-5)).type_as(x) * self.weight

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.wq = nn.Linear(HIDDEN, HEADS * hd, bias=False)
            self.wk = nn.Linear(HIDDEN, KV_HEADS * hd, bias=False)
            self.wv = nn.Linear(HIDDEN, KV_HEADS * hd, bias=False)
            self.wo = nn.Linear(HEADS * hd, HIDDEN, bias=False)

        def forward(self, x, freqs_cis):
            bs, seqlen, _ = x.shape
            xq, xk, xv = self.wq(x), self.wk(x), self.wv(x)
            xq = xq.view(bs, seqlen, -1, hd)                 # -1: the heads on this rank (torchtitan's)
            xk = xk.view(bs, seqlen, -1, hd)
            xv = xv.view(bs, seqlen, -1, hd)
            xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
            xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
            f = freqs_cis.view(1, seqlen, 1, hd // 2)
            xq = torch.view_as_real(xq_ * f).flatten(3).type_as(xq)
            xk = torch.view_as_real(xk_ * f).flatten(3).type_as(xk)
            rep = xq.shape[2] // xk.shape[2]
            keys = xk.repeat_interleave(rep, dim=2)          # repeat_kv
            values = xv.repeat_interleave(rep, dim=2)
            out = F.scaled_dot_product_attention(xq.transpose(1, 2), keys.transpose(1, 2),
                                                 values.transpose(1, 2), is_causal=True)
            return self.wo(out.transpose(1, 2).contiguous().view(bs, seqlen, -1))

    class FeedForward(nn.Module):
        def __init__(self):
            super().__init__()
            self.w1 = nn.Linear(HIDDEN, FFN, bias=False)
            self.w2 = nn.Linear(FFN, HIDDEN, bias=False)
            self.w3 = nn.Linear(HIDDEN, FFN, bias=False)

        def forward(self, x):
            return self.w2(F.silu(self.w1(x)) * self.w3(x))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention, self.feed_forward = Attention(), FeedForward()
            self.attention_norm, self.ffn_norm = RMSNorm(), RMSNorm()

        def forward(self, x, freqs_cis):
            h = x + self.attention(self.attention_norm(x), freqs_cis)
            return h + self.feed_forward(self.ffn_norm(h))

    return Block


def _policy(torch, extra):
    from torch.utils.checkpoint import CheckpointPolicy

    save = {torch.ops.aten.mm.default, torch.ops.aten._scaled_dot_product_efficient_attention.default,
            torch.ops.aten._scaled_dot_product_flash_attention.default,
            torch.ops._c10d_functional.reduce_scatter_tensor.default,
            torch.ops.aten.abs.default, torch.ops.aten.max.default} | set(extra)
    meta = {"forward_mm_count": 0, "recompute_mm_count": 0}

    def _custom_policy(ctx, func, *args, **kwargs):           # torchtitan's, verbatim but for the dict
        mode = "recompute" if ctx.is_recompute else "forward"
        key = f"{mode}_mm_count"
        if func == torch.ops.aten.mm.default:
            meta[key] += 1
        to_save = func in save and not (func == torch.ops.aten.mm.default and meta[key] % 2 == 0)
        return CheckpointPolicy.MUST_SAVE if to_save else CheckpointPolicy.PREFER_RECOMPUTE
    return _custom_policy


def _setup(rank, world, port, sp):
    """Join the gloo group and build the block, split by torchtitan's plan (with ``sp``) over ``world`` ranks:
    returns ``(block, freqs_cis, x, x_ref)``, ``x`` this rank's input (requiring grad) and ``x_ref`` the whole
    input, whose gradient the same block run without parallelism or checkpointing has filled in."""
    import torch
    import torch.distributed as dist
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, RowwiseParallel,
                                                   SequenceParallel, parallelize_module)

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    mesh = torch.distributed.device_mesh.init_device_mesh("cpu", (world,))
    torch.manual_seed(0)
    Block = _block(torch)
    ref = Block().to(torch.bfloat16)
    block = Block().to(torch.bfloat16)
    block.load_state_dict(ref.state_dict())
    seq_in = Shard(1) if sp else Replicate()
    plan = {"attention": PrepareModuleInput(input_layouts=(seq_in, None),
                                            desired_input_layouts=(Replicate(), None)),
            "attention.wq": ColwiseParallel(), "attention.wk": ColwiseParallel(),
            "attention.wv": ColwiseParallel(), "attention.wo": RowwiseParallel(output_layouts=seq_in),
            "feed_forward": PrepareModuleInput(input_layouts=(seq_in,), desired_input_layouts=(Replicate(),)),
            "feed_forward.w1": ColwiseParallel(), "feed_forward.w2": RowwiseParallel(output_layouts=seq_in),
            "feed_forward.w3": ColwiseParallel()}
    if sp:
        plan |= {"attention_norm": SequenceParallel(), "ffn_norm": SequenceParallel()}
    if world > 1:
        parallelize_module(block, mesh, plan)
    hd = HIDDEN // HEADS
    freqs = 1.0 / (10000 ** (torch.arange(0, hd, 2).float() / hd))
    freqs_cis = torch.polar(torch.ones(SEQ, hd // 2), torch.outer(torch.arange(SEQ).float(), freqs))
    x_full = torch.randn(BATCH, SEQ, HIDDEN, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
    x_ref = x_full.clone().requires_grad_(True)
    ref(x_ref, freqs_cis).float().pow(2).sum().backward()
    # the block's input is a plain tensor, as torchtitan's embedding and rowwise wo/w2 hand it over
    # (use_local_output=True): this rank's sequence shard with sp, the whole sequence without
    x = x_full.chunk(world, dim=1)[rank].clone() if world > 1 and sp else x_full.clone()
    x.requires_grad_(True)
    return block, freqs_cis, x, x_ref


def _grad_diff(x, x_ref, rank, world, sp):
    """Largest difference between this rank's input gradient and the reference's (its shard with ``sp``)."""
    want = x_ref.grad.chunk(world, dim=1)[rank] if world > 1 and sp else x_ref.grad
    return (x.grad.float() - want.float()).abs().max().item()


def _rank(rank, world, port, sp, queue):
    import torch
    import torch.distributed as dist
    from torch.distributed.tensor import DTensor
    from torch.utils._pytree import tree_flatten
    from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts

    block, freqs_cis, x, x_ref = _setup(rank, world, port, sp)
    modes = []

    def context_fn():
        ctx = create_selective_checkpoint_contexts(
            _policy(torch, [torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default]))
        modes.append(ctx[0])
        return ctx

    out = checkpoint(block, x, freqs_cis, use_reentrant=False, context_fn=context_fn)
    seen, by_op = set(), {}
    for op, entries in modes[0].storage.items():
        # each output leaf of a saved op is wrapped (_VersionWrapper); a recomputed op's entry is _RECOMPUTE
        vals = [e.val for e in tree_flatten(list(entries.values()))[0] if hasattr(e, "val")]
        for t in vals:
            if not isinstance(t, torch.Tensor):
                continue
            t = t.to_local() if isinstance(t, DTensor) else t
            key = t.untyped_storage().data_ptr()
            if key in seen:
                continue
            seen.add(key)
            name = str(op[0] if isinstance(op, tuple) else op)
            n, b = by_op.get(name, (0, 0))
            by_op[name] = (n + 1, b + t.untyped_storage().nbytes())
    xl = x.to_local() if isinstance(x, DTensor) else x
    by_op["checkpoint input"] = (1, xl.untyped_storage().nbytes())
    loss = out.float().pow(2).sum()            # (with sp each rank's share of the loss: its own tokens)
    loss.backward()
    diff = _grad_diff(x, x_ref, rank, world, sp)
    if rank == 0:
        queue.put((by_op, diff))
    dist.destroy_process_group()


def run_layouts(rank_fn, layouts):
    """Each ``(tp, sp)`` of ``layouts`` on ``tp`` CPU processes spawned afresh and joined by gloo:
    ``rank_fn(rank, tp, port, sp, queue)`` runs on each, rank 0 putting its result on the queue. Yields
    ``(tp, sp, result)``; SystemExit when a rank fails (also used by tools/measure_tp_saved.py)."""
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    for tp, sp in layouts:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        q = ctx.Queue()
        procs = [ctx.Process(target=rank_fn, args=(r, tp, port, sp, q)) for r in range(tp)]
        for p in procs:
            p.start()
        result = q.get(timeout=600)
        for p in procs:
            p.join()
            if p.exitcode:
                raise SystemExit(f"tp={tp} sp={sp}: a rank exited with {p.exitcode}")
        yield tp, sp, result


def write_rows(rows: list[dict], out: Path) -> None:
    """The measured rows to ``out`` as CSV, the columns in the first row's order."""
    with open(out, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {out} ({len(rows)} rows)")


def main() -> int:
    import torch

    rows, today = [], dt.date.today().isoformat()
    for tp, sp, (by_op, diff) in run_layouts(_rank, LAYOUTS):
        for op, (n, b) in sorted(by_op.items()):
            rows.append(dict(tp=tp, sp=sp, batch=BATCH, seq=SEQ, hidden=HIDDEN, heads=HEADS,
                             kv_heads=KV_HEADS, ffn_hidden=FFN,
                             dtype="bf16", op=op, tensors=n, bytes=b,
                             max_abs_grad_diff=f"{diff:.3g}", torch=torch.__version__,
                             source="tools/measure_op_sac_tp.py (torch.utils.checkpoint SAC cache, gloo CPU)",
                             as_of=today))
        print(tp, sp, {k: v for k, v in by_op.items()}, f"grad diff {diff:.3g}", file=sys.stderr)
    write_rows(rows, OUT)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
