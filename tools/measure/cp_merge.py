"""Sub-command ``cp-merge``: the memory traffic PyTorch's own ring attention adds around its attention kernels
(issue 34, long24).

What runs --------- PyTorch's context-parallel attention itself, not a copy: ``_templated_ring_attention`` and
``_templated_ring_attention_backward`` of ``torch/distributed/tensor/experimental/_context_parallel/
_attention.py`` (torch 2.13; the same loop as torch 2.6's ``_attention.py`` that torchtitan's December 2024
benchmarks ran), called on ``cp`` = 2 and 4 CPU processes joined by gloo, with its defaults (``_cp_options``:
``convert_to_f32=True``, round-robin load balancing, K/V rotated by an all-gather, dK/dV by all-to-all). Those
functions take the attention kernel as an argument (``op``); on CUDA it is
``aten._scaled_dot_product_flash_attention`` (or the efficient / cuDNN kernel) and its backward. Here ``op``
is a plain bf16 math attention of the same signature and outputs (``out`` in the input dtype, the fp32
log-sum-exp, and for the backward dQ, dK, dV in the input dtype), so everything around the kernel is torch's.

What is counted --------------- Every ATen op the two functions run outside ``op`` and outside the collectives
(``_c10d_functional``, ``c10d``) is counted under a ``TorchDispatchMode``: the bytes of its tensor inputs
(read) and of its outputs (written); views (``OpOverload.is_view``) move nothing and count 0, and a fill
(``zeros_like``) counts its output only. That is the HBM traffic an eager CUDA run issues as separate
memory-bound kernels: the fp32 conversion of each step's partial output, the log-sum-exp merge (``out -
sigmoid(block_lse - lse) * (out - block_out)``), ``_partial_update``'s ``torch.cat`` that rebuilds the whole
output or gradient when half of it changes, the K/V packing for the send (``torch.cat`` of the flattened K and
V), the fp32 accumulation of dQ, dK and dV. The counts are exact for torch's loop (they depend only on the
shapes), not a timing: a fused or compiled version could move less. ``op``'s own FLOPs are counted too (what
the kernel computes: ``4 sq sk h d`` for a whole block, half of it for the causal diagonal step; the backward
``2.5 x`` that, FlashAttention's convention), so the rows give bytes per attention FLOP.

Correctness: rank outputs and gradients are compared with full-sequence causal attention computed in one
process from the same seeded tensors (``max_abs_out_diff``, ``max_abs_grad_diff``, bf16).
"""

from __future__ import annotations

import math
import time

import torch

from .core import date_today, free_port, gather_ranks, write_csv

CP_MERGE_SIZES = (2, 4)
#: (batch, query heads, head dim, tokens per rank): K/V have the query heads, as torchtitan's Llama passes
#: them to SDPA after ``repeat_kv`` (GQA expanded before the kernel)
CP_MERGE_SHAPES = ((1, 4, 64, 128), (1, 8, 64, 256))


