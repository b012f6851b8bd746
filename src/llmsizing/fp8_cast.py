"""What an FP8 recipe's cast kernels cost a training step (issue 34; chapter 10, "Kernel efficiency"): the
HBM traffic of turning each Linear layer's BF16 operands into FP8, which a step pays besides its FP8 GEMMs.

**What is cast, and when.** An FP8 Linear runs three GEMMs per micro-batch (forward ``input @ weight^T``,
backward ``grad_output @ weight`` and ``input^T @ grad_output``), each on FP8 operands. Its input, its weight
and the gradient of its output come in BF16, so each is cast before its GEMMs: a pass that reads the BF16
tensor to find its absolute maximum (the scale), then a pass that reads it again and writes the FP8 copy
*and* a transposed FP8 copy (a GEMM on Hopper takes FP8 operands in one layout, and the backward multiplies
the transposes). These kernels are memory-bound: they move a few bytes per element and compute almost
nothing. torchao's own roofline of its float8 training counts them per tensor role
(``torchao/testing/float8/roofline_utils.py``, ``get_tensor_memory_traffic_ovhd_s``, recipe
``"tensorwise"`` without fusion, the default of ``benchmarks/float8/float8_roofline.py``; the same counts in
``torchao/testing/training/roofline_utils.py``), per element of the tensor:

* **input** (``m x k``): amax read 2 bytes; cast reads 2 and writes 1 + 1 (row- and column-major): **6**;
* **weight** (``k x n``): amax read 2; the forward cast reads 2 and writes 1; the backward's transposed cast
  reads 2 and writes 1 again: **8**, once per micro-batch (the weight is cast every micro-batch);
* **grad_output** (``m x n``): as the input, **6**.

So one Linear moves ``6 m k + 8 k n + 6 m n`` bytes (:func:`linear_cast_bytes`), at the share of the HBM
bandwidth the same file takes for its pointwise kernels, ``pct_achievable_mem_bw = 0.92``
(:data:`CAST_BANDWIDTH_SHARE`). The bytes grow with ``m (k + n)`` while the GEMMs' FLOPs grow with ``m n k``:
the cast costs a ``~ (1/n + 1/k)`` share of the GEMM time, the most for narrow models and for narrow
tensor-parallel slices, and the weight's term the most at few tokens per micro-batch.

**Where it is an approximation** (the errors it leaves, not measured apart):

* The count is torchao's tensorwise recipe (torchtitan's default Float8), which 11 of the 16 FP8 runs in
  ``data/published_runs.csv`` ran (3 ran rowwise, 1 MXFP8, 1 Transformer Engine). Its rowwise recipe moves
  more (input and grad_output 8, weight 10 bytes: the same file); Transformer Engine's delayed scaling takes
  the scale from the amax history, which "reduces tensor reads per quantization from two to one" (its docs,
  *FP8 Delayed Scaling*), so it skips the amax pass (4 bytes instead of 6 for the input and the gradient),
  while its current scaling reads twice, as here; DeepSeek-V3 casts per 1 x 128 tile, in a pass through HBM
  its authors ask hardware to remove (arXiv:2412.19437, Sec. 3.5.2). One count for every FP8 recipe: rowwise
  moves about a third more, Transformer Engine's delayed scaling about a third less.
* torch.compile can fuse the input's and the gradient's amax pass into the kernel before it (the roofline's
  ``fuse_with_prev``: 4 bytes instead of 6), and FSDP's float8 all-gather casts the weight shard before the
  gather; neither is counted.
* The shapes are the per-GPU GEMMs (:func:`llmsizing.kernels.layer_gemms`): under tensor parallelism with a
  float8 all-gather the input is cast on its ``1 / tp`` shard, which this counts ``tp`` times.
* A recomputed forward casts its input and weight again; the step model charges the cast with the Linear
  FLOPs (:func:`llmsizing.kernels.rates`), so a recomputed forward pays a third of the cast where its own
  casts move about half of it (11 of 20 bytes per element when ``m = k = n``).
* Kernel launches (the file's 2 us floor per kernel) are not counted: a training GEMM's operands take longer
  to move than that.
* FP4 recipes are not priced (their casts also write block scales); neither are the norms and activations
  around the Linear layers, in any dtype (they sit in the calibrated ``kernel_efficiency``).

The kernel efficiency of FP8 (``data/kernel_efficiency.csv``) is refitted with the cast priced
(``tools/calibrate.py``): before, it absorbed the cast as a fixed share of every FP8 step.
"""

from __future__ import annotations

from ._validate import check_int

#: Bytes each cast kernel moves per element of a Linear's operand, per tensor role, in one forward and
#: backward (module docstring; torchao ``roofline_utils.get_tensor_memory_traffic_ovhd_s``, tensorwise, not
#: fused): amax read 2, cast read 2 + write 1 per FP8 copy.
CAST_BYTES_PER_ELEMENT = {"input": 6.0, "weight": 8.0, "grad_output": 6.0}
#: The share of the HBM bandwidth the cast kernels reach (the same file's ``pct_achievable_mem_bw``: pointwise
#: Triton kernels on large inputs at about 2.2 of the 2.4 TB/s of Meta's H100s).
CAST_BANDWIDTH_SHARE = 0.92


def linear_cast_bytes(m: int, n: int, k: int, copies: int = 1) -> float:
    """HBM bytes the FP8 cast kernels of one Linear move in a forward and backward of a micro-batch: input
    ``m x k``, weight ``k x n``, gradient of the output ``m x n`` (:data:`CAST_BYTES_PER_ELEMENT`):
    ``6 m k + 8 k n + 6 m n``. ``copies`` weights of that shape share the ``m`` rows (a GPU's experts run as
    one grouped GEMM, ``m`` their rows together): the weight term counts ``copies`` times. Llama 3 8B's MLP
    up projection (``m = 8,192``, ``n = 28,672``, ``k = 4,096``): ``6 x 8192 x 4096 + 8 x 4096 x 28672 +
    6 x 8192 x 28672 = 2.55e9`` bytes."""
    m, n, k = check_int("m", m), check_int("n", n), check_int("k", k)
    copies = check_int("copies", copies)
    b = CAST_BYTES_PER_ELEMENT
    return float(b["input"] * m * k + b["weight"] * k * n * copies + b["grad_output"] * m * n)


def cast_seconds(cast_bytes: float, hbm_bytes_per_s: float) -> float:
    """Seconds the cast kernels take to move ``cast_bytes`` at :data:`CAST_BANDWIDTH_SHARE` of the HBM
    bandwidth ``hbm_bytes_per_s`` (memory-bound kernels, as torchao's float8 roofline prices them; chapter
    10)."""
    return cast_bytes / (CAST_BANDWIDTH_SHARE * hbm_bytes_per_s)
