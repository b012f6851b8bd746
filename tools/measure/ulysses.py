"""Sub-command ``ulysses``: the all-to-alls of Ulysses-style context parallelism on gloo, CPU (issue 38).

Chapter 17 prices ``Parallel(cp_comm="a2a")`` (:func:`llmsizing.all_to_all.ulysses_collectives`) but only ring
attention and the all-gather variant had been run (``cp``). This runs the exchange Ulysses adds to every
attention layer, on ``cp`` = 2 and 4 gloo processes, and checks it against the unsplit attention.

What runs (one attention layer's core, fp32, batch 1): query, key and value of one sequence of ``s`` tokens,
:data:`HEADS` query heads and :data:`KV_HEADS` KV heads of :data:`HEAD_DIM` (grouped-query attention), drawn
from one seed on every rank; rank ``r`` holds the ``n = s / cp`` consecutive tokens ``r n .. (r + 1) n - 1``
(DeepSpeed-Ulysses' contiguous split; Transformer Engine's load-balanced chunk order sends the same bytes).

1. *sequence -> heads* (Jacobs et al. 2023, DeepSpeed-Ulysses, Sec. 3.1; Transformer Engine's
   ``AttnFuncWithCPAndQKVOA2A``, which calls ``flash_attn_a2a_communicate([q, k, v], ...)``: one
   ``all_to_all_single`` per tensor): each rank sends peer ``j`` its ``n`` tokens of heads ``j``'s share
   (``HEADS / cp`` query heads, ``KV_HEADS / cp`` KV heads) and receives every rank's tokens of its own share,
   so it holds all ``s`` tokens of ``1 / cp`` of the heads. Three calls: q, k, v.
2. causal attention (``scaled_dot_product_attention``, ``enable_gqa``) over the whole sequence on those heads;
3. *heads -> sequence*: the output goes back (one call, o): each rank again holds its ``n`` tokens, all heads;
4. backward of ``sum(o * g)`` (``g`` a fixed random tensor): the output's exchange runs first (dO), then the
   three of the input (dQ, dK, dV), each the same even all-to-all (its own inverse).

The exchange is a ``torch.autograd.Function`` whose backward is the same call (DeepSpeed's ``_SeqAllToAll``).
Checks (the tool stops if one fails): each rank's output rows and its dQ, dK, dV rows equal those of the
unsplit attention run on every rank (relative error <= :data:`ERR_LIMIT`); every call moves ``(cp - 1) / cp``
of its input to the other ranks.

Bytes: ``*_input_bytes`` are the tensors the calls take (own chunk included), ``*_sent_bytes`` the chunks a
rank sends to the other ranks, ``*_recv_bytes`` what it receives from them. Time: each call is timed on every
rank after a barrier (waiting for a slower rank to arrive is left out), a call's time is the slowest rank's
(an all-reduce MAX after the step); an exchange's time is the sum of its calls; median and minimum over
``repeats`` steps after one warm-up step. 2 and 4 gloo processes over loopback TCP share this machine's CPUs
(``machine``), so the times say nothing about NVLink or InfiniBand.

Columns of data/ulysses_all_to_all_gloo.csv (one row per cp x seq x phase x rank): cp, rank, seq,
tokens_per_rank, batch, heads, kv_heads, head_dim, bytes_per_element, phase (forward/backward), then for
exchange in (qkv, out): {exchange}_calls, {exchange}_input_bytes, {exchange}_sent_bytes,
{exchange}_recv_bytes, {exchange}_time_s_median, {exchange}_time_s_min; phase_time_s_median (the forward,
or the backward, of the layer), max_rel_err_vs_unsplit, repeats, torch_version, machine, load_1min (the
machine's 1-minute load average as the cp size finished), measured_on, source,
as_of.
"""

from __future__ import annotations

import statistics
import time

import torch

from .core import date_today, gloo_join, gloo_ranks, write_csv

BATCH, HEADS, KV_HEADS, HEAD_DIM = 1, 8, 4, 32
SEQS, QUICK_SEQS = (256, 1024, 4096), (256,)
CP_SIZES = (2, 4)
REPEATS, QUICK_REPEATS = 9, 2
ERR_LIMIT = 1e-5                       # fp32, the same arithmetic per head in another order
EXCHANGES = {"qkv": ("q", "k", "v"), "out": ("o",)}
SOURCE = "measured: tools/measure_memory.py ulysses (gloo on this machine)"


