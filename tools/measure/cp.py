"""Sub-command ``cp``: context parallelism (ring attention and all-gather KV) on CPU with gloo (issue 23).

What runs
---------
A real ``LlamaForCausalLM`` (transformers, fp32, random seeded weights from a ``LlamaConfig``, no hub access) at
the shape :data:`CP_SHAPE`, one sequence of ``s`` tokens split over ``cp`` = 1, 2, 4 CPU processes joined by gloo.

**Stand-in.** PyTorch's own experimental API (``torch.distributed.tensor.experimental.context_parallel``, torch
2.13) does not run here: on the CPU, ``scaled_dot_product_attention`` dispatches to
``aten._scaled_dot_product_flash_attention_for_cpu``, for which the API registers no ring handler and DTensor
no sharding strategy (``NotImplementedError: Operator aten._scaled_dot_product_flash_attention_for_cpu.default
does not have a sharding strategy registered``); it handles only the CUDA flash, memory-efficient and cuDNN
kernels. So this module plugs its own attention into HF Llama through transformers' ``AttentionInterface``
(``attn_implementation="cp_ring"`` / ``"cp_allgather"``): two ``torch.autograd.Function`` written after
Transformer Engine's ``AttnFuncWithCPAndKVP2P`` and ``AttnFuncWithCPAndKVAllGather``
(transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py; Megatron-LM's
``--cp-comm-type p2p`` / ``all_gather`` use them):

* **Load balancing** (both): the sequence is cut into ``2 cp`` chunks of ``c = s / (2 cp)`` tokens and rank ``r``
  holds chunks ``r`` and ``2 cp - 1 - r`` (Megatron-LM's ``get_batch_on_this_cp_rank``), with their true
  ``position_ids`` so that RoPE is unchanged.
* **Ring** (``p2p``): K and V packed in one buffer ``kv`` of ``2 b (s/cp) g d`` elements. Forward: ``cp`` steps;
  at step ``i`` the rank sends the block it holds to ``r + 1`` and receives the next from ``r - 1``
  (``batch_isend_irecv``), while it attends to the block it holds (step 0: its own, causal mask; a block from an
  earlier rank: all of q against the block's first chunk; from a later rank: q's second chunk against the whole
  block, as TE's three sections), merging partial outputs by log-sum-exp. Forward sends ``cp - 1`` blocks.
  Saved for backward, as TE: q, **one** KV block (the last one received, from rank ``r + 1``), the output and the
  fp32 log-sum-exp. Backward runs the ring in reverse (send to ``r - 1``): ``cp - 1`` KV sends plus ``cp - 1``
  sends of a partial dKV that travels with its block and ends on the block's owner.
* **All-gather** (Llama 3 405B's choice, Dubey et al. 2024 section 3.3.2): forward all-gathers K and V
  (``all_gather_into_tensor`` of the packed ``kv``), attends the local q to the gathered keys (causal mask on
  global positions), frees them; saves q, the *local* K and V, the output and the log-sum-exp. Backward
  all-gathers K and V again, computes dK and dV for the whole sequence and reduce-scatters them
  (``reduce_scatter_tensor``).

How the stand-in differs from Megatron/TE: the block attention is plain fp32 matmul + softmax math (no flash
kernel; its ``b a n m`` score tiles are transient, never saved), the communication is not overlapped on a second
stream (CPU, one thread), no ``a2a`` / hierarchical variants, no FP8, one sequence (no THD packing). The sizes of
what is saved and sent are the ones TE's functions save and send.

What is measured (one forward + backward per configuration, on each rank)
------------------------------------------------------------------------
* Bytes autograd saves for the backward (``saved_tensors_hooks``, deduplicated by storage, parameters excluded),
  split by who saved them: ``attn_in`` (the normed input of q/k/v projections), ``attn_q``, ``attn_kv`` (the KV
  block(s) the attention function keeps), ``attn_out`` (attention output, also o_proj's input), ``attn_lse``,
  ``rope`` (the cos/sin tables), ``mlp``, ``norms``, ``embedding``, ``logits_loss`` (LM-head input, logits and
  the loss's log-softmax), ``other``.
* Every message of the attention's communication, by phase (forward, backward) and op, counted by the wrappers
  in :class:`CountingComm` that issue them: ``message_bytes`` is the tensor one call passes (a p2p buffer; the
  gathered output of an all-gather; the input of a reduce-scatter). ``send_bytes`` / ``recv_bytes`` per rank:
  p2p, the buffer; all-gather and reduce-scatter, the ``(cp - 1) / cp`` share of the full buffer a rank sends and
  receives on a ring (NCCL's algorithm; gloo's own differ).
* The gradient all-reduce over the cp group (``grad_sync``; Megatron folds cp into the data-parallel group for
  it): all parameter gradients, one bucket.
* The peak of transient receive buffers per phase: buffers allocated to receive KV / dKV (p2p) or the gathered
  KV and the full dKV (all-gather), counted while alive; a received block that is kept for the backward leaves the
  count when it is saved.
* Correctness: on every rank the same model runs the whole sequence with HF's own ``sdpa`` attention (the cp=1
  reference, an independent implementation); the cp run's loss (local sums over the global token count,
  all-reduced) and its all-reduced gradients are compared with it (``max_abs_loss_diff``,
  ``max_abs_grad_diff``, ``max_rel_grad_diff`` relative to the largest reference gradient).

Writes ``data/cp_gloo_measurements.csv`` (one row per variant, cp, seq, rank) and ``data/cp_gloo_messages.csv``
(one row per message kind). Each rank is a ``spawn`` process; :func:`_cp_worker` stays module-level.
"""

