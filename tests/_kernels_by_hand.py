"""The step model's compute rates worked out by hand from the published figures (issue 34), for the tests that
derive a step's compute: written from the sources, not from llmsizing.kernels.

* GEMMs: a share of the peak ``1.10 r / (r + 3.75)`` (at most 0.93), ``r`` = the GEMM's arithmetic intensity
  ``2mnk / (bytes (mk + kn + mn))`` over the GPU's ridge point (peak / HBM bandwidth): the curve of
  data/gemm_efficiency.csv (tests/test_kernels.py checks it against the DeepGEMM and cuBLAS tables). A layer's
  GEMMs on one of ``tp`` GPUs: QKV ``h -> (heads + 2 kv) d / tp``, output ``heads d / tp -> h``, gated MLP
  ``h -> 2 ffn / tp`` and ``ffn / tp -> h``, each with ``m`` = the micro-batch's tokens on that GPU.
* Attention: FlashAttention-2 forward + backward, causal, head dim 128 (flash-attention README, H100 figure
  (d); Dao 2023 Fig. 4(d) for the A100), TFLOP/s counting the causal half and 3.5 forwards: the library counts
  3, so x 3 / 3.5. The kernels run only the causal half of the score matrix.
"""

H100_BF16, H100_FP8, H100_HBM = 989.4e12, 1978.9e12, 3.35e12
FA2_H100_HD128 = {512: 163, 1024: 221, 2048: 265, 4096: 294, 8192: 308, 16384: 328}   # TFLOP/s, flat beyond


def gemm_eff(m, n, k, ridge, nbytes=2):
    r = 2 * m * n * k / (nbytes * (m * k + k * n + m * n)) / ridge
    return min(0.93, 1.10 * r / (r + 3.75))


def layer_gemm_eff(h, heads, kv, d, ffn, *, tp, tokens, ridge, nbytes=2):
    gemms = [(tokens, (heads + 2 * kv) * d // tp, h), (tokens, h, heads * d // tp),
             (tokens, 2 * ffn // tp, h), (tokens, h, ffn // tp)]
    return sum(m * n * k for m, n, k in gemms) / sum(m * n * k / gemm_eff(m, n, k, ridge, nbytes)
                                                     for m, n, k in gemms)


def fa2_h100_rate(seq):
    """FLOP/s in the library's count (3 forwards, causal half) at a table point or beyond the table."""
    return FA2_H100_HD128[min(seq, 16384)] * 1e12 * 3 / 3.5


# the catalogue's shapes: (hidden, heads, kv_heads, head_dim, ffn)
LLAMA3_8B = (4096, 32, 8, 128, 14336)
LLAMA3_70B = (8192, 64, 8, 128, 28672)
LLAMA31_405B = (16384, 128, 8, 128, 53248)
