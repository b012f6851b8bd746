"""One serving replica, priced (chapter 15, "Serving"): :func:`serving` (the :class:`Serving` result and the
calibrated constants are :mod:`llmsizing.serve_result`'s, re-exported here), which prices a replica's
prefill and decode steps on the roofline, the engine's KV capacity (:mod:`llmsizing.serve_engine`) and the
network model.

:mod:`llmsizing.serve` builds on it (how many GPUs a load needs, the batch sweep, the cost by GPU), re-exports
every name here, and its module docstring tells the whole model. :mod:`llmsizing.serve_calibration` fits the
constants on published figures and imports from here, never from :mod:`llmsizing.serve` (issue 32: no import
circles).
"""

from __future__ import annotations

import math
from dataclasses import replace

from ._compat import retire as _retire
from ._validate import MAX_MEANINGFUL, check_choice, check_fraction, check_int, check_number
from .all_to_all import all_to_all_s
from .catalog import get_gpu, gpu_price, price_kind_of, resolve_model
from .comm import ring_bytes
from .flops import forward_flops_per_token, matmul_params, mla_decode_flops_per_token
from .hardware import COMPUTE_DTYPES, dense_tflops, dtype_kernel_share
from .inference import (decode_weight_bytes_read, dense_weight_bytes_read, kv_cache_bytes_per_token,
                        kv_cached_tokens, moe_expert_bytes_read)
from .model import Model
from .network import Node, collective_time_s, get_node, group_link, link_bandwidth_one_way_gbps
from .parallel import check_layout
from .serve_engine import (  # noqa: F401 (BLOCK_SIZE, KVCapacity, serving_constants: still exported from here)
    BATCHING, BLOCK_SIZE, CUDA_GRAPH_BYTES, DEFAULT_ENGINE, GPU_MEMORY_UTILIZATION, MAX_NUM_BATCHED_TOKENS,
    KVCapacity, blocks_per_sequence, engine_key, kv_capacity_tokens, kv_split, serving_constants, stage_share,
    state_bytes_per_gpu, vllm_default_max_num_seqs, weights_bytes_per_gpu)
from .serve_moe import check_ep, experts_touched
from .serve_result import (  # noqa: F401 (the result and the constants, still exported from here)
    _FIT, ACTIVATION_BYTES, ALLREDUCE_LATENCY_S, ATTENTION_BU_DEFAULT, ENGINE_STEP_OVERHEAD_S, ENGINES,
    ERA_STEP_OVERHEAD_S, KV_FORMATS, MBU_DEFAULT, MFU_DEFAULT, RANGE_HIGH, RANGE_LOW, STEP_OVERHEAD_S,
    Serving, WEIGHT_FORMATS)
from .states import FIXED_OVERHEAD_BYTES


def _allreduce_s(message_bytes: float, tp: int, link, latency_s: float | None) -> float:
    """One all-reduce: the network model's (``link`` a GroupLink) or, given ``latency_s``, the old fixed
    latency plus the ring bytes at the link's one-way bandwidth (``link`` a float, GB/s)."""
    if tp == 1:
        return 0.0
    if latency_s is None:
        return collective_time_s("all-reduce", message_bytes, tp, link, protocols=True)
    return ring_bytes("all-reduce", message_bytes, tp) / (link * 1e9) + latency_s


#: How a decode attention kernel reads a grouped-query model's KV cache: ``"grouped"`` reads each KV head once
#: per step for its whole group of query heads; ``"per-query-head"`` runs one kernel block per query head,
#: each reading its KV head again (``heads / kv_heads`` reads), as TensorRT-LLM's masked multi-head attention
#: did before its XQA kernel.
ATTENTION_KERNELS = ("grouped", "per-query-head")


def _kv_reads(m: Model, attention_kernel: str) -> int:
    """Times one decode step reads each cached KV head (see :data:`ATTENTION_KERNELS`)."""
    check_choice("attention_kernel", attention_kernel, ATTENTION_KERNELS)
    return 1 if attention_kernel == "grouped" else m.heads // m.kv_heads