from __future__ import annotations

import time

import torch

from llmsizing import Model

from .core import date_today, free_port, gather_ranks, gloo_join, write_csv
from .dist import llama_config

#: The model of the sweep: the shape of the ``dist`` sweep (hidden 256, 4 layers, 8 heads, 2 KV heads), fp32.
CP_SHAPE = Model("cp-llama", layers=4, hidden=256, heads=8, kv_heads=2, ffn_hidden=688, vocab=8192,
                 gated_mlp=True, tied_embeddings=False, norm="rmsnorm", max_seq=1024)
CP_SEQS = (256, 512, 1024)
CP_SIZES = (1, 2, 4)
CP_VARIANTS = ("ring", "allgather")
CP_BATCH = 1
SAVED_CATEGORIES = ("attn_in", "attn_q", "attn_kv", "attn_out", "attn_lse", "rope", "mlp", "norms", "embedding",
                    "logits_loss", "other")


# ============================================================================ counted communication
class CountingComm:
    """Issues the attention's messages and records them: ``records[(phase, op, tensor, message_bytes)] =
    calls`` plus per-phase ``send``/``recv`` bytes, and the live bytes of receive buffers (peak per phase)."""

    def __init__(self, rank, world):
        self.rank, self.world = rank, world
        self.phase = "forward"
        self.records = {}
        self.sent, self.recvd = {}, {}
        self.live_recv = 0
        self.peak_recv = {}

    def _note(self, op, name, message_bytes, send_bytes, recv_bytes):
        key = (self.phase, op, name, int(message_bytes))
        self.records[key] = self.records.get(key, 0) + 1
        self.sent[self.phase] = self.sent.get(self.phase, 0) + int(send_bytes)
        self.recvd[self.phase] = self.recvd.get(self.phase, 0) + int(recv_bytes)

    def hold(self, t):
        if self.world == 1:             # nothing is received at cp = 1
            return
        self.live_recv += t.nbytes
        self.peak_recv[self.phase] = max(self.peak_recv.get(self.phase, 0), self.live_recv)

    def release(self, t):
        if self.world == 1:
            return
        self.live_recv -= t.nbytes

    def exchange(self, send, name, dst, src):
        """Send ``send`` to ``dst`` while receiving a tensor of its shape from ``src`` (one p2p step)."""
        import torch.distributed as dist
        recv = torch.empty_like(send)
        self.hold(recv)
        ops = [dist.P2POp(dist.isend, send, dst), dist.P2POp(dist.irecv, recv, src)]
        reqs = dist.batch_isend_irecv(ops)
        self._note("send", name, send.nbytes, send.nbytes, 0)
        self._note("recv", name, recv.nbytes, 0, recv.nbytes)
        return recv, reqs

    def all_gather(self, local, name):
        import torch.distributed as dist
        if self.world == 1:
            return local[None].clone()
        out = torch.empty(self.world * local.numel(), dtype=local.dtype)     # gloo wants flat, dim-0 concatenated
        self.hold(out)
        dist.all_gather_into_tensor(out, local.contiguous().view(-1))
        out = out.view((self.world,) + tuple(local.shape))
        share = (self.world - 1) * local.nbytes            # ring all-gather: each rank sends/receives n-1 shards
        self._note("all_gather", name, out.nbytes, share, share)
        return out

    def reduce_scatter(self, full, name):
        import torch.distributed as dist
        if self.world == 1:
            return full[0].clone()
        out = torch.empty(tuple(full.shape[1:]), dtype=full.dtype)
        dist.reduce_scatter_tensor(out.view(-1), full.contiguous().view(-1))
        share = (self.world - 1) * out.nbytes
        self._note("reduce_scatter", name, full.nbytes, share, share)
        return out

    def all_reduce(self, t, name):
        import torch.distributed as dist
        if self.world == 1:
            return
        dist.all_reduce(t)
        share = 2 * (self.world - 1) * t.nbytes // self.world   # ring all-reduce
        self._note("all_reduce", name, t.nbytes, share, share)


