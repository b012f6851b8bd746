"""Sub-command ``a2a``: the expert-parallel all-to-all of one MoE layer step under gloo on this CPU (issue 24).

Chapter 9 measured the collectives of tensor, sequence and data parallelism; this measures the two all-to-alls
expert parallelism adds to every MoE layer: *dispatch* (each token row goes to the rank that holds its expert)
and *combine* (the expert's output row comes back), in the forward pass and, mirrored, in the backward pass.

The layer. Hugging Face's ``MixtralSparseMoeBlock`` (transformers 5.x) built from a small ``MixtralConfig``
(hidden 256, 8 experts, top-2, expert FFN width 512, SiLU-gated experts), weights drawn as
``MixtralPreTrainedModel._init_weights`` draws them (normal, std 0.02), the same on every rank. Its router
(``MixtralTopKRouter``: softmax over the 8 logits, top-2, the two weights renormalised) is used as it is. The
experts are split over ``ep`` ranks, ``8 / ep`` consecutive experts per rank, as Megatron-LM's expert
parallelism splits them. One step on rank ``r`` (``T`` tokens, its own):

1. route: HF's router gives each token 2 experts; the ``T * 2`` (token, expert) assignments are sorted by
   expert (so grouped by destination rank, then by local expert) - the permutation of Megatron-LM's
   ``MoEAlltoAllTokenDispatcher`` (``megatron/core/transformer/moe/token_dispatcher.py``);
2. the split sizes: every rank's 8 per-expert counts are all-gathered (``all_gather_into_tensor`` of 8 int64;
   Megatron all-gathers the same counts over the EP group), so each rank knows how many rows it will receive;
3. *dispatch*: ``dist.all_to_all_single(out, in, output_split_sizes, input_split_sizes)``, one row of
   ``hidden`` numbers per assignment;
4. the local experts run on the rows they received (HF's expert arithmetic: ``gate_up`` linear, SiLU(gate) *
   up, ``down`` linear, on the rank's slice of HF's ``gate_up_proj`` / ``down_proj``);
5. *combine*: the inverse all-to-all (splits swapped) brings each output row home, where it is weighted by its
   router weight and summed into its token (``index_add``), as HF's ``MixtralExperts`` does;
6. backward of ``sum(y * g)`` (``g`` a fixed random tensor): autograd runs the combine's backward (an
   all-to-all in the dispatch direction) and then the dispatch's backward (in the combine direction).

The all-to-all is a ``torch.autograd.Function`` whose backward is the same call with the splits swapped (as
Megatron's ``_AllToAll`` in ``megatron/core/tensor_parallel/mappings.py``). gloo has ``all_to_all_single`` with
uneven splits (gloo's ``alltoallv``: ``gloo/alltoallv.cc`` copies the rank's own chunk with ``memcpy`` and
posts one send and one receive to each of the ``ep - 1`` other ranks, empty or not); gloo's list form
``dist.all_to_all`` refuses tensors of different sizes ("ProcessGroupGloo::alltoall: invalid tensor size"), so
the uneven exchange needs ``all_to_all_single``; no send/recv stand-in is needed.

Checks run inside the tool (it stops if one fails): the EP step's output, input gradient, router gradient and
expert gradients equal those of HF's unsplit ``MixtralSparseMoeBlock`` on the same tokens (the experts'
gradients summed over ranks); a ``TorchDispatchMode`` sees exactly the ``c10d.alltoall_base_`` calls the
autograd function made, with the same split sizes; every repeat moves the same bytes.

Bytes: ``*_sent_bytes`` are the rows a rank sends to *other* ranks times ``hidden`` times the element size;
``*_recv_bytes`` the rows it receives from other ranks; ``*_local_bytes`` its own chunk (the ``memcpy``, not on
the wire). The per-peer rows are kept (``*_send_rows``, ``*_recv_rows``: ``;``-separated, by peer rank, own
rank included). ``*_gloo_sends`` is the number of sends gloo posts (``ep - 1``, including empty chunks);
``*_nonempty_sends`` / ``*_nonempty_recvs`` count the chunks that carry at least one row. For uniform
routing the expectation is ``T * k * hidden * bytes * (ep - 1) / ep`` per rank per direction
(``uniform_expected_bytes``).

Time: each all-to-all is timed on every rank after a barrier (so the time excludes waiting for a slower rank
to arrive), the call's time is the slowest rank's (an all-reduce MAX after the step), median and minimum over
``repeats`` steps after one warm-up step. 2 and 4 gloo processes over loopback TCP share this machine's CPUs
(``machine`` says how many), so the times are noisy and say nothing about NVLink or InfiniBand.

Routing: ``hf-init`` (tokens ~ N(0, 1), the router at HF's initialisation: close to uniform routing) and
``skewed`` (the same tokens plus a common offset ``SKEW_OFFSET * u`` along one fixed unit direction ``u``, so
the experts whose router rows lean towards ``u`` get more tokens: a stand-in for a trained router's imbalance,
not a measured one). ``routed_e0 .. routed_e7`` are the rank's own (token, expert) assignments per expert.

Columns of data/moe_all_to_all_gloo.csv (one row per routing x dtype x ep x tokens x phase x rank): routing,
dtype, ep, rank, tokens_per_rank, phase (forward/backward), hidden, experts, top_k, ffn, experts_per_rank,
bytes_per_element, routed_e0..routed_e7, then for exchange in (dispatch, combine): {exchange}_sent_bytes,
{exchange}_recv_bytes, {exchange}_local_bytes, {exchange}_send_rows, {exchange}_recv_rows,
{exchange}_gloo_sends, {exchange}_nonempty_sends, {exchange}_nonempty_recvs, {exchange}_time_s_median,
{exchange}_time_s_min; counts_allgather_bytes (the rank's 8 int64 counts sent to the ep - 1 others by the
split sizes' all-gather, forward only), dispatcher_alltoall_calls, dispatcher_alltoall_input_bytes (the input
tensors of the ``c10d.alltoall_base_`` calls of this phase, own chunk included), uniform_expected_bytes,
phase_time_s_median (the forward, or the backward, of the whole layer step), max_rel_err_vs_hf (the largest
relative error of the checks above), repeats, torch_version, transformers_version, machine, measured_on.
"""