def serving(model: Model | str, gpu, *, tp: int = 1, weights: str = "bf16", kv_cache: str = "bf16",
            prompt: int = 1024, output: int = 256, batch: int = 1, mbu: float = MBU_DEFAULT,
            mfu: float = MFU_DEFAULT, compute: str = "bf16", allreduce_latency_s: float | None = None,
            overhead_bytes_per_gpu: float = FIXED_OVERHEAD_BYTES,
            price_usd_per_gpu_hour: float | None = None, attention_bu: float = ATTENTION_BU_DEFAULT,
            step_overhead_s: float | None = None, gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION,
            max_num_batched_tokens: int = MAX_NUM_BATCHED_TOKENS, cuda_graph_bytes: float = CUDA_GRAPH_BYTES,
            node=None, attention_kernel: str = "grouped", engine: str | None = None, pp: int = 1,
            ep: int = 1, redundant_experts: int = 0, state_dtype: str | None = None,
            max_num_seqs: int | None = None, batching: str = "continuous",
            decode_tokens: int = 1, compute_share: float | None = None) -> Serving:
    """Latency, throughput and cost of one replica of ``tp`` GPUs serving ``batch`` requests of ``prompt``
    input and ``output`` generated tokens.

    Per GPU, with ``W`` the weight bytes a step over its tokens reads
    (:func:`~llmsizing.inference.decode_weight_bytes_read`: every weight, except that the input embedding
    (untied) and other lookup tables give only the rows the step's tokens gather), ``K`` the KV bytes per
    token, ``F(s)`` the forward FLOPs per token at context ``s``
    (:func:`~llmsizing.flops.forward_flops_per_token`), ``B`` the HBM bandwidth, ``P`` the dense peak in
    ``compute`` times ``compute_share``, ``t0`` = ``step_overhead_s``, ``T`` = ``max_num_batched_tokens``
    (the prefill chunk):

    * prefill of ``n`` prompts: FLOPs ``n x prompt x F(prompt, causal)`` / tp, in ``c = ceil(n x prompt / T)``
      chunks, each reading ``W/tp``; time ``max(FLOPs / (P mfu), c W / (B mbu) + KV written / (B
      attention_bu)) + 2 L all-reduces of the tokens x hidden x 2 bytes + c t0``. ``ttft_s`` is one prompt's,
      ``batch_prefill_s`` the running batch's (the whole batch's when it runs at once);
    * decode step, at the mean context ``c = prompt + output // 2``: ``max(W / (B mbu) + batch K c / (B
      attention_bu), batch F(c) / (P mfu)) + 2 L all-reduces of batch x hidden x 2 bytes + t0``; a hybrid's
      state-space layers add ``2 x batch x`` their per-sequence state to the bytes at ``attention_bu`` (each
      step reads the state and writes it back, in ``state_dtype``, default the ``kv_cache`` dtype)
      (``decode_step_s``); ``itl_s`` adds the other sequences' prefills spread over the output
      (chunked prefill, see :class:`Serving`), ``chunk_step_s`` one full chunk;
    * all-reduces: the network model (:func:`llmsizing.network.collective_time_s` on the tensor-parallel
      group's :func:`~llmsizing.network.group_link` in ``node``, default the GPU's node). Passing
      ``allreduce_latency_s=`` restores the old price: ring bytes at the link bandwidth plus that latency;
    * ``max_batch``: the most sequences the engine runs at once, ``min(kv_batch, max_num_seqs)`` (issue 38).
      ``kv_batch`` is the KV room: the KV blocks vLLM would allocate
      (:func:`~llmsizing.serve_engine.kv_capacity_tokens`, with ``gpu_memory_utilization``,
      ``max_num_batched_tokens`` (8,192 on every GPU: the fitted chunk), ``max_num_seqs``,
      ``cuda_graph_bytes`` and ``overhead_bytes_per_gpu``) over the blocks one sequence of ``prompt +
      output`` tokens holds.
      ``max_num_seqs`` is the scheduler's cap on running sequences (vLLM's ``--max-num-seqs``; ``None``: vLLM
      V1's default on the GPU, :func:`~llmsizing.serve_engine.vllm_default_max_num_seqs`: 256 on an A100 or a
      GPU under 70 GiB, 1,024 otherwise); the result names it (``max_num_seqs``) and which of the two binds
      (``batch_bound``). With ``ep`` each of the ``ep / tp`` attention groups is an engine of its own (vLLM's
      data-parallel ranks each schedule up to ``max_num_seqs``), so both counts are per group times the
      groups; with ``pp`` one scheduler keeps every micro-batch, so the cap is the replica's. Another
      engine has its own cap (SGLang's ``--max-running-requests``, TensorRT-LLM's ``max_batch_size``): pass
      it. Before issue 38 ``max_batch`` was the KV room alone (Llama-3-8B at 128 + 128 tokens on an A100
      80GB: 1,748 sequences where vLLM runs 256). The result reports ``fits``; it does not refuse a batch
      that does not fit;
    * a batch over the cap (issue 34): vLLM V1's scheduler (``vllm/v1/core/sched/scheduler.py``) sets
      ``max_num_running_reqs = max_num_seqs`` and stops taking waiting requests once ``len(self.running) ==
      max_num_running_reqs``: the rest wait in its queue. So the engine runs ``running_batch = min(batch,
      max_num_seqs x groups)`` sequences, and every step figure (prefill, decode, ITL, throughput, price per
      token) is that running batch's. Requests of equal length finish together, so the queue is taken in
      ``waves = ceil(batch / running_batch)`` waves: ``cycle_s`` (the whole batch) and ``last_ttft_s`` (the
      batch's last request) count the waits, ``queue_wait_s`` and ``queued`` say how long and how many; a last
      wave that is not full is priced at its own size (``last_wave``). Another engine's cap is passed as
      ``max_num_seqs``;
    * a batch over the KV room (kv30): the scheduler admits a waiting request only if
      ``kv_cache_manager.allocate_slots`` finds its blocks (``None`` breaks the WAITING loop), and when a
      running request cannot get its next block it preempts the latest running one (``self.running.pop()``;
      ``_preempt_request`` frees its blocks, sets ``num_computed_tokens = 0`` and puts it back at the head
      of the waiting queue: recompute). A closed batch of equal requests is admitted while its prompts'
      blocks fit, then, as the blocks grow in decode, the latest are preempted until the survivors' whole
      sequences fit: ``kv_batch`` of them run to the end, the rest wait. The library prices that as waves of
      ``running_batch = min(batch, max_batch)`` (``running_bound`` says which bound sets it): the requests
      over the KV room wait from the start, instead of decoding a while first and recomputing their KV
      (prompt and tokens so far) when readmitted. :func:`~llmsizing.serve_replay.waves_against_vllm` replays
      the scheduler's rules step by step at the library's step prices (``tools/replay_kv_preemption.py``
      prints the ratio for its cases, chapter 15 glues two): the whole batch takes a little less than the
      waves' time when a few requests over the room are preempted late in a long answer, more when many
      waves recompute long prompts; the ITL is the room's at the end, a larger batch's before the
      preemptions. The churn is priced (churn32): ``churn`` (the tokens the preemptions throw away,
      :func:`~llmsizing.serve_churn.churn_estimate`) and ``churn_s`` (those tokens at one prompt's prefill
      price per token); ``cycle_s`` is the cohort run that counts it, priced to the batch's last token
      (cohort36; churn35's sum, the waves ``waves_s`` plus ``churn_s``, charged whole waves of steps that
      vLLM's admissions share; the deprecated ``cycle_with_churn_s`` returns ``cycle_s``), and ``last_ttft_s``
      the same run to when vLLM's admissions reach the last
      request (ttft35; the waves' figure: ``waves_last_ttft_s``). ``batching="static"`` runs
      the stated batch at once, as an engine built for it does (TensorRT-LLM's static batching: the
      calibration passes its rows so), whatever the KV room and the cap; ``fits`` still says whether vLLM's
      room and cap would hold it. If not one sequence fits the KV room (``kv_batch`` 0: vLLM would not
      start) only the cap queues.

    ``mbu``, ``attention_bu``, ``step_overhead_s`` and ``mfu`` default to the calibrated constants
    (``data/serving_model.csv``). The fixed step overhead is fitted per engine and batching era: ``engine=``
    (one of :data:`ENGINES`) takes that engine's own, and the default (``None``) the default engine's, vLLM
    (issue 34; before, an overhead pooled over all engines); the result's ``engine`` names it.
    ``attention_kernel`` says how decode attention reads a grouped-query model's KV heads
    (:data:`ATTENTION_KERNELS`): once per KV head (``"grouped"``, the default) or once per query head
    (``"per-query-head"``, ``heads / kv_heads`` times the bytes, as TensorRT-LLM before its XQA kernel). Issue
    22 changed the defaults and added the keywords after ``price_usd_per_gpu_hour``; old calls run unchanged.
    ``tp`` must divide the heads and the MLP, and divide or be a multiple of the KV heads
    (:func:`llmsizing.parallel.check_layout`). Quantised ``weights`` (fp8/int8/int4) are fewer bytes to read,
    the same FLOPs. Prices default to the catalogue's. Chapter 15.

    ``compute_share`` (serve43): ``mfu`` is the share of a 16-bit peak the kernels reach; FP8 and FP4
    ``compute`` reach that times this share of their own peak. ``None`` (the default) takes
    :func:`~llmsizing.hardware.dtype_kernel_share`: the training calibration's FP8 kernel efficiency over
    its BF16 one (``data/kernel_efficiency.csv``: 0.763), 1 for 16-bit compute; pass ``1.0`` for the price
    before serve43. Not fitted on the serving rows: with the FP8 rows' MFU scaled by it, the serving fit's
    held-out log speed ratios fall from a sum of squares of 3.68 to 2.86 (66 speeds, 9 sources), and a share
    refitted inside each held-out fold did worse than none at serve43 (3.87: most FP8 rows are one source's).

    ``decode_tokens`` (default 1) is how many positions each sequence runs in one decode step: speculative
    decoding's verify step runs ``k + 1`` (chapter 15; :func:`llmsizing.speculative.speculative_decoding`
    prices its plain, draft and verify steps with this function). Such a step does ``decode_tokens`` times the
    FLOPs, gathers that many input-embedding rows per sequence (for a mixture of experts, routes that many
    tokens), all-reduces that many activations, and reads ``decode_tokens - 1`` more cached KV rows per
    sequence (the last position attends to ``context + decode_tokens - 1`` keys). Only the decode step's
    fields (``decode_*_s``, ``decode_step_s``) are that step; the per-token figures still count one token per
    step.

    ``pp`` splits the layers over that many pipeline stages of ``tp`` GPUs each (vLLM's
    ``--pipeline-parallel-size``; the replica is ``tp x pp`` GPUs), as vLLM runs it (docs, "Distributed
    inference and serving"; RFCs vllm-project/vllm#4461 and #11945):

    * each GPU holds its stage's layers: ``ceil(L / pp) / L`` of the weights and of each sequence's KV cache
      (:func:`~llmsizing.serve_engine.stage_share`), so ``max_batch`` grows with the freed memory;
    * decode keeps ``pp`` micro-batches of ``m = ceil(batch / pp)`` sequences in flight, one per stage. A
      micro-batch's token passes every stage in turn, so ``decode_step_s`` (its ITL) is ``pp`` stage times at
      batch ``m`` (the largest stage's pace; the whole model's step at batch ``m`` when ``pp`` divides the
      layers) plus ``pp - 1`` sends of its activations between stages, plus ``t0``; the replica makes
      ``batch`` tokens per ITL. Each stage's weights are read once per micro-batch, so pipeline stages buy
      memory and throughput, not latency;
    * a send (``pp_send_s``) moves vLLM's ``IntermediateTensors``, the hidden states and the residual (2 x
      tokens x hidden x 2 bytes): each of the ``tp`` GPUs sends ``1 / tp`` of it to its peer in the next
      stage, which all-gathers it over its tensor-parallel group
      (``send_tensor_dict(..., all_gather_group=tp_group)``). Both are priced by the network model, the send
      on the pipeline group's link (ranks ``tp`` apart: across nodes once ``tp x pp`` exceeds the node);
    * prefill: a prompt's ``c`` chunks flow through the stages like micro-batches (vLLM V1's chunked pipeline
      parallelism, vllm-project/vllm#13637 and #38726), so the TTFT is ``(c + pp - 1)`` stage times of one
      chunk, plus ``pp - 1`` sends, plus ``c t0``: a long prompt (``c >> pp``) is prefilled about ``pp`` times
      faster, a single chunk no faster. A best case: an open report (vllm-project/vllm#41682, May 2026)
      measured no such gain for a 128K-token prompt over four stages. Chunks are taken as equal; later ones
      attend to more context, so the drain is slightly under-estimated. Other sequences' prefills riding along
      with decode cost each stage its share.

    **A mixture of experts** (chapter 15, "Serving a mixture of experts"; issue 24) keeps every expert
    resident (the weights are the total parameters), but a decode step reads only the experts its tokens are
    routed to: every other weight once plus, per MoE layer, the ``E (1 - (1 - k/E)^B)`` distinct experts ``B``
    tokens touch under uniform routing (:func:`~llmsizing.inference.moe_expert_bytes_read`; an upper bound for
    a real, skewed router). Its FLOPs are the active parameters'
    (:func:`~llmsizing.flops.forward_flops_per_token`). With multi-head latent attention (DeepSeek-V3) a
    decode step reads the latent cache (576 numbers per token and layer, not split by ``tp``:
    :func:`~llmsizing.serve_engine.kv_split`) and does the absorbed path's attention FLOPs
    (:func:`~llmsizing.flops.mla_decode_flops_per_token`, as vLLM and SGLang decode); prefill keeps the
    expanded per-head attention, as their prefill kernels do. ``experts_touched`` reports the expected
    distinct experts per MoE layer of a decode step.

    ``ep`` (expert parallelism; a mixture of experts only) spreads the routed experts over ``ep`` GPUs, each
    holding ``E / ep`` of every MoE layer's experts (``ep`` divides ``E``), or one each when ``ep >= E``, the
    other ``ep - E`` GPUs holding redundant copies of busy experts, as DeepSeek's decode unit's 64 extra GPUs
    do (then the expert bytes per GPU are ``1 / E`` of them and the expert FLOPs still spread over ``ep``),
    and makes the replica those ``ep`` GPUs. Attention, the dense layers, the router and the shared experts
    are split over groups of ``tp`` GPUs, ``ep / tp`` groups running data-parallel, each on its own sequences:
    DeepSeek-V3's published inference layout (DeepSeek-V3 technical report, arXiv:2412.19437, Sec. 3.4:
    prefill on 32 GPUs, attention TP4 with sequence parallelism and DP8, experts EP32; decode on 320 GPUs,
    attention TP4 SP DP80, experts EP320) and SGLang's/vLLM's "DP attention" with ``--enable-expert-parallel``
    (``tp = ep``: one group). Per GPU, a decode step of ``B`` sequences reads ``(W - R) / tp`` plus ``1 / ep``
    of the routed experts the whole batch touches, its attention group's ``ceil(B / (ep / tp))`` sequences'
    cache, and does those sequences' non-expert FLOPs over ``tp`` plus ``1 / ep`` of the batch's expert FLOPs.
    Each MoE layer adds a dispatch and a combine all-to-all over the ``ep`` GPUs (``all_to_all_s`` is one of
    them): each GPU's tokens (its group's over ``tp``: sequence parallelism) x ``k`` hidden vectors of 16
    bits, of which ``(ep - 1) / ep`` leave the GPU, priced on the network model as one concurrent exchange
    (:func:`all_to_all_s`: one latency, the bytes for the GPU's own node over NVLink and the rest over its
    NIC, the slower of the two). Attention's all-reduce (one per layer) and the dense layers' MLP all-reduces
    stay on the ``tp`` group. ``redundant_experts`` extra expert copies (DeepSeek's EPLB) let ``ep`` divide
    ``experts + redundant_experts`` (issue 37). Left out: DeepSeek's node-limited routing, load imbalance
    between EP ranks, the two-micro-batch overlap that hides the all-to-all (so the EP step is an upper bound
    there), and ``ep`` with ``pp`` (refused).
    """
    given = dict(locals())          # the call as made: a queued batch prices its waves with it
    m = resolve_model(model, moe=True)
    g = get_gpu(gpu)
    tp = check_int("tp", tp, maximum=1024)
    pp = check_int("pp", pp, maximum=1024)
    check_layout(m, tp=tp, pp=pp)
    ep = check_ep(m, ep, tp, pp, redundant_experts)
    check_choice("weights", weights, WEIGHT_FORMATS)
    check_choice("kv_cache", kv_cache, KV_FORMATS)
    prompt = check_int("prompt", prompt)
    output = check_int("output", output)
    batch = check_int("batch", batch)
    q = check_int("decode_tokens", decode_tokens, maximum=1024)      # positions per sequence per decode step
    # (the context a sequence reaches; say so in the caller's words)
    if prompt + output > MAX_MEANINGFUL:
        raise ValueError(f"prompt + output must be <= {MAX_MEANINGFUL:,} tokens, got {prompt:,} + {output:,}")
    seqs = (vllm_default_max_num_seqs(g) if max_num_seqs is None
            else check_int("max_num_seqs", max_num_seqs, maximum=1_000_000))
    check_choice("batching", batching, BATCHING)
    overhead = check_number("overhead_bytes_per_gpu", overhead_bytes_per_gpu)
    chunk = check_int("max_num_batched_tokens", max_num_batched_tokens, maximum=10_000_000)
    cap = kv_capacity_tokens(m, g, tp=tp, weights=weights, kv_cache=kv_cache,
                             gpu_memory_utilization=gpu_memory_utilization, max_num_batched_tokens=chunk,
                             max_num_seqs=seqs, cuda_graph_bytes=cuda_graph_bytes,
                             overhead_bytes_per_gpu=overhead, pp=pp, ep=ep,
                             redundant_experts=redundant_experts, state_dtype=state_dtype)
    dp = ep // tp if ep > 1 else 1                # data-parallel attention groups of tp GPUs
    kv_batch = cap.blocks // blocks_per_sequence(m, prompt + output) * dp    # kv_capacity_sequences' rule
    max_batch = min(kv_batch, seqs * dp)          # each attention group's scheduler runs <= max_num_seqs
    # the batch the engine runs at once: each group's scheduler runs <= max_num_seqs (issue 34) and, of equal
    # requests, the ones whose whole sequences' blocks fit (kv30); a static batch runs as stated
    running = batch if batching == "static" else min(batch, max_batch if kv_batch else seqs * dp)
    if tp > 1 and running * prompt * m.hidden * ACTIVATION_BYTES > MAX_MEANINGFUL:
        raise ValueError(f"batch x prompt = {running:,} x {prompt:,} tokens prefilled at once: their "
                         f"tensor-parallel all-reduce would exceed {MAX_MEANINGFUL:,} bytes; give a smaller "
                         "batch or prompt")
    if running < batch:   # the engine runs `running` at once and queues the rest: waves of `running`
        at = {**given, "max_num_seqs": seqs}
        wave = serving(**{**at, "batch": running})
        rest = batch - (math.ceil(batch / running) - 1) * running
        return replace(wave, batch=batch, running_batch=running,
                       last_wave=None if rest == running else serving(**{**at, "batch": rest}))
    mbu = check_fraction("mbu", mbu)
    mfu = check_fraction("mfu", mfu)
    attention_bu = check_fraction("attention_bu", attention_bu)
    check_choice("engine", DEFAULT_ENGINE if engine is None else engine, ENGINES)
    used = "given" if step_overhead_s is not None else engine_key(engine or DEFAULT_ENGINE,
                                                                  ENGINE_STEP_OVERHEAD_S)
    if step_overhead_s is None:      # the engine's own fitted overhead (the default engine's without one)
        step_overhead_s = ENGINE_STEP_OVERHEAD_S[used]
    t0 = check_number("step_overhead_s", step_overhead_s, maximum=1.0)
    check_choice("compute", compute, COMPUTE_DTYPES)
    # FP8 (FP4) kernels reach less of their peak than 16-bit ones of theirs: the fitted MFU is a 16-bit share
    c_share = (dtype_kernel_share(g, compute) if compute_share is None
               else check_fraction("compute_share", compute_share))
    lat = None if allreduce_latency_s is None else check_number("allreduce_latency_s", allreduce_latency_s,
                                                                maximum=1.0)
    state_dt = kv_cache if state_dtype is None else state_dtype      # checked by kv_capacity_tokens
    price = gpu_price(g, price_usd_per_gpu_hour)
    peak = dense_tflops(g, compute) * 1e12 * c_share    # the peak as the kernels reach it at mfu = 1
    hbm = g.memory_bandwidth_gbps * 1e9              # (a GPU's speeds are checked when it is made)
    node_obj = get_node(node, gpu=g) if not isinstance(node, Node) else node
    if tp == 1:
        link = None
    elif lat is None:
        link = group_link(g, node_obj, size=tp)
    else:
        link = link_bandwidth_one_way_gbps(g)
    share = stage_share(m, pp)
    pp_link = group_link(g, node_obj, size=pp, stride=tp) if pp > 1 else None
    tp_link = group_link(g, node_obj, size=tp) if pp > 1 and tp > 1 else None

    def send(tokens):   # one stage boundary: IntermediateTensors (hidden states + residual), 1/tp per GPU
        if pp == 1:
            return 0.0
        msg = 2 * tokens * m.hidden * ACTIVATION_BYTES
        t = collective_time_s("send/recv", msg / tp, 2, pp_link, protocols=True)
        return t + (collective_time_s("all-gather", msg, tp, tp_link, protocols=True) if tp > 1 else 0.0)

    # resident (one stage holds `share` of it)
    w_gpu = weights_bytes_per_gpu(m, weights, tp=tp, ep=ep, redundant_experts=redundant_experts)
    kv_tok_gpu = kv_cache_bytes_per_token(m, kv_cache) / kv_split(m, tp)
    kv_seq_gpu = kv_tok_gpu * kv_cached_tokens(m, prompt + output)
    moe = m.is_moe
    if moe:
        expert_share = m.experts_per_token / m.experts           # of the routed experts' FLOPs, per token
        expert_flops = 2 * m.routed_expert_params * expert_share  # expert matmul FLOPs per token

    def weights_read(tokens):    # weight bytes per GPU one step over `tokens` tokens (of the replica) reads
        if ep == 1:     # (input embedding and other lookup tables: only the rows the tokens gather)
            return decode_weight_bytes_read(m, tokens, weights) / tp
        # all but the routed experts, read once per step by every attention group (its own tokens' rows)
        return (dense_weight_bytes_read(m, math.ceil(tokens / dp), weights) / tp
                + moe_expert_bytes_read(m, tokens, weights) / min(ep, m.experts))

    def per_gpu_flops(seqs_group, tokens, per_token):   # FLOPs per GPU: attention group's tokens + experts
        if ep == 1:
            return tokens * per_token / tp
        return seqs_group * (per_token - expert_flops) / tp + tokens * expert_flops / ep

    def a2a(tokens_gpu):         # dispatch + combine all-to-alls of every MoE layer, `tokens_gpu` per GPU
        if ep == 1:
            return 0.0
        return 2 * m.n_moe_layers * all_to_all_s(
            tokens_gpu * m.experts_per_token * m.hidden * ACTIVATION_BYTES, ep, g, node_obj)

    def ep_ar(tokens):           # with ep, the tp group's all-reduces: attention's per layer, dense MLPs' own
        return (m.layers + m.n_dense_layers) * _allreduce_s(tokens * m.hidden * ACTIVATION_BYTES, tp, link,
                                                            lat)

    def ar(tokens):   # the two all-reduces per layer of `tokens` activations, split into chunks of T tokens
        full, rest = divmod(tokens, chunk)
        per = _allreduce_s(min(tokens, chunk) * m.hidden * ACTIVATION_BYTES, tp, link, lat)
        last = _allreduce_s(rest * m.hidden * ACTIVATION_BYTES, tp, link, lat) if rest and full else 0.0
        return 2 * m.layers * ((full if full else 1) * per + last)

    def prefill(n):   # n prompts prefilled together -> (FLOPs, bytes, compute s, memory s, comm s, chunks)
        group = math.ceil(n / dp)                  # prompts per attention group (with ep: groups in parallel)
        flops = per_gpu_flops(group * prompt, n * prompt, forward_flops_per_token(m, seq=prompt, causal=True))
        chunks = math.ceil(group * prompt / chunk)
        w_chunk = weights_read(min(min(n, dp) * min(group * prompt, chunk), MAX_MEANINGFUL))
        kv_written = group * kv_tok_gpu * kv_cached_tokens(m, prompt)
        read = chunks * w_chunk + kv_written
        memory = chunks * w_chunk / (hbm * mbu) + kv_written / (hbm * attention_bu)
        if ep == 1:
            comm = ar(n * prompt)
        else:
            full, rest = divmod(group * prompt, chunk)
            comm = sum(k * (ep_ar(t) + a2a(t / tp)) for k,
                       t in ((full, chunk), (1 if rest else 0, rest)) if k)
        return flops, read, flops / (peak * mfu), memory, comm, chunks

    pre_flops, pre_bytes, pre_compute, pre_memory, pre_comm, pre_chunks = prefill(1)
    _, _, all_compute, all_memory, all_comm, all_chunks = prefill(batch)
    # pipeline stages: c chunks flow through pp stages of `share` of the layers each, (c + pp - 1) stage times
    fill = share * (pre_chunks + pp - 1) / pre_chunks
    fill_all = share * (all_chunks + pp - 1) / all_chunks
    pre_send = (pp - 1) * send(min(prompt, chunk))
    all_send = (pp - 1) * send(min(batch * prompt, chunk))

    # decode: one token per sequence, attending to the mean context of the output steps; with pp stages,
    # micro-batches of mb sequences, each passing the pp stages in turn
    mb = math.ceil(batch / pp)
    ctx = prompt + output // 2
    cached = kv_cached_tokens(m, ctx + q - 1)     # a step over q positions: q - 1 more rows (speculative)
    if not moe and not m.is_mla:
        dec_flops = q * mb * forward_flops_per_token(m, seq=ctx) / tp      # min(ctx, window) keys: flops.py
    else:             # MoE: active weights; MLA: the absorbed path's attention core over the latent cache
        per_token = (2 * matmul_params(m) + mla_decode_flops_per_token(m, context=cached).absorbed_core
                     if m.is_mla else forward_flops_per_token(m, seq=ctx))
        dec_flops = per_gpu_flops(q * math.ceil(mb / dp), q * mb, per_token)
    # sequences whose cache this GPU holds (its attention group's)
    seqs_gpu = math.ceil(mb / dp)
    # a state-space (Mamba, linear-attention) layer reads its per-sequence state and writes it back each step
    kv_read = seqs_gpu * (kv_tok_gpu * cached * _kv_reads(m, attention_kernel)
                          + 2 * state_bytes_per_gpu(m, state_dt, tp=tp))
    w_read = weights_read(q * mb)
    dec_bytes = w_read + kv_read
    dec_memory = w_read / (hbm * mbu) + kv_read / (hbm * attention_bu)
    if ep == 1:
        dec_comm = 2 * m.layers * _allreduce_s(q * mb * m.hidden * ACTIVATION_BYTES, tp, link, lat)
    else:
        dec_comm = ep_ar(q * seqs_gpu) + a2a(q * seqs_gpu / tp)
    pace = pp * share                 # pp stages at the largest stage's pace (1 when pp divides the layers)
    dec_send = (pp - 1) * send(q * mb)
    # what one prompt's prefill adds to the decode steps it rides along with (its weights read is shared; each
    # stage does its share)
    interleave = (pre_compute + pre_comm) * share
    # the attention groups prefill their own sequences side by side: the batch's cost, shared
    if ep > 1:
        interleave = (all_compute + all_comm) / batch
    c_tok = min(prompt, chunk)
    if ep == 1:
        chunk_extra = (c_tok * forward_flops_per_token(m, seq=c_tok, causal=True) / tp / (peak * mfu)
                       + 2 * m.layers * _allreduce_s(c_tok * m.hidden * ACTIVATION_BYTES, tp, link, lat))
    else:
        chunk_extra = (per_gpu_flops(c_tok, c_tok, forward_flops_per_token(m, seq=c_tok, causal=True))
                       / (peak * mfu) + ep_ar(c_tok) + a2a(c_tok / tp))

    return Serving(
        model=m.name, gpu=g.name, tp=tp, weights=weights, kv_cache=kv_cache, prompt=prompt, output=output,
        batch=batch, mbu=mbu, mfu=mfu, price_usd_per_gpu_hour=price, weights_bytes_per_gpu=w_gpu * share,
        kv_bytes_per_sequence_per_gpu=kv_seq_gpu * share, capacity_bytes_per_gpu=float(g.memory_bytes),
        overhead_bytes_per_gpu=overhead, max_batch=max_batch, prefill_flops_per_gpu=pre_flops * share,
        prefill_bytes_per_gpu=pre_bytes * share, prefill_compute_s=pre_compute * fill,
        prefill_memory_s=pre_memory * fill, prefill_comm_s=pre_comm * fill + pre_send,
        batch_prefill_s=max(all_compute,
                            all_memory) * fill_all + all_comm * fill_all + all_send + all_chunks * t0,
        decode_context=ctx, decode_flops_per_gpu=dec_flops * share, decode_bytes_per_gpu=dec_bytes * share,
        decode_compute_s=dec_flops / (peak * mfu) * pace, decode_memory_s=dec_memory * pace,
        decode_comm_s=dec_comm * pace + dec_send,
        attention_bu=attention_bu, step_overhead_s=t0, prefill_chunks=pre_chunks, chunk_extra_s=chunk_extra,
        interleave_s=interleave, kv_capacity=cap, pp=pp, microbatch=mb, pp_send_s=send(mb), ep=ep,
        experts_touched=experts_touched(m, mb),
        all_to_all_s=a2a(seqs_gpu / tp) / (2 * m.n_moe_layers) if ep > 1 else 0.0, engine=used,
        price_kind=price_kind_of(g, price), decode_kv_bytes_per_gpu=kv_read * share, kv_batch=kv_batch,
        max_num_seqs=seqs, compute_share=c_share)


