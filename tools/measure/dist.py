"""Sub-command ``dist``: per-rank model states and the collectives of one step under torch.distributed (chapter 9).

A real ``LlamaForCausalLM`` at a small shape runs on 2, 3 or 4 CPU processes joined by gloo under DDP,
ZeroRedundancyOptimizer (ZeRO-1), FSDP2 ``fully_shard`` and DTensor tensor / sequence parallelism
(:func:`cmd_dist` says what is measured). Each rank is a process started with ``torch.multiprocessing``'s
``spawn``: :func:`_dist_worker` must stay a module-level function of an importable module, so that the children
can unpickle it (they get the parent's ``sys.path``, which holds ``tools/``).
"""

from __future__ import annotations

import contextlib
import time

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from llmsizing import Model

from .core import date_today, free_port, gather_ranks, gloo_join, optimizer_states, write_csv

# ============================================================================ per-rank states
#: The model of the `dist` sweep: a real LlamaForCausalLM at a small shape (fp32, random seeded weights).
DIST_SHAPE = Model("dist-llama", layers=4, hidden=256, heads=8, kv_heads=2, ffn_hidden=688, vocab=8192,
                   gated_mlp=True, tied_embeddings=False, norm="rmsnorm", max_seq=256)
DIST_LAYOUTS = ("ddp", "zero1", "fsdp2", "fsdp2-no-reshard")


def llama_config(m: Model, *, tied: bool = False, **extra):
    """A transformers ``LlamaConfig`` of the shape ``m`` (random weights, no cache), for the measurement
    runs that build a small HF Llama (``dist``, ``ddp-buckets``, ``cp``); ``extra`` goes to the config."""
    import transformers as tf

    return tf.LlamaConfig(vocab_size=m.vocab, hidden_size=m.hidden, intermediate_size=m.ffn_hidden,
                          num_hidden_layers=m.layers, num_attention_heads=m.heads, num_key_value_heads=m.kv_heads,
                          max_position_embeddings=m.max_seq, tie_word_embeddings=tied, use_cache=False,
                          bos_token_id=0, eos_token_id=0, **extra)


def _storage_bytes(tensors) -> int:
    """Bytes of the distinct storages behind ``tensors`` (DTensors counted by their local shard)."""
    seen, total = set(), 0
    for t in tensors:
        if t is None:
            continue
        local = t.to_local() if hasattr(t, "to_local") else t
        st = local.untyped_storage()
        if st.data_ptr() not in seen:
            seen.add(st.data_ptr())
            total += st.nbytes()
    return total


# ============================================================================ collectives per step
#: How each collective that reaches the dispatcher is named in data/dist_collectives.csv, and which argument
#: holds its full (unsharded) buffer: ``c10d.*`` are the ProcessGroup calls (DDP's C++ reducer,
#: ZeroRedundancyOptimizer's broadcasts, FSDP2's all-gathers and reduce-scatters all go through them),
#: ``_c10d_functional.*`` the functional collectives DTensor uses for tensor and sequence parallelism.
#: ``"out"``/``"in"`` = the output/input tensor(s); ``"in*n"`` = the input times the group size.
COLLECTIVE_OPS = {
    "c10d.allreduce_": ("all-reduce", "in"), "c10d.allreduce_coalesced_": ("all-reduce", "in"),
    "c10d.broadcast_": ("broadcast", "in"),
    "c10d._allgather_base_": ("all-gather", "out"), "c10d.allgather_": ("all-gather", "out"),
    "c10d.allgather_into_tensor_coalesced_": ("all-gather", "out"),
    "c10d._reduce_scatter_base_": ("reduce-scatter", "in1"), "c10d.reduce_scatter_": ("reduce-scatter", "in1"),
    "c10d.reduce_scatter_tensor_coalesced_": ("reduce-scatter", "in1"),
    "c10d.alltoall_": ("all-to-all", "in1"), "c10d.alltoall_base_": ("all-to-all", "in1"),
    "_c10d_functional.all_reduce": ("all-reduce", "in"), "_c10d_functional.all_reduce_": ("all-reduce", "in"),
    "_c10d_functional.all_reduce_coalesced": ("all-reduce", "in"),
    "_c10d_functional.all_gather_into_tensor": ("all-gather", "in*n"),
    "_c10d_functional.all_gather_into_tensor_coalesced": ("all-gather", "in*n"),
    "_c10d_functional.reduce_scatter_tensor": ("reduce-scatter", "in"),
    "_c10d_functional.reduce_scatter_tensor_coalesced": ("reduce-scatter", "in"),
    "_c10d_functional.broadcast": ("broadcast", "in"), "_c10d_functional.all_to_all_single": ("all-to-all", "in"),
}
#: Dispatcher ops of the two namespaces that move no data (waits, autograd wrappers, barriers).
NOT_COLLECTIVES = {"_c10d_functional.wait_tensor", "_c10d_functional._wrap_tensor_autograd", "c10d.barrier",
                   "c10d.monitored_barrier_"}