#: Set by the worker: the communicator, and the label of each storage the attention functions save (by data_ptr).
_STATE = {"comm": None, "tags": {}}


# ============================================================================ block attention (fp32 math)
def _expand(x, rep):
    return x.repeat_interleave(rep, dim=1) if rep > 1 else x


def _block_fwd(q, k, v, scale, mask):
    """Attention of ``q`` (b, a, n, d) to ``k``, ``v`` (b, g, m, d): output and log-sum-exp (b, a, n)."""
    rep = q.shape[1] // k.shape[1]
    s = torch.matmul(q, _expand(k, rep).transpose(-1, -2)) * scale
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.exp(s - lse[..., None])
    return torch.matmul(p, _expand(v, rep)), lse


def _block_bwd(q, k, v, out, dout, lse, scale, mask):
    """Gradients of one block (flash-attention style: probabilities recomputed from q, k and the saved lse)."""
    b, a, n, d = q.shape
    g = k.shape[1]
    rep = a // g
    kr, vr = _expand(k, rep), _expand(v, rep)
    s = torch.matmul(q, kr.transpose(-1, -2)) * scale
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    p = torch.exp(s - lse[..., None])
    dv = torch.matmul(p.transpose(-1, -2), dout)
    dp = torch.matmul(dout, vr.transpose(-1, -2))
    delta = (dout * out).sum(-1, keepdim=True)
    ds = p * (dp - delta)
    dq = torch.matmul(ds, kr) * scale
    dk = torch.matmul(ds.transpose(-1, -2), q) * scale
    m = k.shape[2]
    return dq, dk.view(b, g, rep, m, d).sum(2), dv.view(b, g, rep, m, d).sum(2)


def _merge(out, lse, rows, o_i, lse_i):
    """Fold a partial (o_i, lse_i) for q rows ``rows`` into the running output by log-sum-exp."""
    o, l_ = out[:, :, rows], lse[:, :, rows]
    new = torch.logaddexp(l_, lse_i)
    out[:, :, rows] = o * torch.exp(l_ - new)[..., None] + o_i * torch.exp(lse_i - new)[..., None]
    lse[:, :, rows] = new