__all__ = ["Serving", "serving", "WEIGHT_FORMATS", "KV_FORMATS", "MBU_DEFAULT",
           "ATTENTION_BU_DEFAULT", "STEP_OVERHEAD_S", "ENGINE_STEP_OVERHEAD_S", "ERA_STEP_OVERHEAD_S",
           "ENGINES", "MFU_DEFAULT",
           "RANGE_LOW", "RANGE_HIGH", "ALLREDUCE_LATENCY_S", "ACTIVATION_BYTES",
           "ATTENTION_KERNELS"]

# The what-if bands before the serving range was stated (issue 22): 0.6-0.9 MBU and 0.4-0.7 MFU. They are not
# the range the library states (RANGE_LOW/RANGE_HIGH, serving_range); code that built bands from them kept the
# old answer silently (issue 32).
RETIRED = {"MBU_LOW": (0.6, "serve_calibration.serving_range(...) (the stated range, RANGE_LOW/RANGE_HIGH)"),
           "MBU_HIGH": (0.9, "serve_calibration.serving_range(...) (the stated range, RANGE_LOW/RANGE_HIGH)"),
           "MFU_LOW": (0.4, "serve_calibration.serving_range(...) (the stated range, RANGE_LOW/RANGE_HIGH)"),
           "MFU_HIGH": (0.7, "serve_calibration.serving_range(...) (the stated range, RANGE_LOW/RANGE_HIGH)")}
__getattr__ = _retire(__name__, RETIRED)
