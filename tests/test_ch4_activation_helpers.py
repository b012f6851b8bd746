"""Chapter 4 helpers: activation_coefficients (linear/quadratic split) and max_micro_batch (exact, vectorised),
plus the chapter's render functions."""

import numpy as np
import pytest

from llmsizing import Parallel, get_gpu, get_model, training_memory
from llmsizing.activations import activation_coefficients, activation_memory, korthikanti_bytes_per_layer
from llmsizing.memory import max_micro_batch


def test_coefficients_reproduce_korthikanti_gpt_case():
    m = get_model("gpt3-175b")
    lin, quad = activation_coefficients(m, attention="eager", dropout=True)
    assert quad == 5 * m.heads
    assert lin == 34 * m.hidden + 16          # + fp32 LayerNorm mean/rstd, 2 norms x 8 bytes per token
    s, b = 2048, 3
    per_layer = activation_memory(m, batch=b, seq=s, attention="eager", dropout=True).per_layer_bytes
    assert per_layer == pytest.approx(lin * s * b + quad * s * s * b)
    assert per_layer - korthikanti_bytes_per_layer(m, batch=b, seq=s) == pytest.approx(16 * s * b)


def test_flash_has_no_quadratic_term():
    for name in ("llama-3-8b", "gpt2", "mistral-7b"):
        assert activation_coefficients(name, attention="flash", dropout=True)[1] == 0
        assert activation_coefficients(name, attention="eager", selective=True)[1] == 0


@pytest.mark.parametrize("name,gpu,par", [("llama-2-7b", "B200", None), ("gpt2", "RTX 4090", None),
                                          ("llama-3-8b", "H100 SXM", Parallel(dp=8, zero=3))])
@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
@pytest.mark.parametrize("attention", ["flash", "eager"])
def test_max_micro_batch_is_the_boundary(name, gpu, par, recompute, attention):
    cap = get_gpu(gpu).memory_bytes
    seqs = np.array([512, 1000, 2048, 4096, 8192, 32768, 131072])
    kw = dict(recompute=recompute, attention=attention, parallel=par)
    bs = max_micro_batch(name, gpu, seqs, **kw)
    assert bs.dtype.kind == "i" and bs.shape == seqs.shape and (bs >= 0).all()
    for s, b in zip(seqs.tolist(), bs.tolist()):
        if b:
            assert training_memory(name, batch=b, seq=s, **kw).total_bytes <= cap
        assert training_memory(name, batch=b + 1, seq=s, **kw).total_bytes > cap
        assert max_micro_batch(name, gpu, s, **kw) == b          # scalar form agrees


def test_max_micro_batch_zero_when_states_do_not_fit():
    assert max_micro_batch("llama-3-8b", "H100 SXM", 1024) == 0   # 16 B/param x 8B > 80 GiB


def test_max_micro_batch_bad_input():
    with pytest.raises(TypeError, match="seq"):
        max_micro_batch("gpt2", "H100 SXM", 1024.5)
    with pytest.raises(ValueError, match="seq"):
        max_micro_batch("gpt2", "H100 SXM", np.array([0, 1024]))
    with pytest.raises(ValueError, match="recompute"):
        max_micro_batch("gpt2", "H100 SXM", 1024, recompute="partial")


def test_render_functions_default_and_errors():
    from llmsizing.charts import render_activation_memory, render_max_micro_batch

    v = render_activation_memory()
    assert "largest micro-batch" in v.summary and v.png()[:4] == b"\x89PNG"
    assert "recompute" in render_max_micro_batch().summary
    with pytest.raises(ValueError, match="attention"):
        render_activation_memory(attention="flashy")
    with pytest.raises(ValueError, match="zero3_gpus"):
        render_max_micro_batch(zero3_gpus=0)


def test_selective_flash_extra_bytes_by_hand_and_measured():
    """Chapter 4's "flash + selective buys nothing": by hand for Llama-3-8B at 8K (h = 4096, a = 32, L = 32):
    the rebuilt output 2 x 8192 x 4096 = 67,108,864 B minus 31 layers' log-sum-exps 31 x 4 x 32 x 8192 =
    32,505,856 B = 34,603,008 B (33 MiB); and chapter 5's measurement (data/activation_measurements.csv,
    tiny-llama, bf16, CPU flash, 2 x 256 tokens): selective minus none = 20,326,404 - 20,113,412 = 212,992 B."""
    from llmsizing.act_terms import selective_flash_extra_bytes
    from llmsizing.measurements import load_measurements, measured_model

    assert selective_flash_extra_bytes("llama-3-8b", batch=1, seq=8192) == 67_108_864 - 32_505_856
    assert selective_flash_extra_bytes("llama-3-8b", batch=1, seq=8192, tp=8) == (67_108_864 - 32_505_856) / 8
    m = load_measurements()
    row = m[(m.model == "tiny-llama") & (m["mode"] == "bf16") & (m.attention_impl == "sdpa-flash-cpu")
            & (m.batch == 2) & (m.seq == 256) & (m.recompute == "none")].iloc[0]
    assert selective_flash_extra_bytes(measured_model(row), batch=2, seq=256) == 20_326_404 - 20_113_412
    with pytest.raises(ValueError, match="dtype"):
        selective_flash_extra_bytes("llama-3-8b", batch=1, seq=8192, dtype="int8")