def _section(rank, src, c):
    """TE's three sections of a causal, load-balanced step: (q rows, kv rows, causal mask needed)."""
    if src == rank:
        return slice(0, 2 * c), slice(0, 2 * c), True
    if src < rank:
        return slice(0, 2 * c), slice(0, c), False
    return slice(c, 2 * c), slice(0, 2 * c), False


def _local_mask(rank, cp, c):
    pos = _local_positions(rank, cp, c)
    return pos[:, None] >= pos[None, :]


def _local_positions(rank, cp, c):
    return torch.cat([torch.arange(rank * c, (rank + 1) * c),
                      torch.arange((2 * cp - 1 - rank) * c, (2 * cp - rank) * c)])


def _save(ctx, labels, *tensors):
    """``save_for_backward``, noting which label each storage gets (autograd packs a custom Function's saved
    tensors after its forward returns, so the pack hook looks the label up by storage)."""
    for label, t in zip(labels, tensors):
        _STATE["tags"][t.untyped_storage().data_ptr()] = label
    ctx.save_for_backward(*tensors)


class RingAttention(torch.autograd.Function):
    """Ring attention with causal load balancing, after TE's ``AttnFuncWithCPAndKVP2P`` (see the module doc)."""

    @staticmethod
    def forward(ctx, q, k, v, scale):
        comm = _STATE["comm"]
        r, cp = comm.rank, comm.world
        c = q.shape[2] // 2
        nxt_rank, prev_rank = (r + 1) % cp, (r - 1) % cp
        out = torch.zeros_like(q)
        lse = torch.full(q.shape[:3], float("-inf"))
        cur = torch.stack([k, v])                       # packed K and V, as TE's kv buffer
        own = cur
        for i in range(cp):
            src = (r - i) % cp
            if i < cp - 1:
                nxt, reqs = comm.exchange(cur, "kv", nxt_rank, prev_rank)
            qr, kr, causal = _section(r, src, c)
            o_i, lse_i = _block_fwd(q[:, :, qr], cur[0][:, :, kr], cur[1][:, :, kr], scale,
                                    _local_mask(r, cp, c) if causal else None)
            _merge(out, lse, qr, o_i, lse_i)
            if i < cp - 1:
                for q_ in reqs:
                    q_.wait()
                if cur is not own:
                    comm.release(cur)
                cur = nxt
        if cur is not own:
            comm.release(cur)                           # the last block received leaves the transient count: saved
        out_bsad = out.transpose(1, 2).contiguous()     # (b, s, a, d): the tensor returned and saved, as TE
        _save(ctx, ("attn_q", "attn_kv", "attn_out", "attn_lse"), q, cur, out_bsad, lse)
        ctx.scale = scale
        return out_bsad

    @staticmethod
    def backward(ctx, dout_bsad):
        comm = _STATE["comm"]
        r, cp = comm.rank, comm.world
        q, cur, out_bsad, lse = ctx.saved_tensors
        out = out_bsad.transpose(1, 2)
        dout = dout_bsad.transpose(1, 2)
        c = q.shape[2] // 2
        nxt_rank, prev_rank = (r + 1) % cp, (r - 1) % cp
        dq = torch.zeros_like(q)
        # the partial dKV from rank r + 1 and the requests of that hand-off, waited on before this block's
        # dK/dV is added (TE's backward); one exchange sets both, so none is pending at the first step
        partial, dkv_reqs = None, []
        saved_kv = cur
        for j in range(cp):
            src = (r + 1 + j) % cp
            if j < cp - 1:
                nxt, kv_reqs = comm.exchange(cur, "kv", prev_rank, nxt_rank)
            qr, kr, causal = _section(r, src, c)
            mask = _local_mask(r, cp, c) if causal else None
            dq_, dk_, dv_ = _block_bwd(q[:, :, qr], cur[0][:, :, kr], cur[1][:, :, kr], out[:, :, qr],
                                       dout[:, :, qr], lse[:, :, qr], ctx.scale, mask)
            dq[:, :, qr] += dq_
            dkv = torch.zeros_like(cur)
            dkv[0][:, :, kr] = dk_
            dkv[1][:, :, kr] = dv_
            if partial is not None:                     # the partial dKV of this block, from rank r + 1
                for q_ in dkv_reqs:
                    q_.wait()
                dkv += partial
                comm.release(partial)
            if j < cp - 1:
                partial, dkv_reqs = comm.exchange(dkv, "dkv", prev_rank, nxt_rank)
                for q_ in kv_reqs:
                    q_.wait()
                if cur is not saved_kv:
                    comm.release(cur)
                cur = nxt
            else:
                final = dkv
        if cur is not saved_kv:
            comm.release(cur)
        return dq, final[0], final[1], None


