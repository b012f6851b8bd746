"""Sub-command ``megatron-buckets``: Megatron-Core's own gradient buckets, from its ``_ParamAndGradBuffer``.

``llmsizing.grad_buckets`` lays Megatron-Core's buckets out tensor by tensor from a reading of its source.
This runs the real thing: megatron-core's ``_ParamAndGradBuffer`` (megatron/core/distributed/
param_and_grad_buffer.py, the class ``DistributedDataParallel`` builds one of per dtype) on parameters on the
meta device, in a 1-rank gloo group (no GPU: ``torch.cuda.current_device`` answers "meta" while it runs).
``bucket_size`` is passed as ``DistributedDataParallel`` would set it for the data-parallel size of the case
(``max(40e6, 1e6 x dp)``, distributed_data_parallel.py); the group's size 1 only changes where the distributed
optimizer pads a bucket's end (to ``lcm(dp, 128)`` elements), which moves no bucket boundary: every bucket
starts on a multiple of 128 and each parameter on a multiple of 64 either way.

The parameters are GPTModel's with the Transformer Engine spec, named and shaped as Megatron registers them
(gpt_model.py: embedding, decoder, output_layer; transformer_layer.py: input_layernorm (an IdentityOp with TE,
its weight is ``linear_qkv.layer_norm_weight``), self_attention, pre_mlp_layernorm, mlp; attention.py:
linear_proj is built before linear_qkv; TE's LayerNormLinear registers ``layer_norm_weight`` before
``weight``; mlp.py: linear_fc1 then linear_fc2; a MoE layer: pre_mlp_layernorm apart, router, then
TEGroupedMLP's linear_fc1.weight0..E-1 and linear_fc2.weight0..E-1). Shapes from the models' published
config.json; the vocabulary padded as Megatron-LM pads it (``make_vocab_size_divisible_by`` 128 x tp).
A pipeline case builds pipeline rank 0's first stage (embedding and its layers, no final norm or head),
the embedding flagged ``shared_embedding`` when tied, as LanguageModule does.
Writes ``data/megatron_buckets_measured.csv``.
"""

from __future__ import annotations

import math
import time
from contextlib import contextmanager

import torch

from .core import date_today, free_port, write_csv

SCRIPT = "tools/measure/megatron_buckets.py"

#: Published config.json shapes: hidden, ffn, heads, kv heads, head dim, vocabulary, layers, experts.
CONFIGS = {
    "llama-3-8b": dict(h=4096, ffn=14336, heads=32, kv=8, d=128, vocab=128256, layers=32, experts=0),
    "llama-3-70b": dict(h=8192, ffn=28672, heads=64, kv=8, d=128, vocab=128256, layers=80, experts=0),
    "llama-2-7b": dict(h=4096, ffn=11008, heads=32, kv=32, d=128, vocab=32000, layers=32, experts=0),
    "mixtral-8x7b": dict(h=4096, ffn=14336, heads=32, kv=8, d=128, vocab=32000, layers=32, experts=8),
    # GPT-2 124M: LayerNorm and linear biases, a plain (ungated) MLP, learned positions (1,024), tied.
    "gpt2": dict(h=768, ffn=3072, heads=12, kv=12, d=64, vocab=50257, layers=12, experts=0, bias=True,
                 gated=False, positions=1024),
    # A toy whose norms (1,000) and embedding (5,001 x 1,000) are not multiples of 64: every published shape
    # above is, so only this case shows the distributed optimizer's 64-element alignment moving a boundary.
    "toy-h1000": dict(h=1000, ffn=2600, heads=10, kv=10, d=100, vocab=5001, layers=4, experts=0),
}