class _Recorder:
    """The all-to-alls of one step on this rank: phase, tensor, input bytes, bytes to others, wall time."""

    def __init__(self, cp: int):
        self.cp, self.phase, self.calls = cp, "forward", []

    def exchange(self, x, name):
        import torch.distributed as dist
        x = x.contiguous()
        out = torch.empty_like(x)
        dist.barrier()
        t0 = time.perf_counter()
        dist.all_to_all_single(out, x)          # even splits along dim 0: chunk j goes to rank j
        dt = time.perf_counter() - t0
        nbytes = x.numel() * x.element_size()
        self.calls.append({"phase": self.phase, "tensor": name, "input_bytes": nbytes,
                           "sent_bytes": nbytes * (self.cp - 1) // self.cp,
                           "recv_bytes": nbytes * (self.cp - 1) // self.cp, "time_s": dt})
        return out


class _AllToAll(torch.autograd.Function):
    """An even all-to-all whose backward is the same all-to-all of the gradient."""

    @staticmethod
    def forward(ctx, x, name, rec):
        ctx.name, ctx.rec = name, rec
        return rec.exchange(x, name)

    @staticmethod
    def backward(ctx, grad):
        return ctx.rec.exchange(grad, "d" + ctx.name), None, None


def seq_to_heads(t, cp, name, rec):
    """(b, n, H, d) on each rank -> (b, cp n, H / cp, d): all tokens, this rank's share of the heads."""
    b, n, h, d = t.shape
    x = t.reshape(b, n, cp, h // cp, d).permute(2, 0, 1, 3, 4)          # chunk j: the heads of rank j
    out = _AllToAll.apply(x, name, rec)                                  # chunk j: rank j's tokens, my heads
    return out.permute(1, 0, 2, 3, 4).reshape(b, cp * n, h // cp, d)


def heads_to_seq(t, cp, name, rec):
    """(b, s, H / cp, d) -> (b, s / cp, H, d): this rank's tokens, every head."""
    b, s, hl, d = t.shape
    x = t.reshape(b, cp, s // cp, hl, d).permute(1, 0, 2, 3, 4)         # chunk j: rank j's tokens
    out = _AllToAll.apply(x, name, rec)                                  # chunk j: my tokens, rank j's heads
    return out.permute(1, 2, 0, 3, 4).reshape(b, s // cp, cp * hl, d)


def _attention(q, k, v):
    """Causal grouped-query attention on (b, s, heads, d) tensors."""
    import torch.nn.functional as F
    o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                       is_causal=True, enable_gqa=True)
    return o.transpose(1, 2)


def _inputs(seq):
    g = torch.Generator().manual_seed(1234 + seq)
    q = torch.randn(BATCH, seq, HEADS, HEAD_DIM, generator=g)
    k = torch.randn(BATCH, seq, KV_HEADS, HEAD_DIM, generator=g)
    v = torch.randn(BATCH, seq, KV_HEADS, HEAD_DIM, generator=g)
    w = torch.randn(BATCH, seq, HEADS, HEAD_DIM, generator=g)
    return q, k, v, w


def _rel_err(a, b):
    return float((a - b).abs().max() / b.abs().max())


def _step(rank, cp, seq, rec, check=False):
    """One forward + backward on this rank; returns (errors against the unsplit attention if ``check``,
    forward s, backward s)."""
    import torch.distributed as dist
    q, k, v, w = _inputs(seq)
    n = seq // cp
    rows = slice(rank * n, (rank + 1) * n)
    mine = [t[:, rows].clone().requires_grad_(True) for t in (q, k, v)]
    rec.phase = "forward"
    dist.barrier()
    t0 = time.perf_counter()
    full = [seq_to_heads(t, cp, name, rec) for t, name in zip(mine, "qkv")]
    o = heads_to_seq(_attention(*full), cp, "o", rec)
    t_fwd = time.perf_counter() - t0
    rec.phase = "backward"
    dist.barrier()
    t0 = time.perf_counter()
    (o * w[:, rows]).sum().backward()
    t_bwd = time.perf_counter() - t0
    if not check:
        return [], t_fwd, t_bwd
    ref = [t.clone().requires_grad_(True) for t in (q, k, v)]           # the unsplit layer, on every rank
    o_ref = _attention(*ref)
    (o_ref * w).sum().backward()
    errs = [_rel_err(o.detach(), o_ref.detach()[:, rows])]
    errs += [_rel_err(m.grad, r.grad[:, rows]) for m, r in zip(mine, ref)]
    return errs, t_fwd, t_bwd


def _run_config(rank, cp, seq, repeats):
    import torch.distributed as dist
    rec = _Recorder(cp)
    errs, _, _ = _step(rank, cp, seq, rec, check=True)          # warm-up (and the check)
    calls = rec.calls
    times = []
    for _ in range(repeats):
        rec.calls = []
        _, t_fwd, t_bwd = _step(rank, cp, seq, rec)
        if [(c["phase"], c["tensor"], c["input_bytes"]) for c in rec.calls] != \
                [(c["phase"], c["tensor"], c["input_bytes"]) for c in calls]:
            raise RuntimeError("the calls of a repeat differ from the first step's")
        t = torch.tensor([c["time_s"] for c in rec.calls] + [t_fwd, t_bwd], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        times.append(t.tolist())
    return {"rank": rank, "calls": calls, "times": times, "err": max(errs)}


def _worker(rank, world, port, seqs, repeats, queue):
    import torch.distributed as dist

    gloo_join(rank, world, port)
    results = []
    for seq in seqs:
        res = _run_config(rank, world, seq, repeats)
        gathered = [None] * world
        dist.all_gather_object(gathered, res)
        results.append((seq, gathered))
    if rank == 0:
        queue.put(results)
    dist.barrier()
    dist.destroy_process_group()


def _load() -> str:
    """The 1-minute load average when a cp size finished (the machine is shared: the times are only as good as
    it was quiet), or '' where /proc/loadavg is missing."""
    try:
        with open("/proc/loadavg") as fh:
            return fh.read().split()[0]
    except OSError:
        return ""


def _rows_for(cp, seq, res, repeats, note, load):
    """A forward and a backward row of one rank's result."""
    rows = []
    med = [statistics.median(col) for col in zip(*res["times"])]
    n_calls = len(res["calls"])
    for phase_i, phase in enumerate(("forward", "backward")):
        row = {"cp": cp, "rank": res["rank"], "seq": seq, "tokens_per_rank": seq // cp, "batch": BATCH,
               "heads": HEADS, "kv_heads": KV_HEADS, "head_dim": HEAD_DIM, "bytes_per_element": 4,
               "phase": phase}
        for exchange, tensors in EXCHANGES.items():
            names = set(tensors) if phase == "forward" else {"d" + t for t in tensors}
            sel = [i for i, c in enumerate(res["calls"]) if c["phase"] == phase and c["tensor"] in names]
            if len(sel) != len(tensors):
                raise RuntimeError(f"{len(sel)} {exchange} calls in the {phase} of rank {res['rank']}")
            per_repeat = [sum(t[i] for i in sel) for t in res["times"]]
            row.update({f"{exchange}_calls": len(sel),
                        **{f"{exchange}_{k}": sum(res["calls"][i][k] for i in sel)
                           for k in ("input_bytes", "sent_bytes", "recv_bytes")},
                        f"{exchange}_time_s_median": f"{statistics.median(per_repeat):.6e}",
                        f"{exchange}_time_s_min": f"{min(per_repeat):.6e}"})
        row.update({"phase_time_s_median": f"{med[n_calls + phase_i]:.6e}",
                    "max_rel_err_vs_unsplit": f"{res['err']:.2e}", "repeats": repeats,
                    "torch_version": torch.__version__, "machine": note, "load_1min": load,
                    "measured_on": date_today(),
                    "source": SOURCE, "as_of": date_today()})
        rows.append(row)
    return rows


def cmd_ulysses(args):
    """Sub-command ``ulysses``: cp = 2 and 4 at 256, 1,024 and 4,096 tokens (``--quick``: 256 tokens, 2
    repeats), written to ``--out`` (data/ulysses_all_to_all_gloo.csv)."""
    repeats = QUICK_REPEATS if args.quick else REPEATS
    seqs = QUICK_SEQS if args.quick else SEQS
    rows = []
    for cp in CP_SIZES:
        results, note = gloo_ranks("ulysses", cp, _worker, (seqs, repeats))
        load = _load()
        for seq, gathered in results:
            for res in gathered:
                if res["err"] > ERR_LIMIT:
                    raise RuntimeError(f"cp={cp} s={seq} rank {res['rank']}: {res['err']:.2e} from the "
                                       "unsplit attention")
                rows.extend(_rows_for(cp, seq, res, repeats, note, load))
            r0 = next(r for r in rows
                      if (r["cp"], r["seq"], r["rank"], r["phase"]) == (cp, seq, 0, "forward"))
            print(f"cp={cp} s={seq:5d}: q,k,v sent/rank {r0['qkv_sent_bytes']} B in "
                  f"{float(r0['qkv_time_s_median']) * 1e3:.2f} ms, o {r0['out_sent_bytes']} B in "
                  f"{float(r0['out_time_s_median']) * 1e3:.2f} ms, max rel err "
                  f"{r0['max_rel_err_vs_unsplit']}",
                  flush=True)
    write_csv(args.out, rows)
    print(f"wrote {len(rows)} rows to {args.out}")