from __future__ import annotations

import statistics
import time

import torch

from .core import date_today, gloo_join, gloo_ranks, write_csv

HIDDEN, EXPERTS, TOP_K, FFN = 256, 8, 2, 512
TOKENS = (256, 1024, 4096)
QUICK_TOKENS = (256,)
EP_SIZES = (2, 4)
#: The size of the common offset of the ``skewed`` routing (tokens ~ N(0, 1) per coordinate plus this times a
#: unit vector): with HF's std-0.02 router the per-expert logit shift is ~ N(0, (0.02 * SKEW_OFFSET)^2).
SKEW_OFFSET = 40.0
REPEATS, QUICK_REPEATS = 9, 2
INIT_STD = 0.02        # MixtralConfig.initializer_range, what MixtralPreTrainedModel._init_weights draws with
EXCHANGES = ("dispatch", "combine")
#: The largest relative difference from HF's unsplit block the tool accepts (fp32 rounding; bf16's 8-bit mantissa
#: with the sums in another order).
ERR_LIMIT = {"float32": 1e-5, "bfloat16": 2e-2}


def _configs(quick):
    """(routing, dtype, tokens) of the sweep: hf-init fp32 at every token count; bf16 and skewed at 1,024."""
    if quick:
        return [("hf-init", "float32", t) for t in QUICK_TOKENS] + [("skewed", "float32", QUICK_TOKENS[0])]
    return ([("hf-init", "float32", t) for t in TOKENS] + [("hf-init", "bfloat16", 1024),
                                                           ("skewed", "float32", 1024)])


class _Recorder:
    """The all-to-alls of one step on this rank: phase, exchange, splits (rows), row bytes, wall time."""

    def __init__(self, counter=None):
        self.phase = "forward"
        self.calls = []
        self.counter = counter

    def set_phase(self, phase):
        """The phase the next calls belong to, told to the dispatcher counter too."""
        self.phase = phase
        if self.counter is not None:
            self.counter.phase = phase

    def exchange(self, x, out_splits, in_splits, name):
        import torch.distributed as dist
        x = x.contiguous()
        out = x.new_empty((sum(out_splits), x.shape[1]))
        dist.barrier()
        t0 = time.perf_counter()
        dist.all_to_all_single(out, x, out_splits, in_splits)
        dt = time.perf_counter() - t0
        self.calls.append({"phase": self.phase, "exchange": name, "in_splits": list(in_splits),
                           "out_splits": list(out_splits), "row_bytes": x.shape[1] * x.element_size(),
                           "time_s": dt})
        return out


