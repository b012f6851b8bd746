"""Sub-command ``grad-buffer``: which gradient bytes are alive at the forward peak, the end of the backward and
the start of the optimizer step of a steady-state step under PyTorch DDP (``gradient_as_bucket_view`` False
and True) against a plain step whose gradients ``zero_grad(set_to_none=True)`` frees (issue 38: a persistent
gradient buffer; chapter 12).

Two gloo ranks on the CPU train a small stack of linear layers for four steps and keep the last two (DDP
rebuilds its buckets at the start of the second). Every storage that can hold a gradient is followed with
``weakref.finalize`` on its ``untyped_storage()`` (PyTorch keeps a storage's Python object alive as long as
its C++ storage, so the finalizer runs when the memory is freed): each parameter's ``.grad`` after a backward,
and each DDP bucket's flat gradient tensor, which the reducer hands to a communication hook
(``GradBucket.buffer()``; the hook all-reduces it as DDP's default hook does). At the forward peak of every
micro-batch (a forward hook on the output layer, when the micro-batch's activations are all alive), at the
end of every backward and as the optimizer step starts (a step pre-hook: what the step holds beside its own
states and temporaries), the bytes of the followed storages still alive are summed, each storage once (with
``gradient_as_bucket_view=True`` a ``.grad`` is a view into a bucket). Every layout but ``ddp-view-keep``
zeroes with ``zero_grad(set_to_none=True)``; that one with ``set_to_none=False``. What is measured is the
gradient side only: the weights, optimizer states and activations are the same in every layout.

Run: ``.venv-measure/bin/python tools/measure_memory.py grad-buffer`` (about 35 s on 2 cores), or this file
directly (it needs torch only). ``--quick``: the fp32 rows only.
"""

from __future__ import annotations

import weakref

import torch

try:                                        # as a sub-command of tools/measure_memory.py
    from .core import DATA, date_today, free_port, gather_ranks, gloo_join, write_csv
except ImportError:                         # run directly: python tools/measure/grad_buffer.py
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from measure.core import DATA, date_today, free_port, gather_ranks, gloo_join, write_csv

#: The layouts measured: no DDP (gradients all-reduced by hand after the backward, freed by set_to_none), and
#: DDP with its buckets copied into (``gradient_as_bucket_view=False``, the default) or viewed by the grads,
#: these three zeroed with ``zero_grad(set_to_none=True)``; ``ddp-view-keep``: viewed by the grads, which
#: ``zero_grad(set_to_none=False)`` keeps and zeroes in place (so they stay views of the buckets under
#: ``no_sync``: the remedy of chapter 7's exercise 4).
LAYOUTS = ("plain", "ddp-copy", "ddp-view", "ddp-view-keep")
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
#: A small stack: 4 blocks of Linear(256, 1024), GELU, Linear(1024, 256), then a Linear(256, 512) head.
WIDTH, FFN, CLASSES, BLOCKS, BATCH = 256, 1024, 512, 4, 8
STEPS = 4
#: Small buckets, so that the gradients span several (DDP's default cap is 25 MB).
BUCKET_CAP_MB = 2
SOURCE = ("measured: tools/measure/grad_buffer.py, torch {v} CPU, 2 gloo ranks; storages followed with "
          "weakref.finalize (DDP buckets via a comm hook's GradBucket.buffer())")


def _model(dtype):
    layers = []
    for _ in range(BLOCKS):
        layers += [torch.nn.Linear(WIDTH, FFN), torch.nn.GELU(), torch.nn.Linear(FFN, WIDTH)]
    layers.append(torch.nn.Linear(WIDTH, CLASSES))
    return torch.nn.Sequential(*layers).to(dtype)


class Followed:
    """Storages followed until they are freed: data_ptr -> (bytes, kind)."""

    def __init__(self):
        self.alive = {}

    def follow(self, t, kind):
        st = t.untyped_storage()
        ptr = st.data_ptr()
        if ptr in self.alive:
            if kind == "bucket":
                # a .grad seen first may be a view of a bucket (with set_to_none=False the grads accumulate
                # in place under no_sync, in the buckets rebuilt at step 2's first forward): it is the bucket
                self.alive[ptr] = (self.alive[ptr][0], kind)
            return
        self.alive[ptr] = (st.nbytes(), kind)
        weakref.finalize(st, self.alive.pop, ptr, None)

    def bytes(self, kind=None):
        return sum(n for n, k in self.alive.values() if kind is None or k == kind)