def _gather_order(cp, c):
    """Index that puts an all-gathered (cp, ..., 2c, ...) KV into sequence order along a flat (cp*2c) axis."""
    idx = []
    for t in range(2 * cp):
        j, half = (t, 0) if t < cp else (2 * cp - 1 - t, 1)
        idx.extend(range(j * 2 * c + half * c, j * 2 * c + (half + 1) * c))
    return torch.tensor(idx)


class AllGatherAttention(torch.autograd.Function):
    """All-gather-KV context parallelism, after TE's ``AttnFuncWithCPAndKVAllGather`` (Llama 3's choice)."""

    @staticmethod
    def _full(comm, kv, c):
        g = comm.all_gather(kv, "kv")                   # (cp, 2, b, g, 2c, d)
        cp = comm.world
        flat = g.permute(1, 2, 3, 0, 4, 5).reshape(2, kv.shape[1], kv.shape[2], cp * 2 * c, kv.shape[-1])
        return g, flat[:, :, :, _gather_order(cp, c)]

    @staticmethod
    def forward(ctx, q, k, v, scale):
        comm = _STATE["comm"]
        r, cp = comm.rank, comm.world
        c = q.shape[2] // 2
        kv = torch.stack([k, v])
        gathered, full = AllGatherAttention._full(comm, kv, c)
        pos = _local_positions(r, cp, c)
        mask = pos[:, None] >= torch.arange(2 * cp * c)[None, :]
        out, lse = _block_fwd(q, full[0], full[1], scale, mask)
        comm.release(gathered)
        del gathered, full
        out_bsad = out.transpose(1, 2).contiguous()
        _save(ctx, ("attn_q", "attn_kv", "attn_out", "attn_lse"), q, kv, out_bsad, lse)
        ctx.scale = scale
        return out_bsad

    @staticmethod
    def backward(ctx, dout_bsad):
        comm = _STATE["comm"]
        r, cp = comm.rank, comm.world
        q, kv, out_bsad, lse = ctx.saved_tensors
        c = q.shape[2] // 2
        gathered, full = AllGatherAttention._full(comm, kv, c)
        pos = _local_positions(r, cp, c)
        mask = pos[:, None] >= torch.arange(2 * cp * c)[None, :]
        dq, dk, dv = _block_bwd(q, full[0], full[1], out_bsad.transpose(1, 2), dout_bsad.transpose(1, 2), lse,
                                ctx.scale, mask)
        comm.release(gathered)
        del gathered, full
        dfull = torch.stack([dk, dv])                   # (2, b, g, s, d) in sequence order
        by_rank = torch.empty((cp,) + tuple(kv.shape), dtype=kv.dtype)
        comm.hold(by_rank)
        order = _gather_order(cp, c)                    # sequence position of rank-major flat index
        flat = torch.empty_like(dfull)
        flat[:, :, :, order] = dfull
        by_rank.copy_(flat.reshape(2, kv.shape[1], kv.shape[2], cp, 2 * c, kv.shape[-1]).permute(3, 0, 1, 2, 4, 5))
        mine = comm.reduce_scatter(by_rank, "dkv")
        comm.release(by_rank)
        return dq, mine[0], mine[1], None