class _AllToAll(torch.autograd.Function):
    """An all-to-all whose backward is the inverse all-to-all (splits swapped), as Megatron's ``_AllToAll``."""

    @staticmethod
    def forward(ctx, x, out_splits, in_splits, name, rec):
        ctx.out_splits, ctx.in_splits, ctx.name, ctx.rec = out_splits, in_splits, name, rec
        return rec.exchange(x, out_splits, in_splits, name)

    @staticmethod
    def backward(ctx, grad):
        return ctx.rec.exchange(grad, ctx.in_splits, ctx.out_splits, ctx.name), None, None, None, None


def _dispatch_counter():
    """A TorchDispatchMode that keeps the split sizes and input bytes of every ``c10d.alltoall_base_`` call."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Counter(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.phase = "forward"
            self.calls = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func.namespace == "c10d" and func._opname == "alltoall_base_":
                out, inp = args[0], args[1]
                self.calls.append({"phase": self.phase, "in_bytes": inp.nbytes, "out_bytes": out.nbytes,
                                   "out_splits": list(args[3]), "in_splits": list(args[4])})
            return func(*args, **kwargs)

    return Counter()


def _build_block(dtype):
    from transformers import MixtralConfig
    from transformers.models.mixtral.modeling_mixtral import MixtralSparseMoeBlock

    cfg = MixtralConfig(hidden_size=HIDDEN, intermediate_size=FFN, num_local_experts=EXPERTS,
                        num_experts_per_tok=TOP_K, router_jitter_noise=0.0, hidden_act="silu")
    cfg._experts_implementation = "eager"       # HF's own per-expert loop, the reference (a standalone block
    #                                             has no implementation chosen by from_pretrained)
    torch.manual_seed(0)
    block = MixtralSparseMoeBlock(cfg)
    with torch.no_grad():
        for p in block.parameters():            # the block's parameters come uninitialised (torch.empty)
            p.normal_(0.0, INIT_STD)
    return block.to(dtype).train()


def _tokens(routing, tokens, rank, dtype):
    gen = torch.Generator().manual_seed(1000 + 10 * rank + tokens)
    x = torch.randn(tokens, HIDDEN, generator=gen)
    if routing == "skewed":
        u = torch.randn(HIDDEN, generator=torch.Generator().manual_seed(7))
        x = x + SKEW_OFFSET * u / u.norm()
    g = torch.randn(tokens, HIDDEN, generator=gen)
    return x.to(dtype), g.to(dtype)


def _ep_step(block, w_gu, w_down, x, g, rank, ep, rec):
    """One forward and backward of the expert-parallel layer on this rank's tokens; returns y and the
    per-expert counts of this rank's assignments."""
    import torch.distributed as dist

    n_local = EXPERTS // ep
    rec.set_phase("forward")
    _, weights, idx = block.gate(x)                       # HF's router: (T, k) weights and expert ids
    flat = idx.reshape(-1)
    counts = torch.bincount(flat, minlength=EXPERTS)
    order = torch.argsort(flat, stable=True)              # assignments grouped by expert, hence by rank
    tok = order // TOP_K
    all_counts = torch.empty(ep * EXPERTS, dtype=counts.dtype)
    (getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor)(all_counts, counts)
    all_counts = all_counts.view(ep, EXPERTS)
    in_splits = counts.view(ep, n_local).sum(1).tolist()
    recv_counts = all_counts[:, rank * n_local:(rank + 1) * n_local]      # (source rank, local expert)
    out_splits = recv_counts.sum(1).tolist()
    received = _AllToAll.apply(x[tok], out_splits, in_splits, "dispatch", rec)
    local_e = torch.repeat_interleave(torch.arange(n_local).repeat(ep), recv_counts.reshape(-1))
    perm = torch.argsort(local_e, stable=True)
    grouped = received[perm]
    outs = []
    for j, rows in enumerate(grouped.split(recv_counts.sum(0).tolist())):
        gate, up = torch.nn.functional.linear(rows, w_gu[j]).chunk(2, dim=-1)
        outs.append(torch.nn.functional.linear(block.experts.act_fn(gate) * up, w_down[j]))
    expert_out = torch.cat(outs)[torch.argsort(perm)]
    back = _AllToAll.apply(expert_out, in_splits, out_splits, "combine", rec)
    w_sorted = weights.reshape(-1)[order]
    y = torch.zeros_like(x).index_add(0, tok, (back * w_sorted[:, None]).to(x.dtype))
    t_fwd = time.perf_counter()
    rec.set_phase("backward")
    (y.float() * g.float()).sum().backward()
    return y, counts, t_fwd


