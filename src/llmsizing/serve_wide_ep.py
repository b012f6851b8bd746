"""Wide expert parallelism, checked against a production service (chapter 15, "Wide expert parallelism";
issue 37): a mixture of experts served with its experts spread over many GPUs and nodes, separate prefill and
decode units, and the all-to-all of every MoE layer on each step's critical path (priced on the network model
and checked against DeepEP's low-latency kernels, :func:`llmsizing.all_to_all.all_to_all_s`).

The worked case is DeepSeek's V3/R1 service on H800 nodes (``data/deepseek_serving.csv``: DeepSeek's "Day 6"
inference-system overview, 2025-03-01): prefill units of 4 nodes (experts EP32, attention DP32), decode units
of 18 nodes (EP144, DP144, 256 + 32 redundant experts), FP8 matmuls and dispatch, a 56.3% prefix-cache hit
rate, 20-22 output tokens per second per user at a mean KV length of 4,989 tokens per output token, and their
per-node throughput: ~73.7K input tokens/s in prefill (cache hits included) and ~14.8K output tokens/s in
decode. :func:`deepseek_service` prices both units with :func:`llmsizing.serve.serving` and states each
prediction with the serving range (:func:`llmsizing.serve_calibration.serving_range`'s groups: the per-token
range for decode, the TTFT range for prefill).
"""

from __future__ import annotations

import csv

from ._validate import check_fraction, check_int, check_number
from .catalog import DATA_DIR, get_gpu, resolve_model
from .serve_search import prefill_share, with_prefix_cache
from .serve_step import serving

#: Prompts per prefill unit in :func:`prefill_tokens_per_s_per_node` (the rate is flat in it: compute-bound).
PREFILL_BATCH = 64


def decode_tokens_per_s_per_node(model, gpu, *, itl_s: float, ep: int, tp: int = 1, context: int = 4989,
                                 output: int = 2000, gpus_per_node: int = 8, **kwargs):
    """(output tokens/s per node, Serving) of a decode unit of ``ep`` GPUs at the largest batch whose decode
    step is within ``itl_s`` (a decode unit carries no prefill), at a mean context of ``context`` tokens
    (``prompt = context - output // 2``). Keywords go to :func:`~llmsizing.serve.serving`."""
    m, g = resolve_model(model, moe=True), get_gpu(gpu)
    itl_s = check_number("itl_s", itl_s, allow_equal=False)
    output = check_int("output", output)
    prompt = check_int("context", context) - output // 2
    if prompt < 1:
        raise ValueError(f"context={context} must exceed output // 2 = {output // 2}")
    kw = dict(kwargs, tp=tp, ep=ep, prompt=prompt, output=output)
    top = serving(m, g, batch=1, **kw).max_batch
    lo, hi = 0, top
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if serving(m, g, batch=mid, **kw).decode_step_s <= itl_s:
            lo = mid
        else:
            hi = mid - 1
    if lo == 0:
        raise ValueError(f"no batch of {m.name} on {ep} x {g.name} decodes within itl_s={itl_s:g}")
    s = serving(m, g, batch=lo, **kw)
    return s.running_batch / s.decode_step_s * check_int("gpus_per_node", gpus_per_node) / s.gpus, s


def prefill_tokens_per_s_per_node(model, gpu, *, prompt: int, ep: int, tp: int = 1, prefix_hit: float = 0.0,
                                  gpus_per_node: int = 8, **kwargs):
    """(input tokens/s per node, cache hits included; Serving) of a prefill unit of ``ep`` GPUs prefilling
    :data:`PREFILL_BATCH` prompts of ``prompt`` tokens, a ``prefix_hit`` share of each found in the prefix
    cache (:func:`~llmsizing.serve.prefill_share`)."""
    m, g = resolve_model(model, moe=True), get_gpu(gpu)
    hit = check_fraction("prefix_hit", prefix_hit, minimum=0.0) if prefix_hit else 0.0
    s = serving(m, g, batch=PREFILL_BATCH, tp=tp, ep=ep, prompt=prompt, output=1, **kwargs)
    s = with_prefix_cache(s, prefill_share(m, prompt, hit))
    return (s.running_batch * s.prompt / s.batch_prefill_s * check_int("gpus_per_node", gpus_per_node)
            / s.gpus, s)


def deepseek_service():
    """DeepSeek's published per-node prefill and decode throughput beside the model's, with the stated 80%
    range: a DataFrame indexed by phase (published, predicted, low, high, inside, ratio = published /
    predicted, batch per GPU, step or prefill seconds, all-to-all share of the step). Chapter 15."""
    import pandas as pd

    from .serve_calibration import COVERAGE, _range_of

    with open(DATA_DIR / "deepseek_serving.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    out = []
    for r in rows:
        kw = dict(ep=int(r["ep"]), tp=int(r["tp"]), redundant_experts=int(r["redundant_experts"]),
                  weights=r["weights"], compute=r["compute"], kv_cache=r["kv_cache"],
                  gpus_per_node=int(r["gpus_per_node"]))
        if r["phase"] == "decode":
            itl = 1 / float(r["tokens_per_s_per_user"])
            pred, s = decode_tokens_per_s_per_node(r["model"], r["gpu"], itl_s=itl, context=int(r["context"]),
                                                   **kw)
            lo, hi = _range_of(True, "itl_s")
            time_s, comm = s.decode_step_s, s.decode_comm_s / s.decode_step_s
        else:
            pred, s = prefill_tokens_per_s_per_node(r["model"], r["gpu"], prompt=int(r["context"]),
                                                    prefix_hit=float(r["prefix_hit"]), **kw)
            lo, hi = _range_of(True, "ttft_s")
            time_s, comm = s.batch_prefill_s, s.prefill_comm_s / s.ttft_s
        value = float(r["value"])
        out.append({"phase": r["phase"], "metric": r["metric"], "published": value, "predicted": pred,
                    "low": pred * lo, "high": pred * hi, "inside": pred * lo <= value <= pred * hi,
                    "ratio": value / pred, "batch_per_gpu": s.batch / s.gpus, "time_s": time_s,
                    "comm_share": comm, "ep": s.ep, "coverage": COVERAGE, "source": r["source"],
                    "as_of": r["as_of"]})
    return pd.DataFrame(out).set_index("phase")


__all__ = ["PREFILL_BATCH", "decode_tokens_per_s_per_node", "prefill_tokens_per_s_per_node",
           "deepseek_service"]
