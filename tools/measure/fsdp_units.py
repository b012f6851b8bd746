"""Sub-command ``fsdp-units``: how many all-gathers and reduce-scatters FSDP2 issues per step, by wrapping.

The library counts ZeRO-3's calls per pass as one per FSDP unit (``llmsizing.zero_traffic.dp_calls``). This
measures the count on torch's own ``fully_shard`` (FSDP2): a real ``LlamaForCausalLM`` with random weights at
a tiny shape (hidden 64, 1 to 4 decoder layers), on 2 and 4 CPU processes joined by gloo, one forward and
backward and an AdamW step, every collective counted at the dispatcher by ``dist.CollectiveCounter`` (the
only thing this module takes from another experiment). Stand-ins: CPU and gloo for GPUs and NCCL, fp32 for
bf16, a tiny model for Llama-3-8B. The counts are FSDP2's hooks firing, one collective per unit, so they do
not depend on the width, the dtype or the backend; the bytes of each call are the unit's (checked by hand in
``tests/test_fsdp_unit_calls.py``).

Four wrappings (:data:`WRAPPINGS`), each applied to 1, 2, 3 and 4 layers so that the calls read as
``layers + k``:

* ``layers+root`` (torch's default ``reshard_after_forward=None``): ``fully_shard`` on every decoder layer,
  then on the whole model (the root: embedding, final norm, LM head). The docstring of ``fully_shard`` (torch
  2.13): None is "True for non-root modules and False for root modules", so the root stays unsharded from the
  forward into the backward.
* ``layers+root, reshard all``: the same with ``reshard_after_forward=True`` passed to every call, the root
  too (chapter 9's ``dist`` run).
* ``layers+root, reshard none``: ``reshard_after_forward=False`` everywhere (ZeRO-2-like).
* ``torchtitan``: ``apply_fsdp`` of torchtitan's ``models/llama3/infra/parallelize.py`` (commit 018740b7), its
  "default" policy without pipeline: the token embedding, every block (both ``reshard_after_forward=True``),
  ``[norm, output]`` as one unit kept after the forward (``reshard_after_forward=False``), then the root with
  torch's default; here on HF's module names (``embed_tokens``, ``layers``, ``[norm, lm_head]``).

The counted step is the third (two warm-ups: FSDP2 initialises lazily in the first); the second is counted too
and must agree. Every rank's counts are compared before rank 0's are written (``data/fsdp_unit_calls.csv``).
"""

from __future__ import annotations

import contextlib
import time

import torch

from .core import date_today, free_port, gather_ranks, gloo_join, write_csv
from .dist import CollectiveCounter

#: The tiny LlamaConfig of the sweep (fp32, random seeded weights): hidden 64, 4 query and 2 KV heads.
SHAPE = dict(hidden=64, heads=4, kv_heads=2, ffn=128, vocab=512)
LAYERS = (1, 2, 3, 4)
WORLDS = (2, 4)
BATCH, SEQ = 1, 32
#: wrapping -> its calls of ``fully_shard`` (:func:`_shard`).
WRAPPINGS = ("layers+root", "layers+root, reshard all", "layers+root, reshard none", "torchtitan")
SCRIPT = "tools/measure/fsdp_units.py"


def _shard(model, wrapping: str) -> None:
    from torch.distributed.fsdp import fully_shard

    inner = model.model
    if wrapping == "torchtitan":
        fully_shard(inner.embed_tokens, reshard_after_forward=True)
        for layer in inner.layers:
            fully_shard(layer, reshard_after_forward=True)
        fully_shard([inner.norm, model.lm_head], reshard_after_forward=False)
        fully_shard(model)
        return
    rf = {"layers+root": None, "layers+root, reshard all": True, "layers+root, reshard none": False}[wrapping]
    for layer in inner.layers:
        fully_shard(layer, reshard_after_forward=rf)
    fully_shard(model, reshard_after_forward=rf)


def _count(wrapping: str, layers: int, world: int):
    import transformers as tf

    torch.manual_seed(0)
    s = SHAPE
    cfg = tf.LlamaConfig(vocab_size=s["vocab"], hidden_size=s["hidden"], intermediate_size=s["ffn"],
                         num_hidden_layers=layers, num_attention_heads=s["heads"],
                         num_key_value_heads=s["kv_heads"], max_position_embeddings=256,
                         tie_word_embeddings=False, use_cache=False, bos_token_id=0, eos_token_id=0)
    model = tf.LlamaForCausalLM(cfg).train()
    n_params = sum(p.numel() for p in model.parameters())
    _shard(model, wrapping)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    gen = torch.Generator().manual_seed(1)
    counters = {1: CollectiveCounter(world), 2: CollectiveCounter(world)}
    for step in range(3):
        ids = torch.randint(0, s["vocab"], (BATCH, SEQ), generator=gen)
        counter = counters.get(step)
        with counter if counter is not None else contextlib.nullcontext():
            if counter is not None:
                counter.phase = "forward"
            opt.zero_grad()
            loss = model(input_ids=ids, labels=ids).loss
            if counter is not None:
                counter.phase = "backward"
            loss.backward()
            if counter is not None:
                counter.phase = "optimizer"
            opt.step()
    return counters[1].calls, counters[2].calls, n_params


def _worker(rank, world, port, queue):
    import torch.distributed as dist
    import transformers as tf

    gloo_join(rank, world, port)
    out = []
    for wrapping in WRAPPINGS:
        for layers in LAYERS:
            second, third, n_params = _count(wrapping, layers, world)
            for (phase, kind, op, dtype, nbytes), calls in sorted(third.items()):
                out.append({"wrapping": wrapping, "world_size": world, "layers": layers, "phase": phase,
                            "kind": kind, "op": op, "dtype": dtype, "message_bytes": nbytes, "calls": calls,
                            "same_as_step_2": second == third, "n_params": n_params})
    queue.put((rank, out, torch.__version__, tf.__version__))
    dist.barrier()
    dist.destroy_process_group()


def cmd_fsdp_units(args):
    """Count FSDP2's collectives per step for each wrapping, layer count and world size; write rank 0's rows
    (after checking every rank issued the same) to ``args.out`` (data/fsdp_unit_calls.csv)."""
    import torch.multiprocessing as mp

    rows, today = [], date_today()
    for world in (WORLDS[:1] if args.quick else WORLDS):
        t0 = time.perf_counter()
        ctx = mp.get_context("spawn")
        queue = ctx.Queue()
        port = free_port()
        procs = [ctx.Process(target=_worker, args=(r, world, port, queue)) for r in range(world)]
        got = sorted(gather_ranks(procs, queue, world, f"fsdp-units x {world}"), key=lambda g: g[0])
        for p in procs:
            p.join()
        for _, other, _, _ in got[1:]:
            if other != got[0][1]:
                raise RuntimeError(f"fsdp-units x {world}: ranks issued different collectives")
        _, out, torch_v, tf_v = got[0]
        for r in out:
            rows.append({**r, "batch": BATCH, "seq": SEQ, **SHAPE, "torch_version": torch_v,
                         "transformers_version": tf_v, "backend": "gloo (CPU)", "script": SCRIPT,
                         "source": "measured: torch.distributed.fsdp.fully_shard on transformers "
                                   "LlamaForCausalLM, collectives counted at the dispatcher",
                         "measured_on": today})
        print(f"fsdp-units x {world}: {time.perf_counter() - t0:.1f} s", flush=True)
    write_csv(args.out, rows)
    print(f"wrote {len(rows)} rows to {args.out}")