def _worker(rank, world, port, queue, dtypes=tuple(DTYPES)):
    gloo_join(rank, world, port)
    import contextlib

    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    rows = []
    for dname in dtypes:
        dtype = DTYPES[dname]
        for layout in LAYOUTS:
            for accum in (1, 2):
                torch.manual_seed(0)
                net = _model(dtype)
                n_params = sum(p.numel() for p in net.parameters())
                fol = Followed()
                model = net
                if layout != "plain":
                    model = DDP(net, bucket_cap_mb=BUCKET_CAP_MB,
                                gradient_as_bucket_view=layout.startswith("ddp-view"))

                    def hook(state, bucket, fol=fol):
                        fol.follow(bucket.buffer(), "bucket")
                        buf = bucket.buffer().div_(world)
                        return dist.all_reduce(buf, async_op=True).get_future().then(lambda f: f.value()[0])

                    model.register_comm_hook(None, hook)
                opt = torch.optim.AdamW(net.parameters(), lr=1e-3, foreach=False)
                at = {}
                where = {"step": 0, "micro": 0}

                def fwd_peak(mod, args, out, fol=fol, at=at, where=where):
                    at[where["step"], where["micro"], "forward peak"] = (fol.bytes("bucket"),
                                                                         fol.bytes("grad"))

                net[-1].register_forward_hook(fwd_peak)

                def step_start(optimizer, args, kwargs, fol=fol, at=at, where=where):
                    at[where["step"], where["micro"], "optimizer step"] = (fol.bytes("bucket"),
                                                                           fol.bytes("grad"))

                opt.register_step_pre_hook(step_start)
                g = torch.Generator().manual_seed(rank)
                for step in range(1, STEPS + 1):
                    for micro in range(1, accum + 1):
                        where.update(step=step, micro=micro)
                        x = torch.randn(BATCH, WIDTH, generator=g).to(dtype)
                        y = torch.randint(0, CLASSES, (BATCH,), generator=g)
                        last = micro == accum
                        sync = (model.no_sync() if layout != "plain" and not last
                                else contextlib.nullcontext())
                        with sync:
                            loss = torch.nn.functional.cross_entropy(model(x).float(), y) / accum
                            loss.backward()
                        if layout == "plain" and last:
                            # one flat copy all-reduced, not the .grad tensors themselves: a gloo worker thread
                            # may hold the last tensor it reduced past the call (one run in five, a head's .grad
                            # was still alive at the next forward on one rank); the copy is not followed
                            grads = [p.grad for p in net.parameters()]
                            flat = torch.cat([t.reshape(-1) for t in grads])
                            dist.all_reduce(flat)
                            flat.div_(world)
                            for t, part in zip(grads, flat.split([t.numel() for t in grads])):
                                t.copy_(part.view_as(t))
                            del flat, grads, t, part          # (the loop names too: the last .grad)
                        for p in net.parameters():
                            fol.follow(p.grad, "grad")
                        at[step, micro, "backward end"] = (fol.bytes("bucket"), fol.bytes("grad"))
                    opt.step()
                    opt.zero_grad(set_to_none=layout != "ddp-view-keep")
                for (step, micro, phase), (bucket, grad) in sorted(at.items()):
                    if step < 3:
                        # DDP rebuilds its buckets at the start of step 2's forward: the new ones are followed
                        # from step 2's backward on, so steps 3 and 4 are the steady state
                        continue
                    rows.append({"layout": layout, "param_dtype": dname, "grad_accum": accum, "step": step,
                                 "micro_batch": micro, "phase": phase, "params": n_params,
                                 "param_bytes": n_params * net[0].weight.element_size(),
                                 "bucket_bytes": bucket, "grad_only_bytes": grad,
                                 "gradient_bytes": bucket + grad, "rank": rank})
    queue.put(rows)
    dist.destroy_process_group()


def cmd_grad_buffer(out, world=2, quick=False):
    """Measure at ``world`` gloo ranks and write ``out``; ``quick``: the fp32 rows only (a smoke test)."""
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = free_port()
    dtypes = ("fp32",) if quick else tuple(DTYPES)
    procs = [ctx.Process(target=_worker, args=(r, world, port, queue, dtypes)) for r in range(world)]
    got = gather_ranks(procs, queue, world, "grad-buffer")
    by_rank = sorted(got, key=lambda rows: rows[0]["rank"])
    strip = [[{k: v for k, v in r.items() if k != "rank"} for r in rows] for rows in by_rank]
    assert all(s == strip[0] for s in strip), "the ranks disagree"
    today, src = date_today(), SOURCE.format(v=torch.__version__)
    rows = [{**r, "source": src, "as_of": today} for r in strip[0]]
    write_csv(out, rows)
    for r in rows:
        print(f"{r['layout']:9s} {r['param_dtype']} accum {r['grad_accum']} step {r['step']} "
              f"micro {r['micro_batch']} {r['phase']:13s} "
              f"gradients {r['gradient_bytes'] / r['param_bytes']:.2f} x params "
              f"(buckets {r['bucket_bytes']:,}, grads apart {r['grad_only_bytes']:,})")
    return rows


if __name__ == "__main__":
    cmd_grad_buffer(DATA / "grad_buffer_measurements.csv")