#: (case, model, dp, tp, pp, tied[, bucket_size, make_vocab_size_divisible_by]): every case is run with the
#: distributed optimizer off and on. The GPT-2 cases set ``bucket_size`` (``--ddp-bucket-size``) to 1e6, so
#: that its 50,257-row vocabulary left unpadded (``--make-vocab-size-divisible-by 1``) and its biases exercise
#: the distributed optimizer's 64-element alignment across many buckets; Megatron-LM's default pads to 50,304.
CASES = [
    ("llama-3-8b dp8", "llama-3-8b", 8, 1, 1, False),
    ("llama-3-8b dp512", "llama-3-8b", 512, 1, 1, False),
    ("llama-3-70b dp8", "llama-3-70b", 8, 1, 1, False),
    ("llama-3-70b tp8 dp8", "llama-3-70b", 8, 8, 1, False),
    ("llama-3-8b pp4 dp8 (rank 0)", "llama-3-8b", 8, 1, 4, False),
    ("llama-2-7b pp2 dp8 (rank 0)", "llama-2-7b", 8, 1, 2, False),
    ("llama-2-7b tied pp2 dp8 (rank 0)", "llama-2-7b", 8, 1, 2, True),
    ("mixtral-8x7b dp8", "mixtral-8x7b", 8, 1, 1, False),
    ("gpt2 dp8 bucket 1e6 vocab unpadded", "gpt2", 8, 1, 1, True, 1_000_000, 1),
    ("gpt2 dp8 bucket 1e6", "gpt2", 8, 1, 1, True, 1_000_000, 128),
    # 3,001,010: fc1's norm + qkv is 3,001,000 unpadded (the bucket runs on into qkv's norm), 3,001,024 with
    # the norm padded to 1,024 (it closes at qkv).
    ("toy-h1000 dp8 bucket 3001010", "toy-h1000", 8, 1, 1, False, 3_001_010, 1),
]


def _padded_vocab(vocab: int, tp: int, divisible_by: int = 128) -> int:
    """Megatron-LM's ``_vocab_size_with_padding`` (megatron/training/tokenizer/tokenizer.py)."""
    m = divisible_by * tp
    return math.ceil(vocab / m) * m