def _rel_err(a, b):
    a, b = a.detach().float(), b.detach().float()
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))


def _run_config(rank, ep, routing, dtype_name, tokens, repeats):
    import torch.distributed as dist

    dtype = getattr(torch, dtype_name)
    n_local = EXPERTS // ep
    lo = rank * n_local
    ref = _build_block(dtype)
    block = _build_block(dtype)
    w_gu = torch.nn.Parameter(block.experts.gate_up_proj.detach()[lo:lo + n_local].clone())
    w_down = torch.nn.Parameter(block.experts.down_proj.detach()[lo:lo + n_local].clone())
    x0, g = _tokens(routing, tokens, rank, dtype)

    # the unsplit HF block on the same tokens: the reference the EP step must reproduce
    x_ref = x0.clone().requires_grad_(True)
    y_ref = ref(x_ref.view(1, tokens, HIDDEN)).view(tokens, HIDDEN)
    (y_ref.float() * g.float()).sum().backward()
    exp_grads = [ref.experts.gate_up_proj.grad.float().clone(), ref.experts.down_proj.grad.float().clone()]
    for t in exp_grads:
        dist.all_reduce(t)                              # expert gradients: every rank's tokens contribute

    runs = []
    for it in range(repeats + 1):                       # run 0 is the warm-up (and the checked one)
        for p in (w_gu, w_down, block.gate.weight):
            p.grad = None
        x = x0.clone().requires_grad_(True)
        counter = _dispatch_counter()
        rec = _Recorder(counter)
        dist.barrier()
        t0 = time.perf_counter()
        with counter:
            y, counts, t_fwd = _ep_step(block, w_gu, w_down, x, g, rank, ep, rec)
        t1 = time.perf_counter()
        if it == 0:
            err = max(_rel_err(y, y_ref), _rel_err(x.grad, x_ref.grad),
                      _rel_err(block.gate.weight.grad, ref.gate.weight.grad),
                      _rel_err(w_gu.grad, exp_grads[0][lo:lo + n_local]),
                      _rel_err(w_down.grad, exp_grads[1][lo:lo + n_local]))
            if err > ERR_LIMIT[dtype_name]:
                raise RuntimeError(f"rank {rank}: the EP step differs from HF's block by {err:.1e} (relative)")
            mine = [(c["phase"], c["in_splits"], c["out_splits"]) for c in rec.calls]
            seen = [(c["phase"], c["in_splits"], c["out_splits"]) for c in counter.calls]
            if mine != seen:
                raise RuntimeError(f"rank {rank}: the dispatcher saw {seen}, the autograd function made {mine}")
        runs.append({"calls": rec.calls, "counter": counter.calls, "counts": counts.tolist(),
                     "fwd_s": t_fwd - t0, "bwd_s": t1 - t_fwd})
    # the time of a call is the slowest rank's
    times = torch.tensor([[c["time_s"] for c in r["calls"]] + [r["fwd_s"], r["bwd_s"]] for r in runs[1:]],
                         dtype=torch.float64)
    dist.all_reduce(times, op=dist.ReduceOp.MAX)
    errs = torch.tensor([err], dtype=torch.float64)
    dist.all_reduce(errs, op=dist.ReduceOp.MAX)
    first = runs[0]
    for r in runs[1:]:
        if ([(c["in_splits"], c["out_splits"]) for c in r["calls"]]
                != [(c["in_splits"], c["out_splits"]) for c in first["calls"]]):
            raise RuntimeError(f"rank {rank}: the repeats moved different rows")
    return {"rank": rank, "counts": first["counts"], "calls": first["calls"], "counter": first["counter"],
            "times": times.tolist(), "err": float(errs[0]), "bytes_per_element": x0.element_size(),
            "counts_bytes": EXPERTS * 8 * (ep - 1)}


def _worker(rank, world, port, configs, repeats, queue):
    import torch.distributed as dist

    gloo_join(rank, world, port)
    results = []
    for routing, dtype_name, tokens in configs:
        res = _run_config(rank, world, routing, dtype_name, tokens, repeats)
        gathered = [None] * world
        dist.all_gather_object(gathered, res)
        results.append(((routing, dtype_name, tokens), gathered))
    if rank == 0:
        queue.put(results)
    dist.barrier()
    dist.destroy_process_group()


