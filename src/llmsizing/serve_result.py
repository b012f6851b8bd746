"""One serving replica's result and the calibrated constants it is priced with (chapter 15, "Serving"): the
:class:`Serving` dataclass (a replica's prefill and decode steps, their bounds, throughput and price per
token), the weight and KV formats an engine reads, and the constants fitted on published figures
(``data/serving_model.csv``, :func:`~llmsizing.serve_engine.serving_constants`; the fit is
:mod:`llmsizing.serve_calibration`'s). :func:`~llmsizing.serve_step.serving` fills it in; moved out of
:mod:`llmsizing.serve_step` unchanged (session 25), which still exports every name.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from .serve_churn import Churn, StepCounts, churn_estimate
from .serve_engine import BLOCK_SIZE, KVCapacity, serving_constants

#: Weight formats a serving engine reads: 16-bit, or weight-only / W8A8 quantised. Quantisation changes the
#: bytes read, not the FLOPs (the matmuls still run in ``compute``).
WEIGHT_FORMATS = ("bf16", "fp16", "fp8", "int8", "int4", "int4-g128", "q8_0", "q6_k", "q4_0",
                  "q4_k", "q4_k_m")
#: KV-cache formats (vLLM's ``kv_cache_dtype``: auto = the model's 16 bits, or fp8).
KV_FORMATS = ("bf16", "fp16", "fp8", "int8")

_FIT = serving_constants()
#: Achieved fraction of HBM bandwidth reading the weights in decode (MBU): the calibrated default
#: (``data/serving_model.csv``).
MBU_DEFAULT = _FIT.weights_bu
#: Achieved fraction of HBM bandwidth reading the paged KV cache (attention kernels): calibrated.
ATTENTION_BU_DEFAULT = _FIT.attention_bu
#: The step overhead fitted per engine and batching era (seconds), keyed ``"vLLM/continuous"``,
#: ``"TensorRT-LLM/static"``, ... (issue 34: TensorRT-LLM's static-batching overhead is not its in-flight
#: one).
ENGINE_STEP_OVERHEAD_S = dict(_FIT.engine_step_overhead_s)
#: The step overhead pooled per batching era (seconds): what an engine without its own fit is priced at.
ERA_STEP_OVERHEAD_S = dict(_FIT.era_step_overhead_s)
#: Fixed time per engine step (scheduling, sampling, kernel launches) of the default engine
#: (:data:`~llmsizing.serve_engine.DEFAULT_ENGINE`, vLLM), seconds: calibrated. Before issue 34 it was one
#: overhead pooled over every engine (3.22 ms, set mostly by TensorRT-LLM's static batching).
STEP_OVERHEAD_S = _FIT.step_overhead_s
#: The engines :func:`serving` knows by name (``engine=``): bare names (their continuous-batching fit where
#: they have one) and ``engine/batching`` keys.
ENGINES = tuple(sorted({k.split("/")[0] for k in ENGINE_STEP_OVERHEAD_S})) + tuple(ENGINE_STEP_OVERHEAD_S)
#: Achieved fraction of the dense peak (MFU) in prefill and in decode's matmuls: calibrated.
MFU_DEFAULT = _FIT.prefill_mfu
#: The stated 80% range of a calibrated engine's per-token figures: a published speed lies within
#: ``RANGE_LOW x`` and ``RANGE_HIGH x`` the central prediction, with a coverage measured by leaving one source
#: out at a time (``data/serving_intervals.csv``; :func:`~llmsizing.serve_calibration.serving_range`).
RANGE_LOW, RANGE_HIGH = _FIT.low, _FIT.high
#: Fixed time per tensor-parallel all-reduce (seconds) of the old model; now used only when a caller passes
#: ``allreduce_latency_s=`` to :func:`serving` (the default prices all-reduces with the network model).
ALLREDUCE_LATENCY_S = 10e-6
#: Bytes of one activation element in the all-reduces (16-bit activations).
ACTIVATION_BYTES = 2


@dataclass(frozen=True)
class Serving:
    """One serving replica (``tp`` GPUs) running ``batch`` requests of ``prompt`` + ``output`` tokens
    (:func:`serving`). Times are per replica; bytes and FLOPs are per GPU. A batch over ``max_batch`` (the
    engine's ``max_num_seqs``, issue 34, or its KV room, kv30) runs ``running_batch`` at a time in ``waves``:
    the step fields are one full wave's, ``cycle_s`` and ``last_ttft_s`` the whole batch's; ``running_bound``
    says which bound set the running batch; over the KV room ``churn`` and ``churn_s`` price the tokens vLLM's
    preemptions compute twice (churn32), and ``cycle_s`` is the cohort run that counts them priced to the last
    token, as ``last_ttft_s`` to the last first token (cohort36; the waves alone: ``waves_s``)."""

    model: str
    gpu: str
    tp: int
    weights: str
    kv_cache: str
    prompt: int
    output: int
    batch: int
    mbu: float
    mfu: float
    price_usd_per_gpu_hour: float
    weights_bytes_per_gpu: float
    kv_bytes_per_sequence_per_gpu: float
    capacity_bytes_per_gpu: float
    overhead_bytes_per_gpu: float
    max_batch: int
    prefill_flops_per_gpu: float
    prefill_bytes_per_gpu: float
    prefill_compute_s: float
    prefill_memory_s: float
    prefill_comm_s: float
    batch_prefill_s: float
    decode_context: int
    decode_flops_per_gpu: float
    decode_bytes_per_gpu: float
    decode_compute_s: float
    decode_memory_s: float
    decode_comm_s: float
    attention_bu: float = ATTENTION_BU_DEFAULT
    step_overhead_s: float = STEP_OVERHEAD_S
    prefill_chunks: int = 1
    chunk_extra_s: float = 0.0
    interleave_s: float = 0.0
    kv_capacity: KVCapacity | None = None
    pp: int = 1
    microbatch: int = 0
    pp_send_s: float = 0.0
    ep: int = 1
    experts_touched: float = 0.0
    all_to_all_s: float = 0.0
    engine: str = ""           # the engine whose step overhead this is ("vLLM/continuous"), or "given"
    price_kind: str = "list"   # what the price is: catalog.PRICE_KINDS (catalog.price_kind_of)
    decode_kv_bytes_per_gpu: float = 0.0   # of decode_bytes_per_gpu, the KV cache's (and a hybrid's state)
    # issue 38: max_batch = min(kv_batch, max_num_seqs x attention groups); kv_batch the KV room alone (None:
    # a result built by hand before the cap, taken as max_batch), max_num_seqs the scheduler's cap per group
    kv_batch: int | None = None
    max_num_seqs: int | None = None
    # issue 34: a batch over max_num_seqs (x groups), or over the KV room (kv30), runs in waves of
    # running_batch sequences (None: batch, all at once); every step field above is one full wave's.
    # last_wave: the last wave when it is not full (its own Serving, of the rest), else None
    running_batch: int | None = None
    last_wave: Serving | None = None
    # serve43: the share of the compute dtype's peak the kernels reach at mfu = 1, over a 16-bit one's
    # (hardware.dtype_kernel_share: 0.763 in FP8, 1 in 16 bits); compute is priced at peak x mfu x this
    compute_share: float = 1.0

    def __post_init__(self):
        if self.kv_batch is None:
            object.__setattr__(self, "kv_batch", self.max_batch)
        if self.running_batch is None:
            object.__setattr__(self, "running_batch", self.batch)

    @property
    def gpus(self) -> int:
        """GPUs in the replica: ``tp x pp``, or with expert parallelism the ``ep`` GPUs the experts are spread
        over (attention groups of ``tp`` GPUs, ``ep / tp`` of them data-parallel)."""
        return self.tp * self.pp if self.ep == 1 else self.ep

    @property
    def attention_dp(self) -> int:
        """Data-parallel attention groups of ``tp`` GPUs in the replica: ``ep / tp`` (1 without expert
        parallelism)."""
        return self.ep // self.tp if self.ep > 1 else 1

    @property
    def fits(self) -> bool:
        """Whether the engine runs the whole batch at once: its KV cache (at ``prompt + output`` tokens) fits
        the engine's KV budget and it is within ``max_num_seqs`` (``batch <= max_batch``). A static batch
        (``batching="static"``) runs at once either way; ``fits`` then says whether vLLM's room and cap would
        hold it (review30a)."""
        return self.batch <= self.max_batch

    @property
    def batch_bound(self) -> str:
        """What caps ``max_batch``: ``"kv"`` (the KV room, ``kv_batch``) or ``"max_num_seqs"`` (the
        scheduler's cap, smaller than the KV room)."""
        return "max_num_seqs" if self.max_batch < self.kv_batch else "kv"

    @property
    def running_bound(self) -> str:
        """What sets ``running_batch`` (kv30): ``"batch"`` (the whole batch runs at once), ``"kv"`` (the KV
        room, ``kv_batch``: vLLM keeps running only the requests whose blocks fit) or ``"max_num_seqs"`` (the
        scheduler's cap). A batch that runs at once though it does not fit (``batching="static"``) is
        ``"batch"``, with ``fits`` False."""
        if self.running_batch >= self.batch:
            return "batch"
        return "kv" if self.running_batch == self.kv_batch else "max_num_seqs"

    @property
    def waves(self) -> int:
        """Waves the engine serves the batch in: ``ceil(batch / running_batch)``; 1 when it runs at once."""
        return -(-self.batch // self.running_batch)

    @property
    def queued(self) -> int:
        """Requests that wait for a running one to finish: ``batch - running_batch``."""
        return self.batch - self.running_batch

    @property
    def wave_s(self) -> float:
        """One full wave end to end: its ``running_batch`` prompts' prefill and ``output`` decode steps,
        ``batch_prefill_s + output x decode_step_s``."""
        return self.batch_prefill_s + self.output * self.decode_step_s

    @property
    def queue_wait_s(self) -> float:
        """How long the last wave's requests wait before the engine takes them: the ``waves - 1`` waves
        before it, ``(waves - 1) x wave_s`` (0 when the batch runs at once)."""
        return (self.waves - 1) * self.wave_s

    @property
    def waves_last_ttft_s(self) -> float:
        """The waves' time to first token of the batch's last request: its wait (``queue_wait_s``) and its
        wave's whole prefill (``batch_prefill_s`` of the last wave: its prompt is the wave's last). It is
        :attr:`last_ttft_s` within the KV room or queued by ``max_num_seqs`` (nothing is preempted there);
        over the KV room vLLM admits otherwise (:attr:`last_ttft_s`), and this is the figure that never counts
        the preemptions (milliseconds, for the serving widget; ttft35)."""
        return self.queue_wait_s + (self.last_wave or self).batch_prefill_s

    @property
    def last_ttft_s(self) -> float:
        """Time to first token of the batch's last request. Within the KV room, or queued by
        ``max_num_seqs``, the waves' (:attr:`waves_last_ttft_s`). Over the KV room vLLM V1 does not wait
        for whole waves: it admits a request as soon as its prompt's blocks fit and preempts the latest as
        answers grow (``Scheduler.schedule``), so the last request's first token comes when the admissions
        reach it. This is that step, from the cohort run that counts the churn (:attr:`churn`'s
        ``to_last_first_token``, :func:`~llmsizing.serve_churn.kv_churn`; the token-level replay for
        prompts over half the chunk), priced with this result's own step terms (:meth:`steps_s`). Against
        the token-level replay of the same rules at the same step prices (ttft35): in
        ``tools/replay_kv_preemption.py``'s nine cases vLLM's over this is 0.999-1.002 (median error
        0.07%), where the waves' figure gave 0.70-1.39 for 1,024-4,096-token prompts and 0.011-0.043 for
        128-token ones (vLLM admits them all at once and preempts them later: 0.6-1.5 s against 35-55 s);
        over ``data/serve_churn_sweep.csv``'s 144 batches (1.5-6 times the room) the cohorts' work priced
        at Llama-3-8B's H100 steps is within 0.63% of the replay's (median 0.04%). Approximations: the
        cohorts prefill a prompt in one step (vLLM chunks the one that overflows the step's budget), the
        step price is linear in its tokens (:meth:`steps_s`), and beyond 8 times the room the work is
        extrapolated as the churn is (0.6% low to 12% high against the full run at 12-32 times, six rooms
        of 29-346 sequences; 6.1% low at 12 times Llama-2-7B's room of 53 on an A100 80GB at 128 + 2,048
        tokens, cohort36). Costs the churn's run on first use (milliseconds to 1.5 s;
        :attr:`waves_last_ttft_s` never does). Where the churn cannot be counted (:attr:`churn` None) it is
        the waves'. Chapter 15."""
        counts = self.churn.to_last_first_token if self.running_bound == "kv" and self.churn else None
        return self.waves_last_ttft_s if counts is None else self.steps_s(counts)

    def steps_s(self, counts) -> float:
        """Seconds of the engine steps ``counts`` (a :class:`~llmsizing.serve_churn.StepCounts`, one attention
        group's; ttft35), priced from one full wave's step: ``step_overhead_s + decode_comm_s`` a step; the
        decode memory split into the weights (a step) and the KV cache (per context token: the wave's KV time
        over its sequences x ``decode_context``), or the decode compute per decode token if larger; each
        prefilled token at a prompt's prefill per token, ``interleave_s / prompt`` (times the groups, which
        prefill side by side). A full wave's decode step prices to ``decode_step_s`` exactly. The replay's
        price (:mod:`llmsizing.serve_replay`) is this at batch 1 and one GPU. Approximate where a step's bound
        differs from the wave's, and in the all-reduces and MoE weights, priced at the wave's size."""
        if not isinstance(counts, StepCounts):
            raise TypeError(f"counts must be a serve_churn.StepCounts, got {type(counts).__name__}")
        seqs = -(-self.running_batch // self.attention_dp)        # one group's sequences in a full wave
        weights = (self.decode_bytes_per_gpu - self.decode_kv_bytes_per_gpu) / self.mbu
        kv = self.decode_kv_bytes_per_gpu / self.attention_bu
        weights_s = self.decode_memory_s * weights / (weights + kv)
        kv_token_s = (self.decode_memory_s - weights_s) / (seqs * self.decode_context)
        decode = max(counts.steps * weights_s + counts.context_tokens * kv_token_s,
                     counts.decodes * self.decode_compute_s / seqs)
        return (counts.steps * (self.step_overhead_s + self.decode_comm_s) + decode
                + counts.prefill_tokens * self.interleave_s * self.attention_dp / self.prompt)

    @property
    def ttft_s(self) -> float:
        """Time to first token: one prompt's prefill in ``prefill_chunks`` steps, ``max(compute, memory) +
        all-reduces + chunks x step overhead`` (a request alone on the replica; in a batch sent at once even
        the first requests share their first steps with other prompts, and the last waits longest:
        :attr:`last_ttft_s`)."""
        return (max(self.prefill_compute_s, self.prefill_memory_s) + self.prefill_comm_s
                + self.prefill_chunks * self.step_overhead_s)

    @property
    def decode_step_s(self) -> float:
        """One decode step carrying no prefill: ``max(memory, compute) + all-reduces + step overhead``."""
        return max(self.decode_memory_s, self.decode_compute_s) + self.decode_comm_s + self.step_overhead_s

    @property
    def itl_s(self) -> float:
        """Mean inter-token latency under continuous batching: a decode step plus the other ``running_batch -
        1`` sequences' prefills spread over the ``output`` steps (chunked prefill rides along with decode):
        ``decode_step_s + (running_batch - 1) x interleave_s / output``. Issue 22: the step has an overhead,
        its own attention efficiency and network-priced all-reduces, and it carries the others' prefills.
        Issue 34: a queued batch's sequences run ``running_batch`` at a time, and so does their step."""
        return self.decode_step_s + (self.running_batch - 1) * self.interleave_s / self.output

    @property
    def chunk_step_s(self) -> float:
        """A decode step that also carries one prefill chunk (``min(prompt, max_num_batched_tokens)`` tokens):
        the worst ITL a running sequence sees when a new request arrives."""
        return self.decode_step_s + self.chunk_extra_s

    @property
    def decode_bound(self) -> str:
        """``"memory"`` or ``"compute"``: the larger of the decode step's two bounds."""
        return "memory" if self.decode_memory_s >= self.decode_compute_s else "compute"

    @property
    def prefill_bound(self) -> str:
        return "compute" if self.prefill_compute_s >= self.prefill_memory_s else "memory"

    @property
    def decode_intensity_flops_per_byte(self) -> float:
        """FLOPs per byte read in one decode step (compare with the GPU's ridge point)."""
        return self.decode_flops_per_gpu / self.decode_bytes_per_gpu

    @property
    def prefill_intensity_flops_per_byte(self) -> float:
        return self.prefill_flops_per_gpu / self.prefill_bytes_per_gpu

    @property
    def waves_s(self) -> float:
        """The waves alone, without the KV preemptions' churn: prefill all the prompts (``batch_prefill_s``)
        and decode ``output`` steps, ``batch_prefill_s + output x decode_step_s`` (``wave_s``); a queued batch
        (issue 34) takes its waves one after the other: ``(waves - 1) x wave_s`` + the last wave's. This was
        ``cycle_s`` before churn35; it is the whole batch's time wherever nothing is preempted (within the KV
        room, or queued by ``max_num_seqs``); over the KV room, the batch as if vLLM admitted a room at a time
        (fast: the serving widget states it there)."""
        return self.queue_wait_s + (self.last_wave or self).wave_s

    @property
    def cycle_s(self) -> float:
        """GPU time to serve ``batch`` requests completely. Within the KV room, or queued by ``max_num_seqs``,
        the waves (:attr:`waves_s`: nothing is preempted). Over the KV room vLLM V1 admits requests while
        their prompts' blocks fit and preempts the latest as answers grow (``Scheduler.schedule``), so the
        batch does not run in waves: this is the cohort run that counts the churn, to the batch's last token
        (:attr:`churn`'s ``to_last_token``, :func:`~llmsizing.serve_churn.kv_churn`; the token-level replay
        for prompts over half the chunk), priced with this result's own step terms (:meth:`steps_s`), the
        mechanism of :attr:`last_ttft_s` (cohort36: one engine, one answer per question). Why not the waves
        plus the recomputed tokens (churn35's sum, :attr:`waves_s` + :attr:`churn_s`): both compute the same
        tokens (every request its ``prompt + output - 1`` and every preempted one its lost tokens again) at
        the same contexts (within 0.03%), but vLLM runs the requests past the room in the first wave's steps
        until they are preempted, and after readmission only their rest, so it takes fewer steps; each step
        pays the fixed overhead and one read of the weights, which the sum charged for whole extra waves
        (4,096 steps where vLLM's rules take 2,272 for Llama-2-7B on an A100, 60 requests of 128 + 2,048
        tokens over a room of 53: those 1,824 steps cost 18.40 s of the sum's 18.41 s over the replay).
        Against the token-level replay of the same rules at the same step prices
        (``tools/replay_kv_preemption.py``'s nine cases) vLLM's over this is 0.998-1.002 (median error 0.07%),
        where the sum gave 0.772-1.006 (9.2-29.5% high with 128-token prompts) and the waves alone 0.78-1.15;
        over ``data/serve_churn_sweep.csv``'s 144 batches the cohorts' whole run priced at Llama-3-8B's H100
        steps is within 0.49% of the replay's (median 0.04%). Approximations: as :attr:`last_ttft_s`'s
        (one-step prefill in the cohorts, a step price linear in its tokens, the all-reduces and MoE weights
        at the wave's size, a step's bound the wave's), and beyond 8 times the room the work is extrapolated
        as the churn is (0.4% low to 4.6% high against the full run at 12, 16 and 32 times six rooms of 21-346
        sequences). Where the churn cannot be counted (:attr:`churn` None: no KV capacity, or sequences past a
        sliding window) this is the waves alone. Counting costs milliseconds to 1.5 s on first use
        (:mod:`llmsizing.serve_churn`; the same run as :attr:`last_ttft_s`'s); :attr:`waves_s` never counts
        it. Chapter 15."""
        counts = self.churn.to_last_token if self.running_bound == "kv" and self.churn else None
        return self.waves_s if counts is None else self.steps_s(counts)

    @cached_property
    def churn(self) -> Churn | None:
        """The KV preemptions' churn of a batch over the KV room (churn32): vLLM V1 admits more requests than
        their whole sequences' blocks hold and preempts the latest as they grow; each preempted request's
        computed tokens are computed again when it returns. :func:`~llmsizing.serve_churn.kv_churn` on each
        attention group's ``kv_capacity.blocks``, ``ceil(batch / groups)`` requests and ``max_num_seqs``;
        ``recomputed_tokens`` and ``preemptions`` are the replica's (times the groups). A zero churn when the
        batch runs within the room (``running_bound`` not ``"kv"``: the cap or the whole batch sets the
        running batch, no request is ever preempted); None when it cannot be counted: a result built without
        its KV capacity, or sequences longer than a sliding window (vLLM frees the window's old blocks, which
        the estimate does not). Computed on first use (milliseconds to 1.5 s, as :attr:`cycle_s` says;
        extrapolated beyond 8 times the room). Chapter 15."""
        if self.running_bound != "kv":
            return Churn(0, 0, self.batch)
        groups = self.attention_dp
        per_sequence = math.ceil((self.prompt + self.output) / BLOCK_SIZE)
        if self.kv_capacity is None or self.kv_batch // groups != self.kv_capacity.blocks // per_sequence:
            return None
        one = churn_estimate(self.kv_capacity.blocks, -(-self.batch // groups), self.prompt, self.output,
                             self.max_num_seqs or self.max_batch)
        # (to_last_first_token, to_last_token: one group's, as the groups run side by side)
        return Churn(one.recomputed_tokens * groups, one.preemptions * groups, self.batch,
                     one.to_last_first_token, one.to_last_token)

    @property
    def recompute_tokens_per_request(self) -> float | None:
        """Tokens computed twice per finished request (``churn.per_request``; None when :attr:`churn` is)."""
        return None if self.churn is None else self.churn.per_request

    @property
    def churn_s(self) -> float | None:
        """Seconds of the churn (churn32): what the tokens vLLM's preemptions compute twice cost, each
        attention group's recomputed tokens at one prompt's prefill cost per token riding along with decode
        (``interleave_s / prompt``, as :mod:`llmsizing.serve_replay` prices them; a recomputed sequence longer
        than the prompt attends to more context, so an underestimate there). The groups recompute side by
        side, and with expert parallelism ``interleave_s`` is the replica's cost of a prompt (its groups
        prefilling side by side), so one group's token costs ``attention_dp`` times it: the replica's
        recomputed tokens x ``interleave_s / prompt``, as :meth:`steps_s` prices prefilled tokens (session 35:
        the groups were divided out twice, ``attention_dp`` times too low with ``ep > 1``). Over the KV room
        it is the recomputed tokens' share of :attr:`cycle_s` (which prices every prefilled token so;
        cohort36), no longer what the whole batch takes beyond the waves: ``cycle_s - waves_s`` is about this
        less the steps vLLM's admissions save (below zero for Llama-2-7B on an A100, 60 requests of 128 +
        2,048 tokens). None when :attr:`churn` is."""
        if self.churn is None:
            return None
        return self.churn.recomputed_tokens * self.interleave_s / self.prompt

    @property
    def cycle_with_churn_s(self) -> float | None:
        """Deprecated (churn35): :attr:`cycle_s` now counts the churn, which this was for (churn32: the waves
        plus the churn; since cohort36 ``cycle_s`` is the cohort run priced to the last token, closer to
        vLLM's rules). Returns ``cycle_s``, or None when :attr:`churn` is, as before, with a
        ``DeprecationWarning``; goes in the next release."""
        import warnings

        warnings.warn("Serving.cycle_with_churn_s is deprecated: Serving.cycle_s now includes the KV "
                      "preemptions' churn (the waves alone: Serving.waves_s); this name goes in the next "
                      "release", DeprecationWarning, stacklevel=2)
        return None if self.churn_s is None else self.cycle_s

    @property
    def output_tokens_per_s(self) -> float:
        """Tokens the replica generates per second, prefills included: ``running_batch x output / wave_s``,
        the engine running its batch back to back (issue 22; before, ``batch / itl_s`` with no prefill). For a
        batch that runs at once, ``batch x output / cycle_s``; a queued batch's rate is its running batch's
        (issue 34), and a last wave that is not full brings the batch's own mean, ``batch x output /
        cycle_s``, below it."""
        return self.running_batch * self.output / self.wave_s

    @property
    def output_tokens_per_s_per_gpu(self) -> float:
        return self.output_tokens_per_s / self.gpus

    @property
    def request_s(self) -> float:
        """One request end to end: ``ttft_s + output x itl_s``."""
        return self.ttft_s + self.output * self.itl_s

    @property
    def requests_per_s(self) -> float:
        """Requests the replica completes per second running batches back to back: ``running_batch /
        wave_s`` (``batch / cycle_s`` for a batch that runs at once)."""
        return self.running_batch / self.wave_s

    @property
    def usd_per_hour(self) -> float:
        return self.price_usd_per_gpu_hour * self.gpus

    @property
    def usd_per_million_output_tokens(self) -> float:
        """The replica's decode time per generated token, priced: ``gpus x price x decode_step_s /
        running_batch``."""
        return self.usd_per_hour / 3600 * self.decode_step_s / self.running_batch * 1e6

    @property
    def usd_per_million_input_tokens(self) -> float:
        """The replica's prefill time per prompt token, priced: ``gpus x price x batch_prefill_s /
        (running_batch x prompt)``."""
        return self.usd_per_hour / 3600 * self.batch_prefill_s / (self.running_batch * self.prompt) * 1e6

    def to_frame(self):
        """A one-column DataFrame of the figures, units in the row names."""
        import pandas as pd

        rows = {"engine": self.engine, "gpus": self.gpus, "tp": self.tp, "pp": self.pp, "ep": self.ep,
                "batch": self.batch,
                "max_batch": self.max_batch, "kv_batch": self.kv_batch, "max_num_seqs": self.max_num_seqs,
                "batch_bound": self.batch_bound, "fits": self.fits, "running_batch": self.running_batch,
                "running_bound": self.running_bound,
                "waves": self.waves, "queued": self.queued, "cycle_s": self.cycle_s,
                "recompute_tokens_per_request": self.recompute_tokens_per_request,
                "churn_s": self.churn_s, "waves_s": self.waves_s,
                "last_ttft_s": self.last_ttft_s, "waves_last_ttft_s": self.waves_last_ttft_s,
                "mbu": self.mbu, "mfu": self.mfu,
                "ttft_s": self.ttft_s, "prefill_bound": self.prefill_bound,
                "decode_step_s": self.decode_step_s, "itl_s": self.itl_s, "chunk_step_s": self.chunk_step_s,
                "decode_bound": self.decode_bound,
                "decode_intensity_flops_per_byte": self.decode_intensity_flops_per_byte,
                "output_tokens_per_s": self.output_tokens_per_s,
                "output_tokens_per_s_per_gpu": self.output_tokens_per_s_per_gpu,
                "requests_per_s": self.requests_per_s,
                "usd_per_million_output_tokens": self.usd_per_million_output_tokens,
                "usd_per_million_input_tokens": self.usd_per_million_input_tokens}
        return pd.DataFrame({"value": pd.Series(rows, dtype=object)})
