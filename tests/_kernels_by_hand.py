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


def pointwise_layer_bytes(h, heads, kv, d, ffn, *, norm_stat=4, recompute=False, repeat=1, passes="all"):
    """One layer's memory-bound kernels, bytes per token, BF16 (llmsizing.pointwise's sources: Megatron-Core's
    fused SwiGLU and bias-dropout-add, TE's LayerNormLinear and fused RoPE), counted here from the kernels:
    two norms (forward read + write h, backward read 2 h write h, each with its fp32 statistic), two residual
    adds (read 2 h write h, each way), SwiGLU (forward read 2 ffn write ffn; backward read 3 ffn write 2 ffn),
    RoPE on (heads + kv) d (read + write, each way); the forward again with full recomputation. ``repeat``:
    the norms and adds counted that many times (tensor parallelism without sequence parallelism: every GPU
    of the group runs them on every token); ``passes="forward"``: the forward only."""
    rot = (heads + kv) * d
    fwd = repeat * (2 * (2 * h * 2 + norm_stat) + 2 * 3 * h * 2) + 3 * ffn * 2 + 2 * rot * 2
    bwd = repeat * (2 * (3 * h * 2 + norm_stat) + 2 * 3 * h * 2) + 5 * ffn * 2 + 2 * rot * 2
    if passes == "forward":
        return fwd
    return fwd + bwd + (fwd if recompute else 0)


def pointwise_end_bytes(h, vocab):
    """``(first, last)`` stage extras, bytes per token: the embedding's gather (forward read + write h;
    backward read the gradient, update an fp32 row) and the final RMSNorm plus Megatron-Core's fp32
    vocabulary-parallel cross-entropy (38 bytes per logit forward, 14 backward)."""
    return 2 * h * 2 + h * 2 + 8 * h, (2 * h * 2 + 4) + (3 * h * 2 + 4) + 52 * vocab