def _math_forward(q, k, v, is_causal, scale):
    s = (q.float() @ k.float().transpose(-1, -2)) * scale
    if is_causal:
        sq, sk = s.shape[-2], s.shape[-1]
        s = s.masked_fill(torch.ones(sq, sk, dtype=torch.bool).triu(1), float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    out = (torch.exp(s - lse.unsqueeze(-1)) @ v.float()).to(q.dtype)
    return out, lse


def _math_backward(q, k, v, out, lse, dout, is_causal, scale):
    s = (q.float() @ k.float().transpose(-1, -2)) * scale
    if is_causal:
        sq, sk = s.shape[-2], s.shape[-1]
        s = s.masked_fill(torch.ones(sq, sk, dtype=torch.bool).triu(1), float("-inf"))
    p = torch.exp(s - lse.float().unsqueeze(-1))
    do = dout.float()
    dv = p.transpose(-1, -2) @ do
    dp = do @ v.float().transpose(-1, -2)
    delta = (do * out.float()).sum(-1, keepdim=True)
    ds = p * (dp - delta) * scale
    return (ds @ k.float()).to(q.dtype), (ds.transpose(-1, -2) @ q.float()).to(q.dtype), dv.to(q.dtype)


class _Counter(torch.utils._python_dispatch.TorchDispatchMode):
    """Bytes read and written by every op outside the attention kernel and the collectives."""

    SKIP_NAMESPACES = ("_c10d_functional", "c10d", "_dtensor")

    def __init__(self):
        super().__init__()
        self.inside = False
        self.read = self.written = self.ops = 0
        self.by_op: dict[str, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if self.inside or func.namespace in self.SKIP_NAMESPACES or func.is_view:
            return out
        flat_in = torch.utils._pytree.tree_leaves((args, kwargs))
        flat_out = torch.utils._pytree.tree_leaves(out)
        name = func.overloadpacket.__name__
        # a fill (zeros_like, empty_like, new_zeros) reads its tensor for shape and dtype only: no bytes
        fill = name.endswith("_like") or name.startswith("new_")
        r = 0 if fill else sum(t.numel() * t.element_size() for t in flat_in if isinstance(t, torch.Tensor))
        w = sum(t.numel() * t.element_size() for t in flat_out if isinstance(t, torch.Tensor))
        self.read += r
        self.written += w
        self.ops += 1
        self.by_op[name] = self.by_op.get(name, 0) + r + w
        return out


def _round_robin(x, rank, cp):
    """Rank ``rank``'s two chunks (``rank`` and ``2 cp - 1 - rank`` of ``2 cp``) along the sequence."""
    ch = x.chunk(2 * cp, dim=2)
    return torch.cat([ch[rank], ch[2 * cp - 1 - rank]], dim=2)


def _merge_worker(rank, world, port, queue, shapes=CP_MERGE_SHAPES):
    import torch.distributed as dist
    from torch.distributed.tensor.experimental._context_parallel import _attention as A

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    group = dist.group.WORLD
    rows = []
    for b, h, d, per_rank in shapes:
        seq = per_rank * world
        scale = 1 / math.sqrt(d)
        gen = torch.Generator().manual_seed(1234)
        q, k, v, dout = (torch.randn(b, h, seq, d, generator=gen).to(torch.bfloat16) for _ in range(4))
        ref_out, _ = _math_forward(q, k, v, True, scale)
        qf, kf, vf = (t.float().requires_grad_() for t in (q, k, v))
        s = (qf @ kf.transpose(-1, -2)) * scale
        s = s.masked_fill(torch.ones(seq, seq, dtype=torch.bool).triu(1), float("-inf"))
        (torch.softmax(s, -1) @ vf).backward(dout.float())
        ref = {"q": qf.grad, "k": kf.grad, "v": vf.grad}
        lq, lk, lv, ldo = (_round_robin(t, rank, world).contiguous() for t in (q, k, v, dout))
        flops = {"fwd": 0.0, "bwd": 0.0}
        counter = _Counter()

        def fwd_op(q_, k_, v_, *, is_causal, **kw):
            counter.inside = True
            try:
                flops["fwd"] += 4.0 * q_.shape[2] * k_.shape[2] * h * d * b * (0.5 if is_causal else 1.0)
                out, lse = _math_forward(q_, k_, v_, is_causal, scale)
                return out, lse
            finally:
                counter.inside = False

        def bwd_op(*, query, key, value, out, logsumexp, is_causal, grad_out, **kw):
            counter.inside = True
            try:
                causal_share = 0.5 if is_causal else 1.0
                flops["bwd"] += 2.5 * 4.0 * query.shape[2] * key.shape[2] * h * d * b * causal_share
                return _math_backward(query, key, value, out, logsumexp, grad_out, is_causal, scale)
            finally:
                counter.inside = False

        result = {}
        for phase in ("fwd", "bwd"):
            counter.read = counter.written = counter.ops = 0
            counter.by_op = {}
            with counter:
                if phase == "fwd":
                    out, lse = A._templated_ring_attention(group, 2, fwd_op, lq, lk, lv, is_causal=True)[:2]
                else:
                    dq, dk, dv = A._templated_ring_attention_backward(
                        group, 2, bwd_op, ldo, "grad_out", lq, lk, lv, out, lse, is_causal=True)[:3]
            result[phase] = (counter.read, counter.written, counter.ops, dict(counter.by_op))
        out_diff = (out.float() - _round_robin(ref_out, rank, world).float()).abs().max().item()
        grad_diff = max((g.float() - _round_robin(ref[n], rank, world)).abs().max().item()
                        for n, g in (("q", dq), ("k", dk), ("v", dv)))
        q_elems = b * h * per_rank * d
        for phase, (r, w, n, by_op) in result.items():
            rows.append({"phase": phase, "cp": world, "rank": rank, "batch": b, "heads": h, "head_dim": d,
                         "seq": seq, "seq_per_rank": per_rank, "q_elements_per_rank": q_elems,
                         "ring_steps": world, "read_bytes": r, "written_bytes": w, "ops": n,
                         "bytes_per_q_element": (r + w) / q_elems,
                         "bytes_per_q_element_per_step": (r + w) / q_elems / world,
                         "kernel_flops": flops[phase], "bytes_per_kernel_flop": (r + w) / flops[phase],
                         "bytes_by_op": ";".join(f"{k}:{v}" for k, v in sorted(by_op.items())),
                         "max_abs_out_diff": out_diff, "max_abs_grad_diff": grad_diff})
    queue.put((rank, rows, torch.__version__))
    dist.barrier()
    dist.destroy_process_group()


def cmd_cp_merge(args):
    """Sub-command ``cp-merge``: see the module docstring."""
    import torch.multiprocessing as mp

    today = date_today()
    shapes = CP_MERGE_SHAPES[:1] if getattr(args, "quick", False) else CP_MERGE_SHAPES   # --quick: the smaller
    rows = []
    for world in CP_MERGE_SIZES:
        t0 = time.perf_counter()
        ctx = mp.get_context("spawn")
        queue = ctx.Queue()
        port = free_port()
        procs = [ctx.Process(target=_merge_worker, args=(r, world, port, queue, shapes)) for r in range(world)]
        got = gather_ranks(procs, queue, world, f"cp-merge x {world}")
        for rank, rws, tv in sorted(got, key=lambda g: g[0]):
            for row in rws:
                rows.append({**row, "dtype": "bfloat16", "torch_version": tv,
                             "implementation": "torch _templated_ring_attention (_cp_options defaults)",
                             "measured_on": today})
                if rank == 0:
                    print(f"cp={world} {row['phase']} seq={row['seq']} bytes/q-elem/step="
                          f"{row['bytes_per_q_element_per_step']:.2f} out diff={row['max_abs_out_diff']:.2e} "
                          f"grad diff={row['max_abs_grad_diff']:.2e}", flush=True)
        print(f"  cp-merge x {world}: {time.perf_counter() - t0:.1f} s", flush=True)
    rows.sort(key=lambda r: (r["cp"], r["seq"], r["phase"] != "fwd", r["rank"]))
    write_csv(args.out, rows)
    print(f"wrote {len(rows)} rows to {args.out}")
