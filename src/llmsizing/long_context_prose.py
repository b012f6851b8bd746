"""Chapter 17's opening numbers in sentences: the layout, the published row and the planner's settings that
the "Long context" chapter quotes before its sections compute with them (issue 38: notebooks stay short).

:func:`opening_prose` reads Llama 3.1 405B at 128K as Meta ran it
(:func:`~llmsizing.parallel.llama3_405b_layout`, the 128K row of ``data/published_runs.csv``), the same
degrees read as a Megatron-LM run (:func:`~llmsizing.parallel.llama3_long_context_layout`), the activation
coefficients with flash and eager attention (:func:`~llmsizing.activations.activation_coefficients`), the
all-gather's K, V buffers (:func:`~llmsizing.activations.cp_attention_buffers_bytes`) and the planner's
context-parallel settings (:mod:`llmsizing.plan_space`). It checks what the prose says about them
(:func:`~llmsizing.prose.prose_check`) and returns a :class:`~llmsizing.prose.ChapterText`: the texts the
notebook glues as ``{eval}`ch17_<name>``` (``values``) and the layouts, the row and the run that later cells
compute with (``data``). No new arithmetic: every figure is a catalogue entry, a published row or the
library's own step.
"""

from __future__ import annotations

from functools import partial

from .activations import activation_coefficients, cp_attention_buffers_bytes
from .catalog import get_gpu, get_model
from .layouts import step_time
from .mfu_prose import LLAMA3_BATCH_TOKENS, LLAMA3_LONG_SEQ
from .mfu_published import published_runs
from .network import get_node
from .parallel import LLAMA3_RECIPE, llama3_405b_layout, llama3_long_context_layout
from .plan_space import CP_MIN_SEQ, CP_MIN_TOKENS_PER_RANK, default_cp_degrees
from .prose import ChapterText, prose_check
from .stages import published_stages
from .units import KiB, MiB

__all__ = ["opening_prose", "SHORT_SEQ", "LONG_SEQ", "LLAMA3_128K_ROW"]

#: The chapter's short and long sequence lengths (tokens): 8K and 128K, Llama 3's two pre-training stages
SHORT_SEQ, LONG_SEQ = 8192, LLAMA3_LONG_SEQ
#: Table 4's 128K row of ``data/published_runs.csv`` (its name keeps the table's printed DP 4)
LLAMA3_128K_ROW = "Llama 3.1 405B, 16,384 GPUs, 128K context (TP8 CP16 PP16 DP4)"

_says = partial(prose_check, chapter="chapter 17's prose")


