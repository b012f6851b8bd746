"""Hardware arithmetic (chapter 6, "Hardware"): peaks, ridge points, the decode roofline, the GPU comparison
and the calibrated kernel efficiency; and the host's CPU Adam rate (chapter 7). The links themselves (one-way
bandwidths, nodes, collectives) are :mod:`llmsizing.network`'s; ``link_bandwidth_one_way_gbps`` is still
importable from here.

Units follow :mod:`llmsizing.units`: decimal GB/s, and every bandwidth says its direction.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ._validate import check_choice, check_int, check_number
from .network import INTER_NODE_GBPS_PER_GPU, link_bandwidth_one_way_gbps  # noqa: F401 (chapter 6's names)


# ================================================================== chapter 6: peaks, ridge points, rooflines

#: The compute formats the catalogue has a tensor-core peak for: ``bf16`` and ``fp16`` (FP32 accumulation),
#: ``fp16-acc16`` (FP16 with FP16 accumulation, faster on GeForce cards only) and ``fp8`` (absent on the A10,
#: the A100s, the V100 and the MI250X). See :func:`dense_tflops` for what each reads and for a GPU without
#: BF16.
COMPUTE_DTYPES = ("bf16", "fp16", "fp16-acc16", "fp8", "fp4")

#: Datasheets quote tensor-core peaks "with sparsity": 2:4 structured sparsity (two of every four weights
#: zero, NVIDIA Ampere whitepaper 2020) skips the zeros and doubles the figure. Training uses dense matrices.
SPARSITY_FACTOR = 2.0


def effective_dtype(gpu, dtype: str = "bf16") -> str:
    """The format :func:`dense_tflops` actually prices ``dtype`` at on ``gpu``: ``dtype`` itself, except
    ``"bf16"`` on a GPU without BF16 tensor cores (the V100), which is ``"fp16"`` (see :func:`dense_tflops`).
    Tables that sweep the catalogue report it, so that a row priced in FP16 says so."""
    from .catalog import get_gpu

    g = get_gpu(gpu)
    dtype = check_choice("dtype", dtype, COMPUTE_DTYPES)
    return "fp16" if dtype == "bf16" and not g.has_bf16 else dtype


def check_recipe_runs_on(precision: str, gpu):
    """Refuse a recipe whose matrix multiplies the GPU has no tensor cores for: an FP8 recipe
    (:data:`~llmsizing.precision.RECIPES`, ``fp8-mixed`` or ``fp8-deepseek``) on a GPU without an FP8 peak
    (the A100s, the A10, the V100, the MI250X). Every answer that takes a recipe and a GPU calls it (issue
    33), so an FP8 run on an A100 is an error naming ``precision``, not a memory figure that "fits"."""
    from .catalog import get_gpu
    from .precision import RECIPES, check_recipe

    recipe = RECIPES[check_recipe("precision", precision)]
    g = get_gpu(gpu)
    if recipe.compute_dtype == "fp4" and g.fp4_dense_tflops is None:
        raise ValueError(f"precision={precision!r} runs its matrix multiplies in FP4, and the {g.name} has "
                         "no FP4 tensor cores (data/gpus.csv fp4_dense_tflops): use 'mxfp8' or 'fp8-mixed'")
    if recipe.fp8 and g.fp8_dense_tflops is None:
        raise ValueError(f"precision={precision!r} runs its matrix multiplies in FP8, and the {g.name} has "
                         "no FP8 tensor cores: use a 16-bit recipe ('bf16-mixed', 'bf16-mixed-fp32-grads') "
                         "on it")
    return g


def dense_tflops(gpu, dtype: str = "bf16") -> float:
    """The GPU's dense tensor-core peak in ``dtype``, TFLOP/s (10**12 FLOP/s), as the catalogue stores it
    (``data/gpus.csv``: datasheet figures without sparsity). Source: each GPU's datasheet (the catalogue's
    ``spec_source``). Taught in chapter 6.

    * ``"bf16"``: the ``bf16_dense_tflops`` column (FP32 accumulation).
    * ``"fp16"``: ``fp16_dense_tflops`` (FP32 accumulation), or the BF16 rate where that column is empty
      (every GPU but the V100 runs FP16 and BF16 at the same rate).
    * ``"fp16-acc16"``: FP16 with FP16 accumulation, ``fp16_acc16_dense_tflops``, or the FP16 rate where that
      column is empty. Only GeForce cards differ: the RTX 4090 does 330.3 against 165.2 with FP32
      accumulation. Mixed-precision training accumulates in FP32, so the book's training times never use it.
    * ``"fp8"``: ``fp8_dense_tflops``; a GPU without FP8 raises ``ValueError`` naming ``dtype``.
    * ``"fp4"``: ``fp4_dense_tflops`` (NVFP4/MXFP4 on Blackwell and the MI355X; issue 36); a GPU without FP4
      raises ``ValueError`` naming ``dtype``.

    **A GPU without BF16** (the V100): ``"bf16"`` returns its FP16 rate. The book's default recipe,
    ``bf16-mixed``, runs there as FP16 mixed precision with a loss scale: the same bytes per parameter and per
    activation, the same FLOPs, at the FP16 tensor-core rate. So every function that sweeps the catalogue
    (cost by GPU, the GPU comparison, the planner, serving cost, the charts) prices the V100 in FP16 rather
    than failing; the tables say so (:func:`effective_dtype`). Ask for ``"fp16"`` to say it explicitly."""
    from .catalog import get_gpu

    g = get_gpu(gpu)
    dtype = check_choice("dtype", dtype, COMPUTE_DTYPES)
    if dtype == "fp8":
        peak = g.fp8_dense_tflops
    elif dtype == "fp4":
        peak = g.fp4_dense_tflops
    elif dtype == "bf16" and g.has_bf16:
        peak = g.bf16_dense_tflops
    elif dtype == "fp16-acc16" and g.fp16_acc16_dense_tflops is not None:
        peak = g.fp16_acc16_dense_tflops
    else:                                           # fp16, fp16-acc16 at the fp16 rate, bf16 without BF16
        peak = g.fp16_rate_tflops
    if peak is None:
        raise ValueError(f"dtype {dtype!r}: the {g.name} has no {dtype.upper()} tensor cores; "
                         f"use one of bf16, fp16")
    return float(peak)


#: The GPUs whose tensor cores have no 2:4 structured sparsity (the V100, before Ampere; the MI250X, before
#: CDNA 3), one row each with its source: ``data/gpu_structured_sparsity.csv``. Every other GPU has it.
GPU_STRUCTURED_SPARSITY_CSV = Path(__file__).resolve().parents[2] / "data" / "gpu_structured_sparsity.csv"


@lru_cache(maxsize=None)
def _structured_sparsity() -> dict[str, bool]:
    import csv

    with open(GPU_STRUCTURED_SPARSITY_CSV, newline="") as fh:
        return {r["gpu"]: r["structured_sparsity"].strip().lower() == "true" for r in csv.DictReader(fh)}


def has_structured_sparsity(gpu) -> bool:
    """Whether ``gpu``'s tensor cores skip the zeros of 2:4 structured sparsity, so that its datasheet prints
    a "with sparsity" peak: False for the rows of ``data/gpu_structured_sparsity.csv`` that say so (the V100,
    the MI250X), True otherwise. Chapter 6."""
    from .catalog import get_gpu

    return _structured_sparsity().get(get_gpu(gpu).name, True)


def sparse_tflops(gpu, dtype: str = "bf16") -> float:
    """The "with sparsity" figure a datasheet prints first: :func:`dense_tflops` x :data:`SPARSITY_FACTOR`
    (2:4 structured sparsity). Only a matrix pruned to that pattern reaches it; the book never uses it for
    training or serving time. ValueError naming ``gpu`` for a GPU without structured sparsity
    (:func:`has_structured_sparsity`), which has no such figure. Taught in chapter 6."""
    if not has_structured_sparsity(gpu):
        from .catalog import get_gpu

        raise ValueError(f"gpu={get_gpu(gpu).name!r} has no 2:4 structured sparsity "
                         "(data/gpu_structured_sparsity.csv), so no 'with sparsity' peak; use dense_tflops")
    return SPARSITY_FACTOR * dense_tflops(gpu, dtype)


def ridge_point_flops_per_byte(gpu, dtype: str = "bf16") -> float:
    """The roofline's ridge point: peak dense FLOP/s divided by HBM bytes/s (Williams, Waterman and Patterson
    2009, "Roofline"). A kernel that does fewer FLOPs per byte it moves than this is memory-bound on this GPU;
    more, compute-bound. H100 SXM in bf16: 989.4e12 / 3.35e12 = 295 FLOP/byte. Taught in chapter 6."""
    from .catalog import get_gpu

    g = get_gpu(gpu)
    hbm = check_number("memory_bandwidth_gbps", g.memory_bandwidth_gbps, allow_equal=False)
    return dense_tflops(g, dtype) * 1e12 / (hbm * 1e9)


#: Memory interfaces as GPUs report them (bus width, memory clock), one row per GPU with its source and as-of
#: date: ``data/gpu_memory_interface.csv``. Only the B200's is there (pytorch/ao PR 4002).
GPU_MEMORY_INTERFACE_CSV = Path(__file__).resolve().parents[2] / "data" / "gpu_memory_interface.csv"


@dataclass(frozen=True)
class MemoryInterface:
    """A GPU's memory interface as the GPU reports it: ``bus_bits`` (the CUDA driver's ``memoryBusWidth``)
    and ``clock_mhz`` (nvidia-smi's double-data-rate memory clock), beside ``quoted_gbps``, the bandwidth the
    vendor quotes for it (GB/s; what chapters 0 and 6 set against the interface), with the row's ``source``
    and ``as_of`` (``data/gpu_memory_interface.csv``). Chapter 6."""

    gpu: str
    bus_bits: int
    clock_mhz: float
    source: str
    as_of: str
    quoted_gbps: float = 0.0


@lru_cache(maxsize=None)
def _memory_interfaces() -> dict[str, MemoryInterface]:
    import csv

    with open(GPU_MEMORY_INTERFACE_CSV, newline="") as fh:
        return {r["gpu"]: MemoryInterface(r["gpu"], int(r["memory_bus_bits"]), float(r["memory_clock_mhz"]),
                                          r["source"], r["as_of"], float(r["quoted_gbps"]))
                for r in csv.DictReader(fh)}


def memory_interface(gpu) -> MemoryInterface:
    """``gpu``'s row of ``data/gpu_memory_interface.csv`` (a catalogue name or a GPU). ValueError naming
    ``gpu`` and the GPUs that have one if it has none. Chapter 6."""
    from .catalog import get_gpu

    name = get_gpu(gpu).name
    rows = _memory_interfaces()
    if name not in rows:
        raise ValueError(f"gpu={name!r} has no memory interface in data/gpu_memory_interface.csv; "
                         f"known: {', '.join(rows)}")
    return rows[name]


def memory_interface_gbps(gpu_or_bus_bits, clock_mhz: float | None = None) -> float:
    """The most a memory interface carries, GB/s: ``bus_bits / 8`` bytes per transfer at two transfers per
    clock (double data rate). Either a GPU (its :func:`memory_interface`) or the two numbers ``bus_bits,
    clock_mhz``. The shipping B200: 960 B x 7.992 GT/s = 7,672 GB/s (chapter 6), the catalogue's
    ``memory_bandwidth_gbps`` of 7,700 rounded to 0.1 TB/s."""
    if clock_mhz is None:
        mi = memory_interface(gpu_or_bus_bits)
        bus_bits, clock_mhz = mi.bus_bits, mi.clock_mhz
    else:
        bus_bits = gpu_or_bus_bits
    bits = check_int("bus_bits", bus_bits)
    mhz = check_number("clock_mhz", clock_mhz, allow_equal=False)
    return bits / 8 * 2 * mhz * 1e6 / 1e9


#: Old names of the B200's interface (now ``data/gpu_memory_interface.csv``), kept one release.
_DEPRECATED_B200 = {"B200_MEMORY_BUS_BITS": "bus_bits", "B200_MEMORY_CLOCK_MHZ": "clock_mhz"}


def __getattr__(name: str):
    if name in _DEPRECATED_B200:
        import warnings

        field = _DEPRECATED_B200[name]
        warnings.warn(f"llmsizing.hardware.{name} is deprecated: use memory_interface('B200').{field} "
                      "(data/gpu_memory_interface.csv)", DeprecationWarning, stacklevel=2)
        return getattr(memory_interface("B200"), field)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def matmul_intensity_flops_per_byte(m: int, k: int, n: int, bytes_per_element: float = 2) -> float:
    """Arithmetic intensity of ``(m x k) @ (k x n)``: ``2mkn`` FLOPs over the bytes of reading both inputs and
    writing the output once, ``bytes_per_element x (mk + kn + mn)`` (the scaling-book's "Rooflines" chapter;
    Williams et al. 2009). With ``m`` tokens against a ``k x n`` weight, it is about ``m`` FLOP/byte in bf16
    while ``m`` is much smaller than ``k`` and ``n``: that is why decoding a few tokens is memory-bound.
    Taught in chapter 6."""
    m, k, n = check_int("m", m), check_int("k", k), check_int("n", n)
    b = check_number("bytes_per_element", bytes_per_element, minimum=0.125, maximum=64)  # one bit to 64 bytes
    return _intensity(m, k, n, b)


def _intensity(m: int, k: int, n: int, b: float) -> float:
    """:func:`matmul_intensity_flops_per_byte` on checked ints and a checked float ``b`` (inner loops)."""
    return 2 * m * k * n / (b * (m * k + k * n + m * n))


def model_flops_utilization(achieved_tflops: float, gpu, dtype: str = "bf16") -> float:
    """MFU: model FLOP/s achieved per GPU over the GPU's dense peak (Chowdhery et al. 2022, PaLM, Sec. 4.1;
    App. B for the FLOP count).
    "Model" FLOPs count the model's arithmetic (6N per token plus attention), not recomputation. Llama 3
    reports 380-430 TFLOP/s per H100 in bf16, 38-43% MFU (Dubey et al. 2024, Table 4). An ``achieved_tflops``
    above the dense peak raises ``ValueError`` (it was probably measured against the sparse figure). Taught in
    chapter 6."""
    peak = dense_tflops(gpu, dtype)
    achieved = check_number("achieved_tflops", achieved_tflops, maximum=peak)
    return achieved / peak


@dataclass(frozen=True)
class Roofline:
    """One decode step on the roofline (:func:`decode_step_roofline`): what it reads from HBM, what it
    computes, and the two lower bounds on its time. The step can run no faster than the larger of them.
    ``bytes_read`` is what the step READS (the lookup tables' gathered rows, not the tables);
    ``resident_bytes`` is what the GPU must HOLD for it (every weight and the batch's KV cache): use it to ask
    whether a batch fits."""

    model: str
    gpu: str
    batch: int
    context: int
    bytes_read: float
    flops: float
    memory_time_s: float
    compute_time_s: float
    ridge_flops_per_byte: float
    resident_bytes: float = 0.0

    @property
    def time_s(self) -> float:
        """The roofline's lower bound on the step: ``max(memory_time_s, compute_time_s)``."""
        return max(self.memory_time_s, self.compute_time_s)

    @property
    def intensity_flops_per_byte(self) -> float:
        """FLOPs per byte read: compare with :attr:`ridge_flops_per_byte`."""
        return self.flops / self.bytes_read

    @property
    def bound(self) -> str:
        """``"memory"`` or ``"compute"``: which bound is the larger."""
        return "memory" if self.memory_time_s >= self.compute_time_s else "compute"

    @property
    def tokens_per_s(self) -> float:
        """Upper bound on generated tokens per second: ``batch / time_s``."""
        return self.batch / self.time_s


def _decode_terms(model, gpu, context, weights, kv_cache, compute):
    """(model, gpu, resident weight bytes, KV bytes per sequence, FLOPs per token, peak FLOP/s, HBM
    bytes/s)."""
    from .catalog import get_gpu, resolve_model
    from .flops import forward_flops_per_token
    from .inference import kv_cache_bytes_per_token, kv_cached_tokens, weights_bytes
    from .precision import KV_DTYPES, WEIGHT_DTYPES

    m = resolve_model(model)
    g = get_gpu(gpu)
    context = check_int("context", context)
    check_choice("weights", weights, WEIGHT_DTYPES)
    check_choice("kv_cache", kv_cache, KV_DTYPES)
    check_choice("compute", compute, COMPUTE_DTYPES)
    cached = kv_cached_tokens(m, context)
    w = weights_bytes(m, weights)
    kv_seq = kv_cache_bytes_per_token(m, kv_cache) * cached
    flops_tok = forward_flops_per_token(m, seq=context)    # (the window caps the keys inside, as in training)
    peak = dense_tflops(g, compute) * 1e12
    hbm = check_number("memory_bandwidth_gbps", g.memory_bandwidth_gbps, allow_equal=False) * 1e9
    return m, g, w, kv_seq, flops_tok, peak, hbm


def decode_step_roofline(model, gpu, *, batch: int, context: int, weights: str = "bf16",
                         kv_cache: str = "bf16", compute: str = "bf16") -> Roofline:
    """One decode step of ``batch`` sequences that each hold ``context`` tokens, on the roofline.

    Bytes read: the weights the step reads, the same bytes as the serving model's step
    (:func:`~llmsizing.inference.decode_weight_bytes_read`: every weight once, except the untied input
    embedding and the other lookup tables, of which the step gathers one row per sequence), plus each
    sequence's KV cache (:func:`~llmsizing.inference.kv_cache_bytes_per_token` x cached tokens, at most the
    sliding window). Llama 3 8B in bf16 at batch 1 reads 16,060,522,496 - 128,256 x 4,096 x 2 + 4,096 x 2 B
    of weights; a tied model reads all of its weights. ``resident_bytes`` is what the GPU holds instead: all
    the weights (:func:`~llmsizing.inference.weights_bytes`) and the batch's KV cache. FLOPs: ``batch`` x
    :func:`~llmsizing.flops.forward_flops_per_token` at ``context``: the new token attends to every cached
    position, at most the sliding window (the same cap as prefill and training). Time bounds: bytes / HBM
    bandwidth and FLOPs / the dense peak in ``compute`` (Williams et al. 2009; Pope et al. 2022, "Efficiently
    Scaling Transformer Inference"). Activations, kernel launches and communication are ignored: a lower
    bound. Taught in chapter 6; serving builds on it."""
    from .inference import decode_weight_bytes_read

    batch = check_int("batch", batch)
    m, g, w, kv_seq, flops_tok, peak, hbm = _decode_terms(model, gpu, context, weights, kv_cache, compute)
    read = decode_weight_bytes_read(m, batch, weights) + batch * kv_seq
    flops = batch * flops_tok
    return Roofline(m.name, g.name, batch, check_int("context", context), read, flops, read / hbm,
                    flops / peak, peak / hbm, w + batch * kv_seq)


def decode_compute_bound_batch(model, gpu, *, context: int, weights: str = "bf16", kv_cache: str = "bf16",
                               compute: str = "bf16") -> float | None:
    """The batch at which a decode step (:func:`decode_step_roofline`) reaches the ridge point, or ``None`` if
    it never does. A step of ``B`` sequences reads ``W0 + B (K + r)`` bytes: ``W0`` the weights less the
    lookup tables (the untied input embedding, learned positions), ``r`` the bytes of one row of each table
    (:func:`~llmsizing.inference.lookup_table_rows`), ``K`` the KV bytes per sequence. Its intensity is
    ``B F / (W0 + B (K + r))`` (``F`` FLOPs per token); setting it equal to the ridge ``R`` gives
    ``B = R W0 / (F - R (K + r))``. Once ``B`` passes a table's row count the table is read whole: its
    ``rows x row bytes`` move into ``W0`` and its row out of ``r``, and the same equation is solved again on
    that stretch (with every table whole it is ``B = R W / (F - R K)``, ``W`` all the weights). The
    intensity only grows with ``B``, so the first stretch that holds its own solution holds the answer, and
    no batch is enough once the KV cache alone, ``F / K`` FLOP/byte, is below ``R``. Taught in chapter 6."""
    from .inference import lookup_table_rows

    m, _, w, kv_seq, flops_tok, peak, hbm = _decode_terms(model, gpu, context, weights, kv_cache, compute)
    ridge = peak / hbm
    tables = sorted(lookup_table_rows(m, weights))
    fixed = w - sum(rows * row for rows, row in tables)            # W0: the bytes read whatever the batch
    per_seq = kv_seq + sum(row for _, row in tables)               # K + r
    lo = 0
    for rows, row in tables + [(None, 0.0)]:
        denom = flops_tok - ridge * per_seq
        if denom > 0:
            b = ridge * fixed / denom
            if b >= lo and (rows is None or b <= rows):
                return b
        if rows is not None:                                       # past this table: it is read whole
            fixed += rows * row
            per_seq -= row
            lo = rows
    return None


def decode_resident_batch_limit(model, gpu, *, context: int, weights: str = "bf16",
                                kv_cache: str = "bf16") -> float:
    """The batch at which a decode step's :attr:`Roofline.resident_bytes` (all the weights and every
    sequence's KV cache) fill one ``gpu``'s memory: ``(capacity - W) / K``, ``W`` the weights' bytes and
    ``K`` one sequence's KV bytes (at most the sliding window). Real-valued: ``floor`` of it sequences fit,
    one more does not. Raises ``ValueError`` naming ``weights`` if the weights alone exceed the GPU. No
    allowance for activations or the allocator (chapter 3 adds those): the roofline's own bound. Chapter 6's
    decode figure shades from here."""
    m, g, w, kv_seq, *_ = _decode_terms(model, gpu, context, weights, kv_cache, "bf16")
    room = g.memory_bytes - w
    if room <= 0:
        raise ValueError(f"weights: {m.name}'s {weights} weights ({w / 2**30:,.1f} GiB) exceed one {g.name} "
                         f"({g.memory_bytes / 2**30:,.1f} GiB); choose a smaller format or a larger GPU")
    return room / kv_seq


def decode_resident_batch(model, gpu, *, context: int, weights: str = "bf16", kv_cache: str = "bf16") -> int:
    """The most ``context``-token sequences one ``gpu`` holds for a decode step: the largest batch whose
    :attr:`Roofline.resident_bytes` (all the weights, each sequence's KV cache) fit its whole memory, the
    floor of :func:`decode_resident_batch_limit`; 0 when the weights leave no room for one. An upper bound (no
    CUDA context, no activations). Raises ``ValueError`` naming ``model`` for a model that caches nothing
    per sequence (the memory bounds no batch). Chapter 6, exercise 1 (Llama 3 8B on an H100: 129)."""
    m, g, w, kv_seq, *_ = _decode_terms(model, gpu, context, weights, kv_cache, "bf16")
    if kv_seq <= 0:
        raise ValueError(f"model: {m.name} has no KV cache (no attention layer): memory bounds no batch")
    b = max(int((g.memory_bytes - w) // kv_seq), 0)
    while b > 0 and w + b * kv_seq > g.memory_bytes:     # the quotient's float noise, either way
        b -= 1
    while w + (b + 1) * kv_seq <= g.memory_bytes:
        b += 1
    return b


#: Columns of :func:`gpu_comparison`, units in the names.
GPU_COMPARISON_COLUMNS = ("memory_gib", "hbm_tbps", "bf16_dense_tflops", "bf16_sparse_tflops",
                          "ridge_flops_per_byte", "link", "link_one_way_gbps", "pair_one_way_gbps", "dtype")


def gpu_comparison(gpus=None):
    """A DataFrame, one row per GPU (default: the whole catalogue): capacity as the driver reports it (GiB),
    HBM bandwidth (TB/s, decimal), the dense and "with sparsity" bf16 peaks (``<NA>`` on a GPU without
    structured sparsity: :func:`has_structured_sparsity`), the bf16 ridge point, and the
    link to node-mates, one way (GB/s): ``link_one_way_gbps`` is the GPU's total (all its links at once),
    ``pair_one_way_gbps`` what two GPUs of its default node reach between them (nominal, before the achievable
    fraction: :func:`~llmsizing.network.group_link` with ``size=2``). They differ on a mesh: an MI300X has
    7 x 64 GB/s in all but one 64 GB/s link to each peer. ``dtype`` says which format the peaks are in:
    ``"bf16"``, or ``"fp16"`` on a GPU without BF16 (the V100; :func:`dense_tflops`). Taught in chapter 6."""
    import pandas as pd

    from .catalog import list_gpus, resolve_gpus
    from .network import get_node, group_link

    rows = {}
    for g in resolve_gpus(list_gpus() if gpus is None else gpus, example='["H100 SXM", "B200"]'):
        rows[g.name] = {"memory_gib": g.memory_gib, "hbm_tbps": g.memory_bandwidth_gbps / 1000,
                        "bf16_dense_tflops": dense_tflops(g),
                        "bf16_sparse_tflops": sparse_tflops(g) if has_structured_sparsity(g) else None,
                        "ridge_flops_per_byte": ridge_point_flops_per_byte(g), "link": g.link,
                        "link_one_way_gbps": link_bandwidth_one_way_gbps(g),
                        "pair_one_way_gbps": group_link(g, get_node(gpu=g), size=2).nominal_gbps,
                        "dtype": effective_dtype(g)}
    df = pd.DataFrame.from_dict(rows, orient="index", columns=list(GPU_COMPARISON_COLUMNS)).rename_axis("gpu")
    return df.astype({"bf16_sparse_tflops": "Float64"})      # <NA>: no such peak (does not apply)


# ========================================================================== chapter 10: the kernel efficiency
@dataclass(frozen=True)
class KernelEfficiency:
    """A row of ``data/kernel_efficiency.csv``: the share of the dense peak a GPU generation's kernels reach
    while a training step computes (hardware FLOPs, recomputation included), fitted on the published runs
    with a known layout (``tools/calibrate.py``; chapter 10 shows the residuals)."""

    generation: str
    gpus: tuple
    dtype: str
    kernel_efficiency: float
    runs: str
    source: str
    #: the same runs' one-number equivalent (:func:`~llmsizing.calibration.run_flat_efficiency`)
    flat_efficiency: float | None = None
    name: str = ""              # the vendor's name ("Hopper", "CDNA 3"), with its source and as-of date
    name_source: str = ""
    name_as_of: str = ""


def _kernel_rows(text: str | None = None) -> list[KernelEfficiency]:
    """The rows of ``data/kernel_efficiency.csv`` read afresh, or of ``text`` in its layout (a refit:
    ``tools/physics_ab.py``); the library reads them once, through :func:`_kernel_table`."""
    import csv
    import io

    text = (Path(__file__).resolve().parents[2] / "data" / "kernel_efficiency.csv").read_text() \
        if text is None else text
    return [KernelEfficiency(r["generation"], tuple(x.strip() for x in r["gpus"].split(";")), r["dtype"],
                             float(r["kernel_efficiency"]), r["runs"], r["source"],
                             float(r["flat_efficiency"]) if r.get("flat_efficiency") else None,
                             r.get("name", ""), r.get("name_source", ""), r.get("name_as_of", ""))
            for r in csv.DictReader(io.StringIO(text))]


@lru_cache(maxsize=None)
def _kernel_table() -> tuple[KernelEfficiency, ...]:
    """The rows of ``data/kernel_efficiency.csv``, read once per process: every reader in this module."""
    return tuple(_kernel_rows())


def generation_name(generation: str) -> str:
    """The name range notes and warnings print for GPU ``generation`` (``"cdna3"`` -> ``"CDNA 3"``): column
    ``name`` of ``data/kernel_efficiency.csv`` (sourced there); a key no row names is its own name."""
    return next((r.name for r in _kernel_table() if r.generation == generation and r.name), generation)


def kernel_efficiency_row(gpu, dtype: str = "bf16") -> KernelEfficiency:
    """The calibrated row for ``gpu`` in ``dtype`` (``fp16`` uses ``bf16``'s). A GPU no row names gets the
    median over the generations calibrated in that dtype (generation ``"uncalibrated"``): say so where it
    matters (:func:`~llmsizing.time_cost.training_time` warns).

    A generation with no calibration run has a stand-in row (``runs`` blank; ``tools/calibrate.py``): the
    lower median of the calibrated generations of that dtype, times the generation's best measured GEMM's
    share of its peak over theirs where both were measured (``data/gemm_efficiency.csv``, Bekman's search).
    Blackwell FP8 is one (issue 35 left NVIDIA's NeMo / Megatron-Bridge tables out, its only runs): Hopper
    FP8's median times B200's best FP8 GEMM share over H100's (0.763 / 0.709). The row's note, rewritten at
    each refit, says how far off that may be: the same transfer checked between the calibrated BF16
    generations, the spread of the base's fitted and held-out runs, and what the BF16 GEMM ratio would give
    (at the 2026-11-30 fit: within 5% between Ampere and Hopper; Hopper FP8's held-out runs 11-22% below its
    median; 10% lower): read it as good to about -25% / +10%."""
    from .catalog import get_gpu

    g = get_gpu(gpu)
    dtype = check_choice("dtype", dtype, COMPUTE_DTYPES)
    key = "fp8" if dtype in ("fp8", "fp4") else "bf16"       # FP4: FP8's calibration (no FP4 run yet)
    return _kernel_row(g.name, key)


@lru_cache(maxsize=512)
def _kernel_row(name: str, key: str) -> KernelEfficiency:
    rows = _kernel_table()
    for r in rows:
        if name in r.gpus and r.dtype == key:
            return r
    same = sorted(r.kernel_efficiency for r in rows if r.dtype == key and r.runs)
    same = same or sorted(r.kernel_efficiency for r in rows if r.dtype == key)
    flat = sorted(r.flat_efficiency for r in rows if r.dtype == key and r.runs and r.flat_efficiency)
    return KernelEfficiency("uncalibrated", (name,), key, same[len(same) // 2], "",
                            f"median of the calibrated {key} generations",
                            flat[len(flat) // 2] if flat else None)


def kernel_efficiency_table():
    """``data/kernel_efficiency.csv`` as a DataFrame, one row per GPU generation and dtype: its GPUs, the
    kernel efficiency, the number of published runs it was fitted on (0 for a stand-in) and ``calibrated``
    (whether any run was). Shown in chapter 10."""
    import pandas as pd

    return pd.DataFrame([{"generation": r.generation, "dtype": r.dtype, "gpus": ", ".join(r.gpus),
                          "kernel_efficiency": r.kernel_efficiency, "runs": int(r.runs or 0),
                          "calibrated": bool(r.runs)} for r in _kernel_table()])


def kernel_efficiency(gpu, dtype: str = "bf16") -> float:
    """The default share of the dense peak a training step's kernels reach on ``gpu`` in ``dtype``
    (:func:`kernel_efficiency_row`): what :func:`~llmsizing.layouts.step_time` uses when it is given none."""
    return kernel_efficiency_row(gpu, dtype).kernel_efficiency


def flat_kernel_efficiency(gpu, dtype: str = "bf16") -> float:
    """The calibrated share of the dense peak at which *every* hardware FLOP of a step would take the compute
    time the step model gives (its attention and GEMM-shape terms, :mod:`llmsizing.kernels`, folded into one
    number; ``data/kernel_efficiency.csv``'s ``flat_efficiency``): for models that charge all FLOPs at one
    rate. :func:`~llmsizing.finetune_time.finetune_time` used it until issue 34's round 4 and now prices its
    step with the kernel terms too. :func:`kernel_efficiency` is the step model's scale."""
    row = kernel_efficiency_row(gpu, dtype)
    return row.flat_efficiency if row.flat_efficiency is not None else row.kernel_efficiency


def dtype_kernel_share(gpu, dtype: str = "bf16") -> float:
    """The share of its dense ``dtype`` peak a GPU's kernels reach, over the share its 16-bit kernels reach of
    theirs: ``kernel_efficiency(gpu, dtype) / kernel_efficiency(gpu, "bf16")`` where the GPU's generation is
    calibrated in both (rows of ``data/kernel_efficiency.csv`` fitted on published runs), else the median of
    that ratio over the generations that are; 1 for the 16-bit dtypes (FP4 takes FP8's, as
    :func:`kernel_efficiency_row`). At the 2026-11-30 fit only Hopper is calibrated in FP8: 0.521 / 0.683 =
    0.763 on every GPU. FP8 GEMMs reach less of their doubled peak (Bekman's best-shape search: 0.71 of the
    H100's FP8 peak against 0.80 of its BF16 one, ``data/gemm_efficiency.csv``). The serving model charges
    FP8 compute at its fitted MFU times this (:func:`llmsizing.serve.serving`'s ``compute_share``;
    serve43)."""
    dtype = check_choice("dtype", dtype, COMPUTE_DTYPES)
    if dtype not in ("fp8", "fp4"):
        return 1.0
    fitted = {(r.generation, r.dtype): r.kernel_efficiency for r in _kernel_table() if r.runs}
    ratios = {gen: fitted[gen, "fp8"] / fitted[gen, "bf16"] for gen, d in fitted if d == "fp8"
              and (gen, "bf16") in fitted}
    if not ratios:
        raise ValueError("data/kernel_efficiency.csv: no generation calibrated in both fp8 and bf16")
    own = kernel_efficiency_row(gpu, "fp8").generation
    if own in ratios:
        return ratios[own]
    values = sorted(ratios.values())
    return values[len(values) // 2]


# ================================================================== chapter 7: the host's CPU Adam

#: DeepSpeed's CPU-Adam, measured: Ren et al. 2021 (ZeRO-Offload, arXiv:2101.06840, Table 4) step 10B fp32
#: parameters in 2.57 s on one DGX-2 host (their Table 2: two Xeon Platinum 8168, 24 cores each, DDR4-2666;
#: 2 sockets x 6 channels x 2.666 GT/s x 8 bytes = 255.9 GB/s peak). The row is (parameters, seconds, the
#: host's DRAM peak in decimal GB/s). Their 1B-8B rows run 3.3-4.5B parameters per second, within 17% of it.
CPU_ADAM_MEASURED = (10e9, 2.57, 2 * 6 * 2.666 * 8)
#: The cross-check, same layout: DeepSpeed's SuperOffload blog (2025, Figure 5), CPU-Adam on a GH200's 72-core
#: Grace, 8B parameters in 0.769 s; NVIDIA quotes ~500 GB/s for its LPDDR5X.
CPU_ADAM_GRACE = (8e9, 0.769, 500.0)
#: A DGX H100 host's DRAM peak, decimal GB/s: two Xeon Platinum 8480C (NVIDIA DGX BasePOD reference), each
#: with 8 channels of DDR5-4800 (Intel's rating): 2 x 8 x 4.8 GT/s x 8 bytes. Eight GPUs share it.
DGX_H100_DRAM_GBPS = 2 * 8 * 4.8 * 8


def cpu_adam_params_per_s(host_dram_gbps: float, gpus_per_host: int = 1) -> float:
    """Parameters per second that one GPU's share of a host's CPU Adam updates: the measured rate of
    :data:`CPU_ADAM_MEASURED`, scaled by the host's DRAM peak ``host_dram_gbps`` (decimal GB/s; CPU Adam
    streams the fp32 states through DRAM, so it is memory-bound) and split evenly over the ``gpus_per_host``
    GPUs whose optimizer processes share the host. The check of
    :data:`llmsizing.zero_traffic.HOST_MEMORY_GBPS`
    (chapter 7); the same scaling predicts the measured step on a GH200's Grace (:data:`CPU_ADAM_GRACE`)
    1.37x too slow, so it is good to about 1.4x across hosts."""
    dram = check_number("host_dram_gbps", host_dram_gbps, allow_equal=False)
    n = check_int("gpus_per_host", gpus_per_host)
    params, seconds, measured_dram = CPU_ADAM_MEASURED
    return params / seconds * dram / measured_dram / n
