"""Sub-command ``ddp-buckets``: which gradients PyTorch DDP puts in each bucket, and in what order it reduces them.

``llmsizing.zero_traffic.torch_ddp_buckets`` fills DDP's buckets in the reverse of the definition order. Real
DDP (torch 2.13) starts with every parameter in one bucket (``_BucketCapacityConfig.compute_bucket_size_limits``:
no size limits unless ``find_unused_parameters``) and, after the first backward, rebuilds its buckets in the
order the gradients became ready (``Reducer::rebuild_buckets``), with a first bucket of 1 MiB
(``_DEFAULT_FIRST_BUCKET_BYTES``) only when ``bucket_cap_mb`` is left at its default (25 MiB); an explicit
``bucket_cap_mb`` caps the first bucket at the same size. This records the buckets a real
``LlamaForCausalLM`` (chapter 9's ``dist`` shape: 4 layers, hidden 256, fp32, random weights) gets on 2 gloo
processes on the CPU, for the default and for explicit caps of 1, 2 and 4 MiB, untied and tied embeddings
(:data:`RUNS`): a DDP communication hook
(``register_comm_hook``) sees every bucket as it is launched, with its parameters (named by storage). Three
iterations: the first with the initial buckets, the second and third with the rebuilt ones. Stand-ins: CPU and
gloo for GPUs and NCCL, fp32 gradients for bf16, a tiny model (the per-layer order is what carries over).
Writes ``data/ddp_bucket_order.csv`` (rank 0's; every rank's must agree).
"""

from __future__ import annotations

import time

import torch

from .core import date_today, free_port, gather_ranks, gloo_join, write_csv
from .dist import DIST_SHAPE, llama_config

CAPS_MB = (None, 1, 2, 4)
#: (tied embeddings, cap) runs: the untied shape at every cap, and the tied one, whose first gradients ready
#: (the final norm, the last block's) are small, at the default and at 2 and 4 MiB: where the first bucket's
#: own cap shows.
RUNS = [(False, c) for c in CAPS_MB] + [(True, c) for c in (None, 2, 4)]
SCRIPT = "tools/measure/ddp_buckets.py"
BATCH, SEQ = 1, 32


def _run(tied, cap_mb, world):
    import transformers as tf
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    torch.manual_seed(0)
    m = DIST_SHAPE
    model = tf.LlamaForCausalLM(llama_config(m, tied=tied)).train()
    names = {p.data_ptr(): n for n, p in model.named_parameters()}
    kw = {} if cap_mb is None else {"bucket_cap_mb": cap_mb}
    ddp = torch.nn.parallel.DistributedDataParallel(model, **kw)
    seen = []

    def hook(state, bucket):
        seen.append((state["iteration"], bucket.index(),
                     [names[p.data_ptr()] for p in bucket.parameters()],
                     [p.numel() * p.element_size() for p in bucket.parameters()]))
        return allreduce_hook(None, bucket)

    state = {"iteration": 0}
    ddp.register_comm_hook(state, hook)
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-4)
    gen = torch.Generator().manual_seed(1)
    for it in range(3):
        state["iteration"] = it
        ids = torch.randint(0, m.vocab, (BATCH, SEQ), generator=gen)
        opt.zero_grad()
        ddp(input_ids=ids, labels=ids).loss.backward()
        opt.step()
    order = [n for n, _ in model.named_parameters()]
    rows, launch = [], {}
    for it, idx, params, sizes in seen:
        launch[it] = launch.get(it, -1) + 1
        rows.append({"tied_embeddings": tied, "bucket_cap_mb": "default" if cap_mb is None else cap_mb,
                     "iteration": it,
                     "launch_order": launch[it], "bucket_index": idx, "n_tensors": len(params),
                     "bucket_bytes": sum(sizes), "first_param": params[0], "last_param": params[-1],
                     "params": ";".join(params),
                     "definition_positions": ";".join(str(order.index(p)) for p in params)})
    return rows


def _worker(rank, world, port, queue):
    import torch.distributed as dist
    import transformers as tf

    gloo_join(rank, world, port)
    out = [r for tied, cap in RUNS for r in _run(tied, cap, world)]
    queue.put((rank, out, torch.__version__, tf.__version__))
    dist.barrier()
    dist.destroy_process_group()


def cmd_ddp_buckets(args):
    """Record DDP's buckets (initial and rebuilt) per cap on 2 gloo ranks; write rank 0's rows to
    ``args.out`` (data/ddp_bucket_order.csv) after checking both ranks agree."""
    import torch.multiprocessing as mp

    world, t0 = 2, time.perf_counter()
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_worker, args=(r, world, port, queue)) for r in range(world)]
    got = sorted(gather_ranks(procs, queue, world, "ddp-buckets x 2"), key=lambda g: g[0])
    for p in procs:
        p.join()
    if got[1][1] != got[0][1]:
        raise RuntimeError("ddp-buckets: the ranks' buckets differ")
    _, out, torch_v, tf_v = got[0]
    m = DIST_SHAPE
    rows = [{**r, "world_size": world, "batch": BATCH, "seq": SEQ, "layers": m.layers, "hidden": m.hidden,
             "heads": m.heads, "kv_heads": m.kv_heads, "ffn": m.ffn_hidden, "vocab": m.vocab,
             "grad_dtype": "float32", "torch_version": torch_v, "transformers_version": tf_v,
             "backend": "gloo (CPU)", "script": SCRIPT,
             "source": "measured: DistributedDataParallel comm hook on transformers LlamaForCausalLM",
             "measured_on": date_today()} for r in out]
    write_csv(args.out, rows)
    print(f"ddp-buckets: {time.perf_counter() - t0:.1f} s; wrote {len(rows)} rows to {args.out}")