def gpt_param_shapes(model: str, tp: int, pp: int, tied: bool = False,
                     vocab_div: int = 128) -> list[tuple[str, tuple]]:
    """Pipeline rank 0's parameters, ``(name, shape)`` in GPTModel's registration order (TE spec)."""
    c = CONFIGS[model]
    h, d, E = c["h"], c["d"], c["experts"]
    bias, gate = c.get("bias", False), 2 if c.get("gated", True) else 1
    layers = c["layers"] // pp
    vocab = _padded_vocab(c["vocab"], tp, vocab_div) // tp
    out = [("embedding.word_embeddings.weight", (vocab, h))]
    if c.get("positions"):
        out.append(("embedding.position_embeddings.weight", (c["positions"], h)))
    qkv = (c["heads"] + 2 * c["kv"]) * d // tp

    def ln_linear(name, rows, cols):           # TE LayerNormLinear: norm weight (and bias), weight (and bias)
        got = [(name + ".layer_norm_weight", (cols,))]
        got += [(name + ".layer_norm_bias", (cols,))] if bias else []
        return got + [(name + ".weight", (rows, cols))] + ([(name + ".bias", (rows,))] if bias else [])

    def linear(name, rows, cols):
        return [(name + ".weight", (rows, cols))] + ([(name + ".bias", (rows,))] if bias else [])

    for i in range(layers):
        p = f"decoder.layers.{i}."
        out += linear(p + "self_attention.linear_proj", h, c["heads"] * d // tp)
        out += ln_linear(p + "self_attention.linear_qkv", qkv, h)
        if E:
            out += [(p + "pre_mlp_layernorm.weight", (h,)), (p + "mlp.router.weight", (E, h))]
            out += [(p + f"mlp.experts.linear_fc1.weight{e}", (2 * c["ffn"] // tp, h)) for e in range(E)]
            out += [(p + f"mlp.experts.linear_fc2.weight{e}", (h, c["ffn"] // tp)) for e in range(E)]
        else:
            out += ln_linear(p + "mlp.linear_fc1", gate * c["ffn"] // tp, h)
            out += linear(p + "mlp.linear_fc2", h, c["ffn"] // tp)
    if pp == 1:
        out += [("decoder.final_layernorm.weight", (h,))]
        out += [("decoder.final_layernorm.bias", (h,))] if bias else []
        out += [] if tied else [("output_layer.weight", (vocab, h))]   # (tied: output_layer has no weight)
    return out


@contextmanager
def _on_meta():
    saved = torch.cuda.current_device
    torch.cuda.current_device = lambda: "meta"
    try:
        yield
    finally:
        torch.cuda.current_device = saved


def run_case(model, dp, tp, pp, tied, dist_opt, bucket_size=None, vocab_div=128):
    """Build Megatron-Core's buffer for one case; ``(buckets' numels, buckets' tensor counts, names)``."""
    import torch.distributed as dist
    from megatron.core.distributed import DistributedDataParallelConfig
    from megatron.core.distributed.param_and_grad_buffer import _ParamAndGradBuffer
    from megatron.core.process_groups_config import ProcessGroupCollection

    shapes = gpt_param_shapes(model, tp, pp, tied, vocab_div)
    params, names = [], {}
    for n, s in shapes:
        p = torch.nn.Parameter(torch.empty(s, device="meta", dtype=torch.bfloat16))
        if tied and pp > 1 and n == "embedding.word_embeddings.weight":
            p.shared_embedding = True
        params.append(p)
        names[p] = n
    cfg = DistributedDataParallelConfig(use_distributed_optimizer=dist_opt, grad_reduce_in_fp32=True,
                                        overlap_grad_reduce=True)
    pgc = ProcessGroupCollection()
    pgc.tp = pgc.dp_cp = dist.group.WORLD
    bucket_size = bucket_size or max(40_000_000, 1_000_000 * dp)
    with _on_meta():
        buf = _ParamAndGradBuffer(cfg, torch.bfloat16, torch.float32, params, dist.group.WORLD, bucket_size,
                                  names, 1.0, list(range(len(params))), False, pgc)
    numels = [sum(p.numel() for p in b.params_list) for b in buf.buckets]
    counts = [len(b.params_list) for b in buf.buckets]
    firsts = [names[b.params_list[0]] for b in buf.buckets]
    return bucket_size, numels, counts, firsts


def cmd_megatron_buckets(args):
    """Run every case of :data:`CASES` with the distributed optimizer off and on; write ``args.out``."""
    import os

    import torch.distributed as dist
    from importlib.metadata import version

    t0 = time.perf_counter()
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    dist.init_process_group("gloo", rank=0, world_size=1)
    mc = version("megatron-core")
    rows = []
    try:
        for case, model, dp, tp, pp, tied, *extra in CASES:
            vocab_div = extra[1] if extra else 128
            for dist_opt in (False, True):
                size, numels, counts, firsts = run_case(model, dp, tp, pp, tied, dist_opt, *extra)
                c = CONFIGS[model]
                rows.append({
                    "case": case, "model": model, "dp": dp, "tp": tp, "pp": pp, "pipeline_rank": 0,
                    "tied_embeddings": tied, "use_distributed_optimizer": dist_opt, "bucket_size": size,
                    "hidden": c["h"], "ffn": c["ffn"], "heads": c["heads"], "kv_heads": c["kv"],
                    "vocab_padded": _padded_vocab(c["vocab"], tp, vocab_div),
                    "layers_on_rank": c["layers"] // pp,
                    "experts": c["experts"], "buckets": len(numels),
                    "bucket_tensors": ";".join(map(str, counts)),
                    "bucket_elements": ";".join(map(str, numels)),
                    "bucket_first_param": ";".join(firsts),
                    "megatron_core_version": mc, "torch_version": torch.__version__, "script": SCRIPT,
                    "source": f"megatron-core {mc} param_and_grad_buffer.py run on the meta device",
                    "as_of": date_today()})
                print(f"{case:34s} dist_opt={dist_opt!s:5s} buckets={len(numels)}")
    finally:
        dist.destroy_process_group()
    write_csv(args.out, rows)
    print(f"megatron-buckets: {time.perf_counter() - t0:.1f} s; wrote {len(rows)} rows to {args.out}")