def _attention_fn(kind):
    fn = RingAttention if kind == "ring" else AllGatherAttention

    def attention(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
        return fn.apply(query, key, value, scaling), None
    return attention


def register_attention():
    """Register ``cp_ring`` and ``cp_allgather`` with transformers (attention and a no-op mask function: the
    functions build their causal mask from the rank's global positions)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface
    for kind in CP_VARIANTS:
        AttentionInterface.register(f"cp_{kind}", _attention_fn(kind))
        AttentionMaskInterface.register(f"cp_{kind}", lambda *a, **k: None)


# ============================================================================ what autograd saves, by category
def _category(module, label):
    if label:
        return label
    if ".self_attn." in module + "." and module.endswith(("q_proj", "k_proj", "v_proj")):
        return "attn_in"
    if module.endswith("o_proj"):
        return "attn_out"
    if module.endswith("self_attn"):
        return "rope"
    if ".mlp" in module:
        return "mlp"
    if module.endswith("norm"):
        return "norms"
    if module.endswith("embed_tokens"):
        return "embedding"
    if module in ("lm_head", "<root>"):
        return "logits_loss"
    return "other"


def _cp_worker(rank, world, variant, seqs, port, queue):

    import torch.distributed as dist
    import transformers as tf

    from .core import ModuleTagger, saved_storage

    gloo_join(rank, world, port)
    register_attention()
    m = CP_SHAPE
    cfg = llama_config(m, attn_implementation="sdpa")
    torch.manual_seed(0)
    model = tf.LlamaForCausalLM(cfg).train()
    params = list(model.named_parameters())
    param_ptrs = {p.untyped_storage().data_ptr() for _, p in params}
    comm = CountingComm(rank, world)
    _STATE["comm"] = comm
    results = []
    for seq in seqs:
        gen = torch.Generator().manual_seed(seq)
        ids = torch.randint(0, m.vocab, (CP_BATCH, seq), generator=gen)
        shift = torch.cat([ids[:, 1:], torch.full((CP_BATCH, 1), -100)], dim=1)   # HF's shift, done globally
        n_items = torch.tensor(int((shift != -100).sum()))
        # the reference: whole sequence, HF's own sdpa attention, one process
        model.set_attn_implementation("sdpa")
        model.zero_grad(set_to_none=True)
        ref = model(input_ids=ids, shift_labels=shift, labels=shift, num_items_in_batch=n_items).loss
        ref.backward()
        ref_loss = float(ref.detach())
        ref_grads = {n: p.grad.detach().clone() for n, p in params}
        # the cp run
        c = seq // (2 * world)
        pos = _local_positions(rank, world, c)
        model.set_attn_implementation(f"cp_{variant}")
        model.zero_grad(set_to_none=True)
        comm.records, comm.sent, comm.recvd, comm.peak_recv, comm.live_recv = {}, {}, {}, {}, 0
        tagger = ModuleTagger(model)
        saved = {}
        _STATE["tags"] = {}

        def pack(t):
            st = saved_storage(t, param_ptrs)
            if st is not None and st.data_ptr() not in saved:
                label = _STATE["tags"].get(st.data_ptr())
                saved[st.data_ptr()] = (_category(tagger.stack[-1], label), st.nbytes(), st)
            return t

        comm.phase = "forward"
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss = model(input_ids=ids[:, pos], position_ids=pos[None, :], labels=shift[:, pos],
                         shift_labels=shift[:, pos], num_items_in_batch=n_items).loss
        tagger.remove()
        by_cat = dict.fromkeys(SAVED_CATEGORIES, 0)
        for cat, nb, _ in saved.values():
            by_cat[cat] += nb
        saved.clear()
        _STATE["tags"] = {}
        comm.phase = "backward"
        loss.backward()
        comm.phase = "grad_sync"
        flat = torch.cat([p.grad.reshape(-1) for _, p in params])
        comm.all_reduce(flat, "grads")
        total = loss.detach().clone()
        dist.all_reduce(total)                        # the global loss (not counted: one scalar, for the check)
        off, diff, ref_max = 0, 0.0, 0.0
        for n, p in params:
            g = flat[off:off + p.numel()].view_as(p)
            off += p.numel()
            diff = max(diff, float((g - ref_grads[n]).abs().max()))
            ref_max = max(ref_max, float(ref_grads[n].abs().max()))
        row = {"variant": variant, "cp": world, "rank": rank, "batch": CP_BATCH, "seq": seq,
               "seq_per_rank": 2 * c, "saved_total_bytes": sum(by_cat.values()),
               **{f"saved_{k}_bytes": v for k, v in by_cat.items()}}
        for ph in ("forward", "backward", "grad_sync"):
            row[f"{ph}_send_bytes"] = comm.sent.get(ph, 0)
            row[f"{ph}_recv_bytes"] = comm.recvd.get(ph, 0)
            row[f"{ph}_calls"] = sum(n for (p_, op, _, _), n in comm.records.items()
                                     if p_ == ph and op != "recv")
        row["forward_recv_buffer_peak_bytes"] = comm.peak_recv.get("forward", 0)
        row["backward_recv_buffer_peak_bytes"] = comm.peak_recv.get("backward", 0)
        row.update(loss=float(total), ref_loss=ref_loss, max_abs_loss_diff=abs(float(total) - ref_loss),
                   max_abs_grad_diff=diff, max_rel_grad_diff=diff / ref_max if ref_max else 0.0)
        msgs = [{"variant": variant, "cp": world, "rank": rank, "seq": seq, "phase": ph, "op": op, "tensor": nm,
                 "message_bytes": nb, "calls": n} for (ph, op, nm, nb), n in sorted(comm.records.items())]
        results.append((row, msgs))
        del loss, flat
    queue.put((rank, results, torch.__version__, tf.__version__))
    dist.barrier()
    dist.destroy_process_group()


def cmd_cp(args):
    """Sub-command ``cp``: see the module docstring."""

    import torch.multiprocessing as mp

    today = date_today()
    m = CP_SHAPE
    config = dict(layers=m.layers, hidden=m.hidden, heads=m.heads, kv_heads=m.kv_heads, head_dim=m.head_dim,
                  ffn=m.ffn_hidden, vocab=m.vocab, dtype="float32")
    seqs = CP_SEQS[:1] if args.quick else CP_SEQS
    rows, msg_rows = [], []
    for variant in CP_VARIANTS:
        for world in CP_SIZES:
            t0 = time.perf_counter()
            port = free_port()
            ctx = mp.get_context("spawn")
            queue = ctx.Queue()
            procs = [ctx.Process(target=_cp_worker, args=(r, world, variant, seqs, port, queue))
                     for r in range(world)]
            got = gather_ranks(procs, queue, world, f"cp {variant} x {world}")
            for rank, results, tv, hv in sorted(got, key=lambda g: g[0]):
                versions = {"torch_version": tv, "transformers_version": hv}
                for row, msgs in results:
                    rows.append({**row, **config, **versions, "measured_on": today})
                    msg_rows.extend({**mm, **config, **versions, "measured_on": today} for mm in msgs)
                    if rank == 0:
                        print(f"{variant:9s} cp={world} seq={row['seq']:5d} saved={row['saved_total_bytes']:>10} "
                              f"fwd send={row['forward_send_bytes']:>8} bwd send={row['backward_send_bytes']:>8} "
                              f"loss diff={row['max_abs_loss_diff']:.2e} grad diff={row['max_abs_grad_diff']:.2e}",
                              flush=True)
            print(f"  {variant} x {world}: {time.perf_counter() - t0:.1f} s", flush=True)
    rows.sort(key=lambda r: (CP_VARIANTS.index(r["variant"]), r["cp"], r["seq"], r["rank"]))
    write_csv(args.out, rows)
    write_csv(args.messages_out, msg_rows)
    print(f"wrote {len(rows)} rows to {args.out}, {len(msg_rows)} to {args.messages_out}")
