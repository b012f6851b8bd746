"""What the seed audit (chapter 14) reads that does not depend on the sequence length it reads a claim at:
the :class:`Finding` every reading returns; the settings a seed leaves open and the values the audit tries
(:data:`OPEN_SETTINGS`); the seeds' own prices (:data:`SEED_PRICES_USD`, seed 000's RunPod quotes), a
server's host memory (:data:`HOST_BYTES_PER_NODE`, NVIDIA's DGX H100 datasheet) and the runs seed 000's
tables name; the seeds' own arithmetic (:func:`seed_days_at_throughput`, :func:`seed_gpu_days_usd`) and the
point a claim with no stated bound is judged at (:func:`favourable_point`); and the library look-ups at a
fixed shape (weights, model states, serving memory, QLoRA's benchmark, the catalogue, seed 002's 10B
stand-in), each a call of :mod:`~llmsizing.inference`, :mod:`~llmsizing.memory`, :mod:`~llmsizing.finetune`
or the catalogues and no formula of its own.

:mod:`llmsizing.audit_readings` holds the readings taken at :data:`~llmsizing.audit_readings.SEQ` tokens
(which :func:`~llmsizing.audit_readings.at_seq` changes) and re-exports every name here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

from .units import GB

#: Tokens each GPU accumulates per optimizer step when the host's time of a CPU-offloaded run is counted
#: (:data:`OPEN_SETTINGS`, "offload time"): 64 sequences of 4,096 tokens, chapter 13's case 1 (128 sequences
#: at 2,048 tokens, so that the sequence length does not change the number of optimizer steps). No seed names
#: a batch; this one is fixed for every offloaded time, throughput and cost, whatever verdict it gives.
OFFLOAD_TOKENS_PER_STEP = 64 * 4096

#: Which throughput is a run and which a rate (review24c M3), one rule for every throughput claim: a claim
#: whose seed names the GPUs of its run (the ``run_gpus`` column of ``data/seed_claims.csv``, dated by
#: ``as_of``) is read on that run, with the memory-fit check and, where the step fits only with CPU offload,
#: both offload readings; a per-GPU rate whose seed names no run is read per GPU on the fewest GPUs of its
#: type that hold a step without offload (a rate names no card count that must hold the step).
RUN_GPUS_RULE = ("a throughput whose seed names its run's GPUs is read on that run (memory-fit check; with "
                 "CPU offload both offload readings); a per-GPU rate that names no run, per GPU on the "
                 "fewest GPUs that hold a step without offload")

#: The one rule of the most favourable reading (issue 38): each setting a seed leaves open, and the values the
#: audit tries for it, the same for every claim. The claim is judged at the combination that gives the best
#: verdict (then the smallest factor off); where one value is always at least as favourable (the fused
#: optimizer needs no more memory than ``foreach``), only that value is tried.
OPEN_SETTINGS = {
    "sequence length": "4,096 (central) and 2,048 tokens",
    "optimizer step": "fused AdamW (never needs more memory than foreach)",
    "layout": "without and, for a run on n GPUs that does not fit, with CPU offload (ZeRO-Offload)",
    "method": "full fine-tuning and LoRA, where a seed says 'fine-tuning'",
    "efficiency": "any MFU in the calibrated band of chapter 10 (times, throughputs, costs; a LoRA run's "
                  "time and cost: any point of chapter 16's range)",
    "recomputation": "full for a memory claim (the least a step keeps); full (central) and none for a "
                     "memory ratio",
    "micro-batch": "the seed's; where it names none, one sequence (the least memory: the most favourable "
                   "reading of an absolute memory claim), and 1 and 8 for FP8's memory ratio (the one ratio "
                   "without a batch; a larger batch favours FP8)",
    "offload time": "for a time, throughput or cost of a run that fits only with CPU offload: the host's "
                    "exposed time (the CPU's Adam step, the copies) hidden, as the delayed parameter update "
                    "of Ren et al. 2021 (ZeRO-Offload, Sec. 5.2) hides it, and counted, as a step that "
                    "waits for its host does, each GPU accumulating "
                    f"{OFFLOAD_TOKENS_PER_STEP:,} tokens per optimizer step (chapter 13's case 1: 64 "
                    "sequences of 4,096 tokens)",
    "ratio of two runs": "each at its central calibrated MFU (by GPU and dtype), without the band: the one "
                         "setting not read at its most favourable",
    "unit": "a 'GB' is 10**9 bytes, as the seeds write it ('140 GB' for 70B parameters in 16 bits); a "
            "claim the seed quotes from a source that divides bytes by 1024**3 and calls that 'GB' "
            "(Unsloth's 41 GB: the gib_source column of data/seed_claims.csv) is read both as 10**9 bytes "
            "and as GiB; a GPU's memory is read both as its vendor writes it (data/gpus.csv "
            "memory_marketed_gb) and as the bytes its driver reports, in 10**9 bytes (the B200: 180 and 192)",
}

#: The tail of a reading whose claimed "GB" is read as GiB, 2**30 bytes (:data:`OPEN_SETTINGS`, "unit").
GIB_READING = "; GB read as GiB"

#: The tail of a reading of a GPU's memory in 10**9 bytes of what its driver reports, where the central
#: reading is the vendor's own "GB" (:data:`OPEN_SETTINGS`, "unit"; :func:`_gpu_memory_gb`).
DRIVER_GB_READING = "; driver's bytes in 10**9"

#: Prices per GPU-hour that seed 000 states (RunPod, as quoted there): costs are recomputed at these.
SEED_PRICES_USD = {"H100 SXM": 2.69, "A100 80GB": 1.39}

#: Host memory of one 8-GPU server, the most an offloaded run may put on the CPU side of a node: NVIDIA's DGX
#: H100 datasheet lists 2 TB of system memory (a DGX A100 has 1 or 2 TB). A run on fewer than 8 GPUs is given
#: a whole server's host memory; a run on more gets 2 TB per 8 GPUs. NVMe offload (ZeRO-Infinity) is not
#: counted.
HOST_BYTES_PER_NODE = 2e12
GPUS_PER_HOST = 8

#: Days per month and per year, to express a time claim in the seed's own unit.
DAYS_PER_YEAR = 365.25
DAYS_PER_MONTH = DAYS_PER_YEAR / 12

_L2_70, _L3_70, _L405, _M7, _L2_13, _L2_7 = ("llama-2-70b", "llama-3-70b", "llama-3.1-405b", "mistral-7b",
                                             "llama-2-13b", "llama-2-7b")
_L3_8 = "llama-3-8b"
_H100, _A100, _H200 = "H100 SXM", "A100 80GB", "H200"


@dataclass(frozen=True)
class Finding:
    """A library value together with what it takes for the claim's premise to hold.

    ``reason`` makes the claim wrong in kind (empty when there is none); ``offload`` says that the premise
    holds only with CPU offload, and how. ``reading`` names the reading judged (fused AdamW, offload, LoRA,
    the MFU). ``low`` and ``high`` are the library's range under that reading (the calibrated MFU band): the
    claim is judged at the point of the range nearest to it. ``others`` are other readings of the same claim
    (e.g. full fine-tuning against LoRA): the most favourable one is judged, and ``depends`` reports when they
    disagree."""

    value: float
    reason: str = ""
    reading: str = ""
    low: float | None = None
    high: float | None = None
    offload: str = ""
    others: tuple = ()


_COST_TABLES = (("mistral7b", _M7, 1e11, (1, 2, 4)), ("llama2-13b", _L2_13, 1e11, (1, 4, 8)),
                ("llama2-70b", _L2_70, 1e12, (8, 16, 32, 64)))
#: seed 000's GPU recommendation matrix: (id part, model, tokens, GPU, count)
_MATRIX = (("mistral7b-50b-h100", _M7, 5e10, _H100, 2), ("mistral7b-50b-a100", _M7, 5e10, _A100, 1),
           ("mistral7b-300b-h100", _M7, 3e11, _H100, 4), ("mistral7b-300b-a100", _M7, 3e11, _A100, 8),
           ("llama2-7b-100b-h100", _L2_7, 1e11, _H100, 1), ("llama2-7b-100b-a100", _L2_7, 1e11, _A100, 2),
           ("llama2-13b-100b-h100", _L2_13, 1e11, _H100, 4), ("llama2-13b-100b-a100", _L2_13, 1e11, _A100, 8),
           ("llama2-70b-1t-h100", _L2_70, 1e12, _H100, 32), ("llama2-70b-1t-a100", _L2_70, 1e12, _A100, 64),
           ("405b-15t-h100", _L405, 15e12, _H100, 256), ("405b-15t-a100", _L405, 15e12, _A100, 512))


# ----------------------------------------------------------------------------- the seeds' own arithmetic
SECONDS_PER_DAY = 86_400


def seed_days_at_throughput(tokens: float, tokens_per_s: float) -> float:
    """Days a run of ``tokens`` takes at a throughput of ``tokens_per_s`` (all its GPUs together): tokens /
    throughput / 86,400 s. The arithmetic seed 000's cost tables skip: each row gives a throughput and a
    number of days for the same run (Mistral 7B, 100B tokens on one H100: 3,500 tokens/s and 262 days), and
    the one does not follow from the other (chapter 14)."""
    from ._validate import check_number

    tokens = check_number("tokens", tokens, minimum=0.0, allow_equal=False)
    tokens_per_s = check_number("tokens_per_s", tokens_per_s, minimum=0.0, allow_equal=False)
    return tokens / tokens_per_s / SECONDS_PER_DAY


def seed_gpu_days_usd(n_gpus: int, days: float, gpu: str = _H100) -> float:
    """USD of ``n_gpus`` GPUs rented for ``days`` days at the price per GPU-hour seed 000 states for ``gpu``
    (:data:`SEED_PRICES_USD`): GPU-days x 24 hours x price. Seed 000's FAQ answer "8 GPUs for 50 days is
    cheaper than 1 GPU for 400 days" compares two runs of 400 GPU-days each: at one price they cost the same
    (chapter 14)."""
    from ._validate import check_choice, check_int, check_number

    n_gpus = check_int("n_gpus", n_gpus, minimum=1)
    days = check_number("days", days, minimum=0.0)
    check_choice("gpu", gpu, tuple(SEED_PRICES_USD))
    return n_gpus * days * 24 * SEED_PRICES_USD[gpu]


def favourable_point(claimed: float, ranges) -> float:
    """The point a claim with no stated bound is judged at: in each reading's ``(low, high)`` range the point
    nearest ``claimed``, then of those the nearest to it on a log scale: chapter 14's most favourable reading
    of a new claim, as its exercise 1 applies it (:func:`llmsizing.audit.audit_table` ranks the seeds'
    readings by verdict kind first, which picks the same point unless a reading needs CPU offload)."""
    from ._validate import check_number

    claimed = check_number("claimed", claimed, minimum=0.0, allow_equal=False)
    pairs = list(ranges)
    if not pairs:
        raise ValueError("ranges must hold at least one (low, high) pair")
    points = []
    for i, (lo, hi) in enumerate(pairs):
        lo = check_number(f"ranges[{i}] low", lo, minimum=0.0, allow_equal=False)
        hi = check_number(f"ranges[{i}] high", hi, minimum=0.0, allow_equal=False)
        if lo > hi:
            raise ValueError(f"ranges[{i}] must be (low, high) with low <= high, got ({lo}, {hi})")
        points.append(min(max(claimed, lo), hi))
    return min(points, key=lambda x: abs(math.log(claimed / x)))


# ----------------------------------------------------------------------------- look-ups at no sequence length
def _qlora_fits(model: str) -> float:
    """QLoRA's per-GPU memory (GB) in the configuration of seed 004's quoted benchmark (:func:`_qlora`)."""
    return _qlora(model).total_bytes / GB


def _weights_gb(model: str, dtype: str) -> float:
    from .inference import weights_bytes

    return weights_bytes(model, dtype) / GB


def _states(model: str | None = None, n_params: int | None = None, parallel=None):
    from .memory import model_states, model_states_for_params

    if model is not None:
        return model_states(model, parallel=parallel)
    return model_states_for_params(n_params, parallel=parallel)


def _stage_params_billion(model: str, parallel) -> float:
    from .memory import stage_params

    return max(stage_params(model, parallel)) / 1e9


def _serving(model: str, batch: int, context: int):
    from .inference import inference_memory

    return inference_memory(model, batch=batch, context=context)


def _gpu(name: str):
    from .catalog import get_gpu

    return get_gpu(name)


def _gpu_memory_gb(name: str) -> Finding:
    """A GPU's memory as its vendor writes it (``memory_marketed_gb``: the central reading) and, as the other
    reading of the unit rule, the bytes its driver reports in the seeds' GB of 10**9 bytes (``memory_bytes``).
    They differ where the vendor's "GB" is binary: a B200 is sold as 180 GB and reports 179.1 GiB, 192.3e9
    bytes (chapter 14)."""
    g = _gpu(name)
    return Finding(g.memory_marketed_gb, others=(Finding(g.memory_bytes / 1e9, reading="catalogue"
                                                         + DRIVER_GB_READING),))


def _model(name: str):
    from .catalog import get_model

    return get_model(name)


def _one_way_gbps(gpu: str) -> float:
    from .hardware import link_bandwidth_one_way_gbps

    return link_bandwidth_one_way_gbps(gpu)


def _bytes(dtype: str) -> float:
    from .precision import bytes_per_element

    return bytes_per_element(dtype)


def _par(**kw):
    from .parallel import Parallel

    return Parallel(**kw)


def _serving_factor(model: str, batch: int, context: int) -> float:
    r = _serving(model, batch, context)
    return r.total_bytes / r.weights_bytes


@cache
def ten_b_stand_in():
    """Seed 002's 10B model: Llama 2 13B's blocks (h = 5,120) cut to 31 layers, 10.16B parameters (the
    catalogue has no 10B model; the seed gives none)."""
    import dataclasses

    return dataclasses.replace(_model(_L2_13), name="llama-2-13b-31-layers", layers=31)


def _qlora(model: str):
    """QLoRA (rank 16, all linear layers) of one 2,048-token sequence with gradient checkpointing: the
    configuration of seed 004's quoted benchmark (chapter 16)."""
    from .finetune import finetune_memory

    return finetune_memory(model, method="qlora", batch=1, seq=2048, recompute="full")
