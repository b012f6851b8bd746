"""Sub-command ``fsdp-root``: when FSDP2 holds its root unit gathered, by ``reshard_after_forward``.

The library prices torch's default (``Parallel(reshard_after_forward=None)``) with the root unit (embedding,
final norm, LM head: ``llmsizing.zero_traffic.fsdp_root_params``) gathered from the forward to the backward
(``llmsizing.memory.zero3_gathered_bytes``). This looks at it on torch's own ``fully_shard``: the tiny HF
``LlamaForCausalLM`` of ``fsdp_units.py`` (hidden 64, 1-4 decoder layers, fp32, untied), ``fully_shard`` on
every decoder layer and then on the whole model with ``reshard_after_forward`` None, True and False, on 2
CPU processes joined by gloo. At ten moments of the third step (two warm-ups) it records whether the root's
three parameters are gathered, the bytes of every gathered parameter and of their gradients: FSDP2 registers
a parameter as a ``DTensor`` while it is sharded and as a plain tensor while it is gathered, so the bytes of
the parameters that are not DTensors are the gathered weights at that moment, and their ``.grad`` the
gradients not yet reduce-scattered (FSDP2's prefetched all-gather buffers, not yet registered, are not among
them). The moments: before the forward; at the first and the last block's forward (forward pre-hooks); at the
LM head's forward; between the forward and the backward (after the loss, before ``backward()``); at the last
and the first block's backward and at the embedding's (a hook on the module's output gradient, which fires
just before its own backward); once the embedding's gradient is accumulated (a post-accumulate-grad hook on
its gathered weight); after the backward. Writes ``data/fsdp_root_held.csv``
(rank 0's rows, after checking every rank saw the same). Stand-ins: CPU and gloo for GPUs and NCCL, fp32,
a tiny model; which unit is gathered when is FSDP2's hooks, not the width or the backend.
"""

from __future__ import annotations

import time

import torch

from .core import date_today, free_port, gather_ranks, gloo_join, write_csv
from .fsdp_units import BATCH, SEQ, SHAPE

LAYERS = (1, 2, 3, 4)
WORLD = 2
#: ``reshard_after_forward`` of every ``fully_shard`` call (the blocks' and the root's), as the CSV names it.
SETTINGS = {"None": None, "True": True, "False": False}
SCRIPT = "tools/measure/fsdp_root.py"


def _moments(setting, layers: int):
    import transformers as tf
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import DTensor

    torch.manual_seed(0)
    s = SHAPE
    cfg = tf.LlamaConfig(vocab_size=s["vocab"], hidden_size=s["hidden"], intermediate_size=s["ffn"],
                         num_hidden_layers=layers, num_attention_heads=s["heads"],
                         num_key_value_heads=s["kv_heads"], max_position_embeddings=256,
                         tie_word_embeddings=False, use_cache=False, bos_token_id=0, eos_token_id=0)
    model = tf.LlamaForCausalLM(cfg).train()
    n_params = sum(p.numel() for p in model.parameters())
    blocks = model.model.layers
    for block in blocks:
        fully_shard(block, reshard_after_forward=setting)
    fully_shard(model, reshard_after_forward=setting)
    root = (model.model.embed_tokens, model.model.norm, model.lm_head)
    log: list = []

    def note(moment: str):
        gathered = [p for p in model.parameters() if not isinstance(p, DTensor)]
        log.append((moment, all(not isinstance(m.weight, DTensor) for m in root),
                    sum(p.numel() * p.element_size() for p in gathered),
                    sum(p.grad.numel() * p.grad.element_size() for p in gathered if p.grad is not None)))

    hooked: set = set()

    def on_head(m, a):                  # the embedding's gathered weight, once: its gradient accumulated
        w = model.model.embed_tokens.weight
        if not isinstance(w, DTensor) and id(w) not in hooked:
            hooked.add(id(w))
            w.register_post_accumulate_grad_hook(lambda p: note("backward: embedding gradient accumulated"))

    for i, name in ((0, "first"), (layers - 1, "last")):
        blocks[i].register_forward_pre_hook(lambda m, a, name=name: note(f"forward: {name} block"))

        def on_output(m, a, out, name=name):
            t = out[0] if isinstance(out, tuple) else out
            t.register_hook(lambda g: note(f"backward: {name} block"))
        blocks[i].register_forward_hook(on_output)
    model.lm_head.register_forward_pre_hook(lambda m, a: note("forward: LM head"))
    model.lm_head.register_forward_pre_hook(on_head)

    def on_embedding(m, a, out):
        out.register_hook(lambda g: note("backward: embedding"))
    model.model.embed_tokens.register_forward_hook(on_embedding)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    gen = torch.Generator().manual_seed(1)
    for _ in range(3):
        log.clear()
        ids = torch.randint(0, s["vocab"], (BATCH, SEQ), generator=gen)
        opt.zero_grad()
        note("before the forward")
        loss = model(input_ids=ids, labels=ids).loss
        note("between the forward and the backward")
        loss.backward()
        note("after the backward")
        opt.step()
    # the block hooks of a 1-layer model fire twice (first = last): keep each moment once
    seen: dict = {}
    for moment, *values in log:
        seen.setdefault(moment, tuple(values))
    return seen, n_params


def _worker(rank, world, port, queue):
    import torch.distributed as dist
    import transformers as tf

    gloo_join(rank, world, port)
    out = []
    for name, setting in SETTINGS.items():
        for layers in LAYERS:
            seen, n_params = _moments(setting, layers)
            for order, (moment, (held, nbytes, grad_bytes)) in enumerate(seen.items()):
                out.append({"reshard_after_forward": name, "world_size": world, "layers": layers,
                            "order": order, "moment": moment, "root_gathered": held, "gathered_bytes": nbytes,
                            "unsharded_grad_bytes": grad_bytes, "n_params": n_params})
    queue.put((rank, out, torch.__version__, tf.__version__))
    dist.barrier()
    dist.destroy_process_group()


def cmd_fsdp_root(args):
    """Record when FSDP2's root unit is gathered under each ``reshard_after_forward``; write rank 0's rows
    (after checking every rank saw the same) to ``args.out`` (data/fsdp_root_held.csv)."""
    import torch.multiprocessing as mp

    t0 = time.perf_counter()
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_worker, args=(r, WORLD, port, queue)) for r in range(WORLD)]
    got = sorted(gather_ranks(procs, queue, WORLD, f"fsdp-root x {WORLD}"), key=lambda g: g[0])
    for p in procs:
        p.join()
    for _, other, _, _ in got[1:]:
        if other != got[0][1]:
            raise RuntimeError(f"fsdp-root x {WORLD}: ranks saw different parameters gathered")
    _, out, torch_v, tf_v = got[0]
    today = date_today()
    rows = [{**r, "batch": BATCH, "seq": SEQ, **SHAPE, "torch_version": torch_v,
             "transformers_version": tf_v, "backend": "gloo (CPU)", "script": SCRIPT,
             "source": "measured: torch.distributed.fsdp.fully_shard on transformers LlamaForCausalLM, "
                       "parameters registered as plain tensors (gathered) or DTensors (sharded) at each "
                       "moment",
             "measured_on": today} for r in out]
    print(f"fsdp-root x {WORLD}: {time.perf_counter() - t0:.1f} s", flush=True)
    write_csv(args.out, rows)
    print(f"wrote {len(rows)} rows to {args.out}")