def _tensors(x):
    return [t for t in tree_flatten(x)[0] if torch.is_tensor(t)]


class CollectiveCounter(TorchDispatchMode):
    """Counts every collective of a step on this rank: its kind, calls and the bytes of its full buffer.

    A ``TorchDispatchMode`` sees every op that reaches PyTorch's dispatcher. Since torch 2.0 a
    ``ProcessGroup``'s methods are dispatcher ops (``c10d::allreduce_``, ``c10d::_allgather_base_``, ...), so
    this sees the collectives DDP's C++ reducer launches from its autograd hooks, the ``dist.broadcast`` calls
    of ``ZeroRedundancyOptimizer`` and FSDP2's ``all_gather_into_tensor``/``reduce_scatter_tensor``, as well as
    the functional collectives (``_c10d_functional::*``) DTensor issues when it redistributes a tensor. (The
    CPU autograd engine runs the backward on the calling thread, so the mode is active there too; DTensor's
    own ``CommDebugMode`` gives the same counts for the TP/SP runs.) ``message_bytes`` is the full buffer of
    one call, before sharding: the tensor of an all-reduce or broadcast, the gathered output of an all-gather,
    the input of a reduce-scatter; the same convention as :func:`llmsizing.comm.communication`. An op of the
    two namespaces that is neither listed in :data:`COLLECTIVE_OPS` nor known to move no data is recorded as
    kind ``"other"`` rather than dropped. Set :attr:`phase` between the phases of the step."""

    def __init__(self, group_size):
        super().__init__()
        self.group_size = group_size
        self.phase = "forward"
        self.calls = {}          # (phase, kind, op, dtype, message_bytes) -> calls

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        from torch.distributed.tensor import DTensor
        if DTensor in types:
            # a tensor subclass (DTensor): let it run first, with this mode still active, so that the
            # collectives its sharding propagation issues inside the op (e.g. the all-reduce that turns a
            # Partial gradient into a Replicate one in the optimizer's arithmetic) come back here as plain ops;
            # CommDebugMode does the same
            return NotImplemented
        if func.namespace in ("c10d", "_c10d_functional"):
            name = f"{func.namespace}.{func._opname}"
            if name not in NOT_COLLECTIVES:
                kind, where = COLLECTIVE_OPS.get(name, ("other", "in"))
                first = args[0] if args else None
                if where == "out":                     # output tensor(s) first, input(s) second
                    ts = _tensors(first)
                elif where == "in1":                   # reduce-scatter (c10d): input is the second argument
                    ts = _tensors(args[1])
                else:
                    ts = _tensors(first)
                nbytes = sum(t.nbytes for t in ts) * (self.group_size if where == "in*n" else 1)
                dtype = str(ts[0].dtype).replace("torch.", "") if ts else ""
                key = (self.phase, kind, name, dtype, nbytes)
                self.calls[key] = self.calls.get(key, 0) + 1
        return func(*args, **kwargs)