def _rows_for(ep, routing, dtype_name, tokens, res, repeats, note, versions):
    """The CSV rows of one rank's result: a forward and a backward row."""
    rows = []
    n_calls = len(res["calls"])
    med = [statistics.median(col) for col in zip(*res["times"])]
    mins = [min(col) for col in zip(*res["times"])]
    rank = res["rank"]
    for phase_i, phase in enumerate(("forward", "backward")):
        row = {"routing": routing, "dtype": dtype_name, "ep": ep, "rank": rank, "tokens_per_rank": tokens,
               "phase": phase, "hidden": HIDDEN, "experts": EXPERTS, "top_k": TOP_K, "ffn": FFN,
               "experts_per_rank": EXPERTS // ep, "bytes_per_element": res["bytes_per_element"]}
        row.update({f"routed_e{e}": res["counts"][e] for e in range(EXPERTS)})
        for name in EXCHANGES:
            sel = [(i, c) for i, c in enumerate(res["calls"]) if c["phase"] == phase and c["exchange"] == name]
            if len(sel) != 1:
                raise RuntimeError(f"{len(sel)} {name} calls in the {phase} of rank {rank}")
            i, c = sel[0]
            rb = c["row_bytes"]
            ins, outs = c["in_splits"], c["out_splits"]
            others = [j for j in range(ep) if j != rank]
            row.update({f"{name}_sent_bytes": sum(ins[j] for j in others) * rb,
                        f"{name}_recv_bytes": sum(outs[j] for j in others) * rb,
                        f"{name}_local_bytes": ins[rank] * rb,
                        f"{name}_send_rows": ";".join(map(str, ins)), f"{name}_recv_rows": ";".join(map(str, outs)),
                        f"{name}_gloo_sends": ep - 1,
                        f"{name}_nonempty_sends": sum(1 for j in others if ins[j] > 0),
                        f"{name}_nonempty_recvs": sum(1 for j in others if outs[j] > 0),
                        f"{name}_time_s_median": f"{med[i]:.6e}", f"{name}_time_s_min": f"{mins[i]:.6e}"})
        seen = [c for c in res["counter"] if c["phase"] == phase]
        row.update({"counts_allgather_bytes": res["counts_bytes"] if phase == "forward" else 0,
                    "dispatcher_alltoall_calls": len(seen),
                    "dispatcher_alltoall_input_bytes": sum(c["in_bytes"] for c in seen),
                    "uniform_expected_bytes": tokens * TOP_K * HIDDEN * res["bytes_per_element"] * (ep - 1) / ep,
                    "phase_time_s_median": f"{med[n_calls + phase_i]:.6e}",
                    "max_rel_err_vs_hf": f"{res['err']:.2e}", "repeats": repeats, **versions,
                    "machine": note, "measured_on": date_today()})
        rows.append(row)
    return rows


def cmd_a2a(args):
    """Sub-command ``a2a``: the sweep at ep = 2 and 4 (``--quick``: 256 tokens, 2 repeats), written to ``--out``
    (data/moe_all_to_all_gloo.csv)."""
    import transformers

    repeats = QUICK_REPEATS if args.quick else REPEATS
    configs = _configs(args.quick)
    versions = {"torch_version": torch.__version__, "transformers_version": transformers.__version__}
    rows = []
    for ep in EP_SIZES:
        results, note = gloo_ranks("a2a", ep, _worker, (configs, repeats))
        for (routing, dtype_name, tokens), gathered in results:
            for res in gathered:
                rows.extend(_rows_for(ep, routing, dtype_name, tokens, res, repeats, note, versions))
            sel = [r for r in rows if (r["ep"], r["routing"], r["dtype"], r["tokens_per_rank"])
                   == (ep, routing, dtype_name, tokens) and r["phase"] == "forward"]
            sent = [r["dispatch_sent_bytes"] for r in sel]
            print(f"ep={ep} {routing:8s} {dtype_name:8s} T={tokens:5d}: dispatch sent/rank {sent} B, uniform "
                  f"{sel[0]['uniform_expected_bytes']:.0f} B, dispatch median "
                  f"{float(sel[0]['dispatch_time_s_median']) * 1e3:.2f} ms, max rel err vs HF "
                  f"{sel[0]['max_rel_err_vs_hf']}", flush=True)
    write_csv(args.out, rows)
    print(f"wrote {len(rows)} rows to {args.out}")