def opening_prose() -> ChapterText:
    """The numbers chapter 17 quotes before its sections compute with them, as a :class:`ChapterText`:
    ``values`` (glued as ``ch17_<name>``) and ``data``: ``meta128`` (Llama 3 405B at 128K as Meta ran it:
    TP8 CP16 PP16 DP8, FSDP), ``nvl`` (the same on GB200 NVL72 racks, cp 8), ``rack`` (a GB200 NVL72 rack's
    NVLink domain, GPUs), ``l3`` (the same degrees read as a Megatron-LM run: ZeRO-1, 4 chunks), ``row`` (the
    published 128K row), ``published`` (its implied MFU), ``m`` (its micro-batches a replica), ``run`` (the
    planner's settings for the long-context stage) and ``fwd``/``bwd`` (the all-gather's K, V buffers, bytes).

    Raises :class:`~llmsizing.prose.ProseOutOfDate` where a statement of the chapter fails: the run's batch
    and GPUs Table 4's, eager attention keeping the softmax's 16-bit output alone, the row's degrees Meta's,
    Table 4's DP 4 giving the same step as DP 8, and Mistral 7B's layers Llama 3 8B's."""
    l405, h100 = get_model("llama-3.1-405b"), get_gpu("H100 SXM")
    long = LONG_SEQ
    meta128 = llama3_405b_layout(8, cp=16)
    nvl = llama3_405b_layout(8, cp=8)
    rack = get_node(gpu="GB200").scaleup_domain_gpus
    l3 = llama3_long_context_layout()
    row = published_runs().set_index("run").loc[LLAMA3_128K_ROW]
    published = float(row["implied_mfu"])
    m = int(row["global_batch"]) // l3.dp             # 128 sequences = 16 micro-batches x 8 replicas
    stage = published_stages().query("run == 'Llama 3.1 405B' and seq == @long").iloc[0]   # Sec. 3.4.2
    run = dict(tokens=float(stage["tokens"]), gpus=("H100 SXM",), seq=long,
               global_batch=LLAMA3_BATCH_TOKENS // long, max_gpus=int(row["n_gpus"]))
    _says(run["global_batch"] == int(row["global_batch"]) == int(stage["global_batch"])
          and run["max_gpus"] == int(stage["n_gpus"]),
          "the long-context stage's batch and GPUs are Table 4's")
    linear, _ = activation_coefficients(l405, tp=8, sp=True)           # flash attention: no s^2 term
    eager = activation_coefficients(l405, attention="eager", tp=8, sp=True)
    fwd, bwd = cp_attention_buffers_bytes(l405, batch=1, seq=long, tp=l3.tp, cp=l3.cp, cp_comm=l3.cp_comm)
    _says(eager[1] == 2 * l405.heads / 8,
          "eager attention keeps, with no dropout, the softmax's 16-bit output alone (2a/t bytes)")
    _says(int(row["dp"]) == l3.dp == meta128.dp == 8, "the 128K row runs 8 data-parallel replicas")
    degrees = (meta128.tp, meta128.cp, meta128.pp, meta128.gpus)
    _says((row["tp"], row["cp"], row["pp"], row["n_gpus"]) == degrees, "the 128K row's degrees are Meta's")
    # Table 4's printed DP 4 (8,192 GPUs, as WLB-LLM's 128K job) keeps 16 micro-batches a replica: same step
    dp4, dp8 = (step_time(l405, h100, llama3_405b_layout(d, cp=16), batch=1, seq=long, grad_accum=m,
                          precision=LLAMA3_RECIPE).mfu for d in (4, 8))
    _says(abs(dp4 / dp8 - 1) < 1e-3, "Table 4 read with DP 4 gives the same step as DP 8")
    mis, l8 = get_model("mistral-7b"), get_model("llama-3-8b")      # exercise 7: the same layers, a window
    shape = ("layers", "hidden", "heads", "kv_heads", "ffn_hidden")
    _says(all(getattr(mis, k) == getattr(l8, k) for k in shape), "Mistral 7B's layers are Llama 3 8B's")
    values = {
        "lin_kib": f"{linear / KiB:,.0f} KiB",
        "eager_cross": f"{eager[0] / eager[1]:,.0f}",
        "eager_pair": f"{eager[1]:.0f}",
        "nvl_domain": f"{rack}",
        "nvl_group": f"{nvl.tp * nvl.cp}",
        "kv_heads": f"{l405.kv_heads}",
        "heads": f"{l405.heads}",
        "gathered": f"{fwd / MiB:,.0f} MiB",                # all-gather: the whole sequence's K, V
        "chunk": f"{fwd / l3.cp / MiB:,.0f} MiB",           # ... of which one GPU's chunk
        "l3_gpus": f"{l3.gpus:,}",
        "l3_m": f"{m}",
        "l3_pub": f"{published:.1%}",
        "l3_row_dp": f"{int(row['dp'])}",                 # the row's dp column (its name keeps Table 4's 4)
        "l3_tflops": f"{row['reported_tflops_per_gpu']:.0f}",
        "row_gpus": f"{int(row['n_gpus']):,}",                # Table 4's 128K row
        "row_degrees": f"tp={meta128.tp}, cp={meta128.cp} and pp={meta128.pp}",
        "row_batch": f"{int(row['global_batch']) * long // 2**20}M",   # tokens a batch
        "dp48_mfu": f"{dp8:.1%}",
        "cp_degrees": ", ".join(map(str, default_cp_degrees(long))),
        "cp_degrees_16k": ", ".join(map(str, default_cp_degrees(CP_MIN_SEQ))),
        "cp_min_seq": f"{CP_MIN_SEQ // 1024}K",               # the planner tries cp from here
        "cp_min_tokens": f"{CP_MIN_TOKENS_PER_RANK:,}",       # ... leaving each GPU this many
        "gb": f"{run['global_batch']}",
        "run_gpus": f"{run['max_gpus']:,}",
        "run_tokens": f"{run['tokens'] / 1e9:,.0f}B",         # Llama 3 Sec. 3.4.2: ~800B tokens (stages CSV)
        "tok_cp16": f"{long // meta128.cp:,}",                # tokens of a sequence per GPU at cp=16
        "seq_long": f"{long:,}",
        "meta_cp": f"{meta128.cp}",                           # Meta's context-parallel degree
        "ex7_shape": f"{mis.layers} of them, hidden {mis.hidden:,}, {mis.heads} query and {mis.kv_heads} "
                     f"KV heads, MLP {mis.ffn_hidden:,}",
        "ex5_kv": f"{get_model('llama-2-7b').kv_heads}",      # exercise 5
        "dp4_gpus": f"{meta128.tp * meta128.cp * meta128.pp * 4:,}",   # Table 4 read with DP 4
    }
    data = {"meta128": meta128, "nvl": nvl, "rack": rack, "l3": l3, "row": row, "published": published,
            "m": m, "run": run, "fwd": fwd, "bwd": bwd}
    return ChapterText(values=values, data=data)