def _tp_plan(m, sp: bool):
    """DTensor plan of a LlamaForCausalLM: Megatron-style tensor parallelism (column-parallel q, k, v, gate,
    up; row-parallel o, down; vocabulary-parallel embedding; column-parallel LM head whose logits are gathered,
    since HF's loss needs the whole vocabulary) and, with ``sp``, sequence parallelism as torchtitan applies it
    (norms ``SequenceParallel`` on sequence shards; each attention and MLP gathers its input once with
    ``PrepareModuleInput``; o and down reduce-scatter to sequence shards; residual stream kept as DTensors)."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, RowwiseParallel,
                                                   SequenceParallel)
    if not sp:
        plan = {"model.embed_tokens": RowwiseParallel(input_layouts=Replicate()),
                "lm_head": ColwiseParallel(output_layouts=Replicate())}
    else:
        plan = {"model.embed_tokens": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1),
                                                      use_local_output=False),
                "model.norm": SequenceParallel(),
                "lm_head": ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate())}
    for i in range(m.layers):
        p = f"model.layers.{i}."
        for name in ("q_proj", "k_proj", "v_proj"):
            plan[p + f"self_attn.{name}"] = ColwiseParallel()
        for name in ("gate_proj", "up_proj"):
            plan[p + f"mlp.{name}"] = ColwiseParallel()
        if not sp:
            plan[p + "self_attn.o_proj"] = RowwiseParallel()
            plan[p + "mlp.down_proj"] = RowwiseParallel()
        else:
            plan[p + "input_layernorm"] = SequenceParallel()
            plan[p + "post_attention_layernorm"] = SequenceParallel()
            plan[p + "self_attn"] = PrepareModuleInput(input_kwarg_layouts={"hidden_states": Shard(1)},
                                                       desired_input_kwarg_layouts={"hidden_states": Replicate()})
            plan[p + "mlp"] = PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),))
            plan[p + "self_attn.o_proj"] = RowwiseParallel(output_layouts=Shard(1), use_local_output=False)
            plan[p + "mlp.down_proj"] = RowwiseParallel(output_layouts=Shard(1), use_local_output=False)
    return plan


#: Tokens per rank and step of the `dist` sweep (one sequence; the same on every rank).
DIST_BATCH, DIST_SEQ = 1, 64


def _dist_worker(rank, world, layout, port, queue):

    import torch.distributed as dist
    import transformers as tf

    gloo_join(rank, world, port)
    torch.manual_seed(0)
    m = DIST_SHAPE
    model = tf.LlamaForCausalLM(llama_config(m)).train()
    n_params = sum(p.numel() for p in model.parameters())
    if layout in ("tp", "sp"):   # Megatron-style tensor (and sequence) parallelism with DTensor
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor.parallel import parallelize_module

        mesh = init_device_mesh("cpu", (world,))
        parallelize_module(model, mesh, _tp_plan(m, sp=layout == "sp"))
        net = model
        opt = torch.optim.AdamW(net.parameters(), lr=1e-4, foreach=False)
    elif layout == "ddp":
        net = torch.nn.parallel.DistributedDataParallel(model)
        opt = torch.optim.AdamW(net.parameters(), lr=1e-4, foreach=True)
    elif layout == "zero1":
        from torch.distributed.optim import ZeroRedundancyOptimizer
        net = torch.nn.parallel.DistributedDataParallel(model)
        opt = ZeroRedundancyOptimizer(net.parameters(), optimizer_class=torch.optim.AdamW, lr=1e-4)
    else:
        from torch.distributed.fsdp import fully_shard
        reshard = layout == "fsdp2"
        for layer in model.model.layers:
            fully_shard(layer, reshard_after_forward=reshard)
        fully_shard(model, reshard_after_forward=reshard)
        net = model
        opt = torch.optim.AdamW(net.parameters(), lr=1e-4, foreach=True)
    weight_bytes = _storage_bytes(list(model.parameters()))   # before any step (the TP row's figure)
    gen = torch.Generator().manual_seed(1)                    # the same tokens on every rank (TP/SP need it)
    counter = CollectiveCounter(world)
    for step in range(3):          # two warm-ups (DDP rebuilds its buckets in the 2nd), then the counted step
        ids = torch.randint(0, m.vocab, (DIST_BATCH, DIST_SEQ), generator=gen)
        mode = counter if step == 2 else contextlib.nullcontext()
        check = contextlib.nullcontext()
        if step == 2 and layout in ("tp", "sp"):            # DTensor's own counter, as a cross-check
            from torch.distributed.tensor.debug import CommDebugMode
            check = CommDebugMode()
        with mode, check:
            counter.phase = "forward"
            opt.zero_grad(set_to_none=False)
            loss = net(input_ids=ids, labels=ids).loss
            counter.phase = "backward"
            loss.backward()
            counter.phase = "optimizer"
            opt.step()
    params = list(model.parameters())
    if layout in ("tp", "sp"):     # weights only, as before (the states of a TP rank are its weights x 4)
        row = {"param_bytes": weight_bytes, "grad_bytes": "", "optimizer_state_bytes": "",
               "grad_is_bucket_view": ""}
    else:
        optim = opt.optim if layout == "zero1" else opt   # ZeroRedundancyOptimizer wraps the rank's AdamW
        row = {"param_bytes": _storage_bytes(params), "grad_bytes": _storage_bytes([p.grad for p in params]),
               "optimizer_state_bytes": _storage_bytes(optimizer_states(optim)),
               "grad_is_bucket_view": bool(getattr(net, "gradient_as_bucket_view", False))}
    row = {"layout": layout, "world_size": world, "rank": rank, "n_params": n_params, **row,
           "torch_version": torch.__version__, "transformers_version": tf.__version__}
    if not isinstance(check, contextlib.nullcontext):
        ours, theirs = {}, {str(k).split(".")[-1]: v for k, v in check.get_comm_counts().items()}
        for (_, _, op, _, _), n in counter.calls.items():
            ours[op.split(".")[-1]] = ours.get(op.split(".")[-1], 0) + n
        assert ours == theirs, (layout, ours, theirs)
    colls = [{"layout": layout, "world_size": world, "rank": rank, "phase": ph, "kind": kind, "op": op,
              "dtype": dt, "message_bytes": nb, "calls": n}
             for (ph, kind, op, dt, nb), n in counter.calls.items()]
    queue.put((row, colls))
    dist.barrier()
    dist.destroy_process_group()


#: The runs of the `dist` sweep: (layout, world size, whether its per-rank states go to dist_measurements.csv).
#: TP and SP run on 2 ranks (tp <= kv_heads = 2 keeps whole KV heads); FSDP2 also on 3, whose shards of
#: dimension-0 sizes not divisible by 3 are padded.
DIST_RUNS = ([(lay, w, True) for lay in DIST_LAYOUTS for w in (2, 4)] + [("tp", 2, True), ("sp", 2, False)]
             + [("fsdp2", 3, False), ("fsdp2-no-reshard", 3, False)])


def cmd_dist(args):
    """Sub-command ``dist``: per-rank parameter, gradient and AdamW-state bytes of a real LlamaForCausalLM under
    DDP, ZeroRedundancyOptimizer (ZeRO-1) and FSDP2 ``fully_shard`` (ZeRO-3; ``reshard_after_forward=False`` is
    the ZeRO-2-like variant), with 2 and 4 gloo processes on the CPU; and the per-rank weights of Megatron-style
    tensor parallelism with DTensor's ``parallelize_module`` (column-parallel q, k, v, gate, up and LM head,
    row-parallel o and down, vocabulary-parallel embedding) on 2 ranks. Measured at rest, after the step: FSDP2's
    unsharded parameters during forward and backward, and DDP's gradient buckets (a flat copy of the gradients
    when ``gradient_as_bucket_view`` is off, its default), are not in these figures.

    The same runs (plus sequence parallelism on 2 ranks and FSDP2 on 3) count the collectives of one training
    step on every rank with :class:`CollectiveCounter` (phase, kind, op, dtype, full-buffer bytes, calls) and
    write them to ``--collectives-out`` (data/dist_collectives.csv; chapter 9). The counted step is the third:
    DDP rebuilds its gradient buckets (and broadcasts their order) during the second."""

    import torch.multiprocessing as mp

    today = date_today()
    rows, coll_rows = [], []
    runs = [r for r in DIST_RUNS if (not args.quick or r[1] == 2) and (not args.only or r[0] in args.only)]
    m = DIST_SHAPE
    config = dict(layers=m.layers, hidden=m.hidden, heads=m.heads, kv_heads=m.kv_heads, head_dim=m.head_dim,
                  ffn=m.ffn_hidden, vocab=m.vocab, tied_embeddings=m.tied_embeddings)
    for layout, world, states in runs:
        t0 = time.perf_counter()
        port = free_port()
        ctx = mp.get_context("spawn")
        queue = ctx.Queue()
        procs = [ctx.Process(target=_dist_worker, args=(r, world, layout, port, queue)) for r in range(world)]
        got = gather_ranks(procs, queue, world, f"dist {layout} x {world}")
        for row, colls in sorted(got, key=lambda g: g[0]["rank"]):
            versions = {k: row[k] for k in ("torch_version", "transformers_version")}
            for c in sorted(colls, key=lambda c: (c["phase"], c["kind"], c["op"], -c["message_bytes"])):
                coll_rows.append({**c, "batch": DIST_BATCH, "seq": DIST_SEQ, "n_params": row["n_params"],
                                  **versions, **config, "measured_on": today})
            if states:
                row.update(**config, measured_on=today)
                rows.append(row)
            calls = sum(c["calls"] for c in colls)
            print(f"{layout:16s} world={world} rank={row['rank']} params={row['param_bytes']:>10} "
                  f"grads={row['grad_bytes']:>10} adam={row['optimizer_state_bytes']:>10} "
                  f"collective calls={calls}", flush=True)
        print(f"  {layout} x {world}: {time.perf_counter() - t0:.1f} s", flush=True)
    write_csv(args.out, rows)
    write_csv(args.collectives_out, coll_rows)
    print(f"wrote {len(rows)} rows to {args.out}, {len(coll_rows)} to {args.collectives_out}")
