"""Chapter 6 (hardware): peaks, ridge points, matmul intensity, MFU and the decode roofline.

Expected values are datasheet figures and hand arithmetic written out here, never the library's output:
NVIDIA H100 datasheet (SXM5: 3.35 TB/s HBM3, 989 dense / 1,979 sparse BF16 TFLOP/s, NVLink 900 GB/s), A100
datasheet (SXM4 80GB: 2,039 GB/s, 312 / 624 TFLOP/s, NVLink 600 GB/s), B200 (7.7 TB/s: the 7,680-bit bus
and 3,996 MHz DDR clock a shipping part reports, pytorch/ao PR 4002; DGX B200 sheet: 4.5 PFLOP/s sparse
bf16 = 2,250 dense, NVLink 1.8 TB/s), L40S datasheet (362.05 dense bf16, 733 dense FP8, PCIe Gen4 x16:
64 GB/s both ways), and the Llama 3 paper (Dubey et al. 2024, Table 4: 380-430 TFLOP/s per
H100 = 38-43% BF16 MFU).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from llmsizing import get_model
from llmsizing.hardware import (
    dense_tflops, decode_compute_bound_batch, decode_step_roofline, gpu_comparison, link_bandwidth_one_way_gbps,
    matmul_intensity_flops_per_byte, model_flops_utilization, ridge_point_flops_per_byte, sparse_tflops,
)


# ----------------------------------------------------------------------------- datasheet peaks
def test_dense_and_sparse_peaks_match_the_datasheets():
    assert dense_tflops("H100 SXM") == pytest.approx(989, abs=0.5)
    assert sparse_tflops("H100 SXM", "bf16") == pytest.approx(1979, abs=1)     # the "with sparsity" figure
    assert dense_tflops("H100 SXM", "fp16") == dense_tflops("H100 SXM", "bf16")
    assert dense_tflops("H100 SXM", "fp8") == pytest.approx(1979, abs=0.5)
    assert dense_tflops("A100 80GB") == 312 and sparse_tflops("A100 80GB") == 624
    assert sparse_tflops("B200") == 4500                                         # 4.5 PFLOP/s "with sparsity"
    assert dense_tflops("L40S", "fp8") == 733 and sparse_tflops("L40S", "fp8") == 1466


def test_no_sparse_peak_without_structured_sparsity():
    """2:4 sparsity came with Ampere (NVIDIA A100 whitepaper 2020) and, at AMD, with CDNA 3: the V100's and
    the MI250X's datasheets print dense peaks only, so the book gives them no "with sparsity" figure (read28g)."""
    from llmsizing.catalog import get_gpu, list_gpus
    from llmsizing.hardware import has_structured_sparsity

    for name in ("V100", "MI250X GCD"):
        assert not has_structured_sparsity(name)
        with pytest.raises(ValueError, match="gpu='" + name):
            sparse_tflops(name)
    for name in ("A100 80GB", "A10", "H100 SXM", "L40S", "B200", "MI300X", "MI355X"):
        assert has_structured_sparsity(name)
    # every GPU whose datasheet source in data/gpus.csv quotes a "with sparsity" figure is one that has it
    quoted = [g for g in list_gpus() if "sparsity" in (get_gpu(g).spec_source or "").lower()]
    assert quoted and all(has_structured_sparsity(g) for g in quoted)
    table = gpu_comparison()
    assert table["bf16_sparse_tflops"].isna()[["V100", "MI250X GCD"]].all()
    assert table.loc["H100 SXM", "bf16_sparse_tflops"] == pytest.approx(2 * 989.4)   # the datasheet's 1,979


def test_no_fp8_on_ampere_names_the_dtype():
    with pytest.raises(ValueError, match="dtype"):
        dense_tflops("A100 80GB", "fp8")
    with pytest.raises(ValueError, match="dtype"):
        sparse_tflops("A10", "fp8")
    with pytest.raises(ValueError, match="dtype"):
        dense_tflops("H100 SXM", "int8")


def test_ridge_points_by_hand():
    assert ridge_point_flops_per_byte("H100 SXM") == pytest.approx(989.4e12 / 3.35e12)   # 295.3
    assert ridge_point_flops_per_byte("H100 SXM") == pytest.approx(295, abs=0.5)
    assert ridge_point_flops_per_byte("A100 80GB") == pytest.approx(312e12 / 2039e9)    # 153.0
    assert ridge_point_flops_per_byte("B200") == pytest.approx(2250e12 / 7.7e12)        # 292.2
    assert ridge_point_flops_per_byte("L40S") == pytest.approx(362.05e12 / 864e9)       # 419.0
    assert ridge_point_flops_per_byte("H100 SXM", "fp8") == pytest.approx(1978.9e12 / 3.35e12)
    # B200 and H100: both roofs moved up by about the same factor, so the ridge barely moved
    assert abs(ridge_point_flops_per_byte("B200") / ridge_point_flops_per_byte("H100 SXM") - 1) < 0.02


def test_link_one_way_halves_the_bidirectional_datasheet_figure():
    assert link_bandwidth_one_way_gbps("H100 SXM") == 450      # NVLink 4: 900 GB/s both ways
    assert link_bandwidth_one_way_gbps("A100 80GB") == 300     # NVLink 3: 600
    assert link_bandwidth_one_way_gbps("B200") == 900          # NVLink 5: 1.8 TB/s
    assert link_bandwidth_one_way_gbps("L40S") == 32           # PCIe Gen4 x16: 64 both ways


# ----------------------------------------------------------------------------- matmul intensity
def test_matmul_intensity_by_hand():
    # square n x n x n in bf16: 2n^3 / (2 * 3n^2) = n / 3
    assert matmul_intensity_flops_per_byte(4096, 4096, 4096) == pytest.approx(4096 / 3)
    # one token through a 4096 x 4096 weight: 2 * 4096^2 / (2 * (4096 + 4096^2 + 4096)) = 4096 / 4098
    assert matmul_intensity_flops_per_byte(1, 4096, 4096) == pytest.approx(4096 / 4098)
    # fp32 halves it
    assert matmul_intensity_flops_per_byte(64, 4096, 4096, 4) == pytest.approx(
        2 * 64 * 4096 * 4096 / (4 * (64 * 4096 + 4096 * 4096 + 64 * 4096)))


def test_matmul_intensity_validation_names_the_parameter():
    for kwargs, word in ((dict(m=0, k=1, n=1), "m"), (dict(m=1, k=1.5, n=1), "k"), (dict(m=1, k=1, n=-2), "n"),
                         (dict(m=1, k=1, n=1, bytes_per_element=0), "bytes_per_element")):
        with pytest.raises((ValueError, TypeError), match=word):
            matmul_intensity_flops_per_byte(**kwargs)


# ----------------------------------------------------------------------------- MFU
def test_llama3_mfu_matches_the_paper():
    # Dubey et al. 2024, Table 4: 430 TFLOP/s -> 43%, 380 -> 38% of the H100's 989 dense bf16 TFLOP/s
    assert model_flops_utilization(430, "H100 SXM") == pytest.approx(0.43, abs=0.006)
    assert model_flops_utilization(380, "H100 SXM") == pytest.approx(0.38, abs=0.006)
    assert model_flops_utilization(np.float64(400), "H100 SXM") == model_flops_utilization(400, "H100 SXM")


def test_mfu_above_the_dense_peak_is_refused():
    with pytest.raises(ValueError, match="achieved_tflops"):
        model_flops_utilization(1500, "H100 SXM")          # plausible only against the sparse figure
    with pytest.raises(ValueError, match="achieved_tflops"):
        model_flops_utilization(-1, "H100 SXM")
    with pytest.raises(TypeError, match="achieved_tflops"):
        model_flops_utilization("400", "H100 SXM")


# ----------------------------------------------------------------------------- the decode roofline
def test_decode_roofline_by_hand_llama2_7b():
    # Llama-2-7B: N = 6,738,415,616 (published), bf16 weights 2N bytes; a 1-token context caches
    # 2 (K,V) x 32 layers x 32 heads x 128 x 2 bytes = 524,288 bytes. The untied input embedding
    # (32,000 x 4,096) is a lookup: the step gathers one 4,096 x 2-byte row, not the 262 MB table.
    n, emb = 6_738_415_616, 32_000 * 4096
    read = 2 * n - 2 * emb + 2 * 4096 + 524_288
    r = decode_step_roofline("llama-2-7b", "H100 SXM", batch=1, context=1)
    assert r.bytes_read == read
    assert r.resident_bytes == 2 * n + 524_288                # what the GPU holds: the whole table too
    # FLOPs: 2 per matmul weight (the input embedding is a lookup) + QK^T and attn@V over 1 position
    assert r.flops == 2 * (n - emb) + 4 * 1 * 32 * 128 * 32
    assert r.memory_time_s == pytest.approx(read / 3.35e12)
    assert r.compute_time_s == pytest.approx(r.flops / 989.4e12)
    assert r.bound == "memory" and r.time_s == r.memory_time_s
    assert r.tokens_per_s == pytest.approx(3.35e12 / read)                       # ~256 tokens/s
    assert r.intensity_flops_per_byte == pytest.approx(1.0, abs=0.03)            # ~1 FLOP per byte


def test_decode_roofline_llama3_8b_batch1_gathers_one_embedding_row():
    """The brief's figure by hand: Llama 3 8B in bf16 is 16,060,522,496 B; its untied table is 128,256 x
    4,096 x 2 B, of which one 4,096 x 2-byte row is gathered. Context 1 caches 2 x 32 x 8 x 128 x 2 B."""
    r = decode_step_roofline("llama-3-8b", "H100 SXM", batch=1, context=1)
    kv = 2 * 32 * 8 * 128 * 2
    assert r.bytes_read == 16_060_522_496 - 128_256 * 4_096 * 2 + 4_096 * 2 + kv
    assert r.resident_bytes == 16_060_522_496 + kv
    # batch 64: 64 rows and 64 caches
    r64 = decode_step_roofline("llama-3-8b", "H100 SXM", batch=64, context=1)
    assert r64.bytes_read == 16_060_522_496 - 128_256 * 4_096 * 2 + 64 * (4_096 * 2 + kv)


def test_decode_roofline_of_a_tied_model_reads_all_its_weights():
    # Granite 3.0 2B ties its embedding to the LM head: the matrix is a matmul over the vocabulary, read whole
    from llmsizing.inference import weights_bytes

    for b in (1, 64):
        r = decode_step_roofline("granite-3.0-2b", "H100 SXM", batch=b, context=1)
        assert r.bytes_read == r.resident_bytes
        assert r.bytes_read - b * (r.resident_bytes - weights_bytes("granite-3.0-2b")) / b == \
            weights_bytes("granite-3.0-2b")


@pytest.mark.parametrize("model, weights, batch, context, gpu", [
    ("llama-3-70b", "bf16", 1, 1024, "H100 SXM"), ("llama-3-70b", "fp8", 32, 2048, "H200"),
    ("llama-3-8b", "bf16", 16, 4096, "H100 SXM"), ("llama-2-7b", "int4-g128", 8, 512, "A100 80GB"), ("llama-3-8b", "q4_k_m", 2, 256, "H100 SXM"),
    ("granite-3.0-2b", "bf16", 4, 128, "H100 SXM")])
def test_roofline_reads_the_bytes_serving_reads(model, weights, batch, context, gpu):
    """The roofline reads what the serving model's decode step reads (serve_step.serving, tp = 1, at its
    decode context): the weights of inference.decode_weight_bytes_read and the batch's KV cache."""
    from llmsizing.inference import decode_weight_bytes_read, kv_cache_bytes_per_token, kv_cached_tokens
    from llmsizing.serve import serving

    s = serving(model, gpu, tp=1, batch=batch, prompt=context, output=64, weights=weights)
    r = decode_step_roofline(model, gpu, batch=batch, context=s.decode_context, weights=weights)
    kv = batch * kv_cache_bytes_per_token(model) * kv_cached_tokens(get_model(model), s.decode_context)
    assert r.bytes_read - kv == decode_weight_bytes_read(model, batch, weights)
    assert r.bytes_read == pytest.approx(s.decode_bytes_per_gpu, rel=1e-12)


def test_compute_bound_batch_is_where_the_bound_flips():
    b = decode_compute_bound_batch("llama-2-7b", "H100 SXM", context=1)
    # hand: intensity B F / (W0 + B (K + r)) = R gives B = R W0 / (F - R (K + r)), W0 the weights less the
    # untied 32,000 x 4,096 table, r one 4,096 x 2-byte row, with the figures of the test above
    n, emb = 6_738_415_616, 32_000 * 4096
    R, W0, K, r = 989.4e12 / 3.35e12, 2 * n - 2 * emb, 524_288, 2 * 4096
    F = 2 * (n - emb) + 4 * 32 * 128 * 32
    assert b == pytest.approx(R * W0 / (F - R * (K + r)))
    assert decode_step_roofline("llama-2-7b", "H100 SXM", batch=math.floor(b), context=1).bound == "memory"
    assert decode_step_roofline("llama-2-7b", "H100 SXM", batch=math.ceil(b), context=1).bound == "compute"


def _brute_force_flip(model, gpu, context, weights="bf16", top=4_000):
    """The first integer batch whose step is compute-bound, trying every batch in turn (None up to top)."""
    for b in range(1, top + 1):
        if decode_step_roofline(model, gpu, batch=b, context=context, weights=weights).bound == "compute":
            return b
    return None


@pytest.mark.parametrize("model, context, weights", [
    ("llama-2-7b", 1, "bf16"), ("llama-2-7b", 64, "bf16"), ("llama-3-8b", 128, "bf16"),
    ("llama-3-8b", 16, "fp8"), ("granite-3.0-2b", 8, "bf16"), ("gpt2", 1, "bf16"), ("gpt2", 4, "bf16"),
    ("gpt2", 8, "bf16"), ("gpt2", 16, "bf16"), ("gpt2", 20, "bf16"), ("gpt2", 24, "bf16")])
def test_closed_form_flip_matches_a_brute_force_search(model, context, weights):
    """The closed form against every batch tried in turn: the first compute-bound batch is the ceiling of
    the closed form's B. GPT-2's 1,024 learned positions are whole past batch 1,024 (its tied embedding
    is read whole anyway), so the short contexts test the stretch past a table's row count."""
    gpu = "H100 SXM"
    b = decode_compute_bound_batch(model, gpu, context=context, weights=weights)
    brute = _brute_force_flip(model, gpu, context, weights)
    if b is None:
        assert brute is None
    else:
        assert brute == math.ceil(b - 1e-9)


def test_closed_form_past_a_tables_rows_by_hand():
    """GPT-2 (tied; 1,024 learned positions of 768 x 2 B) at a context where the ridge batch is past 1,024:
    there the positions are read whole and the form is B = R W / (F - R K), all the weights in W."""
    from llmsizing.flops import forward_flops_per_token
    from llmsizing.inference import kv_cache_bytes_per_token, weights_bytes

    g = get_model("gpt2")
    R = 989.4e12 / 3.35e12
    for ctx in range(1, 64):
        W, K = weights_bytes(g), kv_cache_bytes_per_token(g) * ctx
        F = forward_flops_per_token(g, seq=ctx)
        past = R * W / (F - R * K) if F > R * K else None
        if past is not None and past > 1024:
            assert decode_compute_bound_batch("gpt2", "H100 SXM", context=ctx) == pytest.approx(past)
            break
    else:
        pytest.fail("no context puts GPT-2's ridge batch past its 1,024 positions")
    # and before it, the gathered form: W0 = W - 1,024 x 768 x 2, per sequence K + 768 x 2
    W, K, F = weights_bytes(g), kv_cache_bytes_per_token(g) * 1, forward_flops_per_token(g, seq=1)
    W0, r = W - 1024 * 768 * 2, 768 * 2
    within = R * W0 / (F - R * (K + r))
    assert within < 1024
    assert decode_compute_bound_batch("gpt2", "H100 SXM", context=1) == pytest.approx(within)


def test_long_context_decode_never_becomes_compute_bound():
    # Llama-3-8B at 4,096 tokens: each sequence's cache is 2 x 32 x 8 x 128 x 2 x 4096 = 512 MiB and brings
    # only about (2N + attention) / 512 MiB ~ 32 FLOP/byte, far below the H100's 295: no batch is enough.
    assert decode_compute_bound_batch("llama-3-8b", "H100 SXM", context=4096) is None
    assert decode_step_roofline("llama-3-8b", "H100 SXM", batch=4096, context=4096).bound == "memory"


def test_decode_validation_names_the_parameter():
    for kwargs, word in ((dict(batch=0, context=8), "batch"), (dict(batch=1, context=0), "context"),
                         (dict(batch=1, context=8, weights="bf-16"), "weights"),
                         (dict(batch=1, context=8, compute="fp8"), "dtype")):   # A100 has no FP8
        with pytest.raises((ValueError, TypeError), match=word):
            decode_step_roofline("llama-2-7b", "A100 80GB", **kwargs)


# ----------------------------------------------------------------------------- the comparison table
def test_gpu_comparison_table():
    df = gpu_comparison(["H100 SXM", "B200", "A100 80GB", "L40S"])
    assert list(df.index) == ["H100 SXM", "B200", "A100 80GB", "L40S"]
    h = df.loc["H100 SXM"]
    assert h["memory_gib"] == pytest.approx(81_559 / 1024)
    assert h["hbm_tbps"] == pytest.approx(3.35)
    assert h["ridge_flops_per_byte"] == pytest.approx(295.3, abs=0.1)
    assert h["link_one_way_gbps"] == 450
    assert df.loc["L40S", "link"].startswith("PCIe")
    assert len(gpu_comparison()) >= 9


def test_gpu_comparison_validation():
    with pytest.raises(TypeError, match="gpus"):
        gpu_comparison("H100 SXM")
    with pytest.raises(ValueError, match="gpus"):
        gpu_comparison([])
    with pytest.raises(ValueError, match="GPU"):
        gpu_comparison(["H100"])


# ----------------------------------------------------------------------------- the figure and the widget
def test_landscape_and_decode_figures():
    from llmsizing.charts import render_decode_roofline, render_gpu_landscape

    v = render_gpu_landscape(["H100 SXM", "B200"])
    assert "H100 SXM" in v.summary and "450 GB/s" in v.summary and "295 FLOP/byte" in v.summary
    v = render_decode_roofline("llama-2-7b", "H100 SXM", context=1, batch=1)
    assert "memory-bound" in v.summary
    v = render_decode_roofline("llama-2-7b", "H100 SXM", context=1, batch=1024)   # beyond ~ 400: compute-bound
    assert "compute-bound" in v.summary
    with pytest.raises(ValueError, match="batch"):
        render_decode_roofline(batch=0)


def test_landscape_names_coinciding_dots_once():
    """The H800 is an H100 SXM with its NVLink cut (same 3.35 TB/s, same 81,559 MiB): one dot, one label of
    both names; the B200 (7.7 TB/s, 179.1 GiB) and the GB200 (8 TB/s, 185 GiB) are 0.3 TB/s apart: two labels
    (read28g: the names printed over each other)."""
    import matplotlib.pyplot as plt

    from llmsizing.charts import render_gpu_landscape
    from llmsizing.charts.many_gpus import _landscape_groups

    names = ["H100 SXM", "H800", "B200", "GB200"]
    assert _landscape_groups(gpu_comparison(names)) == [["H100 SXM", "H800"], ["B200"], ["GB200"]]
    fig = render_gpu_landscape(names).figure
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert sorted(texts) == sorted(["H100 SXM\nH800", "B200", "GB200"])
    plt.close(fig)


def test_the_roofline_panel_names_the_chapters_gpus_and_greys_the_rest():
    """(read28g, lows29) 21 rooflines, most of one grey, under a two-column legend could not be told apart.
    The GPUs the chapter compares are coloured and named, one column; the others are light, thinner, drawn
    below them, and share one entry that counts them. Read off the artists."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_hex

    from llmsizing.charts import render_gpu_landscape
    from llmsizing.charts.many_gpus import _ROOFLINE_NAMED

    table = gpu_comparison()
    fig = render_gpu_landscape().figure
    ax = fig.axes[1]
    roofs = [ln for ln in ax.lines if len(ln.get_xdata()) > 2]          # (the two marks are 2-point lines)
    assert len(roofs) == len(table)
    legend = ax.get_legend()
    labels = [t.get_text() for t in legend.get_texts()]
    named = [g for g in table.index if g in _ROOFLINE_NAMED]
    assert 2 <= len(named) <= 8 and legend._ncols == 1
    assert labels == named + [f"the other {len(table) - len(named)} GPUs (table above)"]
    by_label = {ln.get_label(): ln for ln in roofs}
    colours = [to_hex(by_label[g].get_color()) for g in named]
    rest = [ln for ln in roofs if ln.get_label() not in named]
    assert len(set(colours)) == len(named)                             # each named GPU its own colour
    grey = to_hex(rest[0].get_color())
    assert {to_hex(ln.get_color()) for ln in rest} == {grey} and grey not in colours
    assert max(ln.get_linewidth() for ln in rest) < min(by_label[g].get_linewidth() for g in named)
    assert max(ln.get_zorder() for ln in rest) < min(by_label[g].get_zorder() for g in named)
    plt.close(fig)
    few = render_gpu_landscape(["H20", "V100"]).figure                 # a small figure names each of its GPUs
    assert [t.get_text() for t in few.axes[1].get_legend().get_texts()] == ["H20", "V100 (fp16)"]
    plt.close(few)


def test_the_roofline_panel_names_the_gpus_a_reader_picks():
    """``named=`` chooses the coloured, named rooflines (the chapter's six by default); a name that is not
    drawn, or a bare string, is refused with the parameter named."""
    import matplotlib.pyplot as plt

    from llmsizing.charts import render_gpu_landscape

    n = len(gpu_comparison())
    fig = render_gpu_landscape(named=["V100", "L4"]).figure
    labels = [t.get_text() for t in fig.axes[1].get_legend().get_texts()]
    assert labels[-1] == f"the other {n - 2} GPUs (table above)" and len(labels) == 3
    assert {lb.split(" (")[0] for lb in labels[:2]} == {"V100", "L4"}
    plt.close(fig)
    with pytest.raises(ValueError, match="named="):
        render_gpu_landscape(["H100 SXM", "B200"], named=["H20"])
    for bad in ("H100 SXM", 5, ["H100 SXM", 5]):        # a bare string, not a sequence, not all names
        with pytest.raises(TypeError, match="named must be"):
            render_gpu_landscape(named=bad)


def test_the_capacity_panels_labels_keep_off_the_y_axis_and_each_other():
    """(read28g) The "L40S / RTX 6000 Ada" label touched the y axis; it now sits in free space with a leader
    line to its dot: its text clears the axis and overlaps no other label."""
    import matplotlib.pyplot as plt
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.text import Text

    from llmsizing.charts import render_gpu_landscape

    fig = render_gpu_landscape().figure
    FigureCanvasAgg(fig)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    boxes = {t.get_text(): Text.get_window_extent(t, renderer) for t in ax.texts}   # the text, not its line
    l40s = boxes["L40S\nRTX 6000 Ada"]
    assert l40s.x0 >= ax.get_window_extent(renderer).x0 + 3
    assert not [k for k, b in boxes.items() if not k.startswith("L40S") and b.overlaps(l40s)]
    plt.close(fig)


def test_decode_roofline_widget_moves():
    from llmsizing.widgets import decode_roofline_widget

    w = decode_roofline_widget()
    assert "memory-bound" in w.summary.value and not w.error.value
    before = w.image.value
    w.controls["batch"].value = 1024
    w.controls["context"].value = 128
    assert "compute-bound" in w.summary.value and w.image.value != before
    w.controls["gpu"].value = "A100 80GB"
    w.controls["weights"].value = "fp8"     # fp8 weights are read as bytes; compute stays bf16: no error
    assert not w.error.value


# ----------------------------------------------------------------------------- issue 21: fp16 accumulate, no-BF16 GPUs
def test_fp16_with_fp16_accumulation():
    """Ada Lovelace whitepaper: the RTX 4090 does 165.2 TFLOP/s of FP16 with FP32 accumulation and 330.3 with FP16
    accumulation; data-centre parts run both at one rate."""
    assert dense_tflops("RTX 4090", "fp16") == 165.2
    assert dense_tflops("RTX 4090", "fp16-acc16") == 330.3
    assert sparse_tflops("RTX 4090", "fp16-acc16") == pytest.approx(660.6)
    assert dense_tflops("H100 SXM", "fp16-acc16") == dense_tflops("H100 SXM", "fp16") == 989.4
    assert dense_tflops("L40S", "fp16-acc16") == 362.05
    assert dense_tflops("V100", "fp16-acc16") == 125
    with pytest.raises(ValueError, match="dtype"):
        dense_tflops("RTX 4090", "fp16-acc32")


def test_v100_bf16_is_priced_at_its_fp16_rate_and_says_so():
    """V100 datasheet: 125 TFLOP/s of FP16 tensor math, no BF16 and no FP8. The policy of dense_tflops: "bf16" on a
    GPU without BF16 is its FP16 rate (the bf16-mixed recipe runs as FP16 mixed precision: same bytes, same FLOPs)."""
    from llmsizing.hardware import effective_dtype

    assert dense_tflops("V100") == dense_tflops("V100", "fp16") == 125
    assert effective_dtype("V100") == "fp16" and effective_dtype("V100", "fp16") == "fp16"
    assert effective_dtype("H100 SXM") == "bf16"
    with pytest.raises(ValueError, match="dtype"):
        dense_tflops("V100", "fp8")
    with pytest.raises(ValueError, match="dtype"):
        effective_dtype("V100", "tf32")
    assert ridge_point_flops_per_byte("V100") == pytest.approx(125e12 / 900e9)


def test_every_catalogued_peak_is_positive_and_fp8_beats_bf16():
    from llmsizing import get_gpu, list_gpus

    for name in list_gpus():
        g = get_gpu(name)
        for dtype in ("bf16", "fp16", "fp16-acc16"):
            assert math.isfinite(dense_tflops(g, dtype)) and dense_tflops(g, dtype) > 0, (name, dtype)
        assert dense_tflops(g, "fp16-acc16") >= dense_tflops(g, "fp16")
        if g.fp8_dense_tflops is not None:
            assert dense_tflops(g, "fp8") > dense_tflops(g, "bf16"), name


def test_gpu_comparison_covers_the_whole_catalogue_without_nan():
    from llmsizing import list_gpus

    df = gpu_comparison()
    assert list(df.index) == list_gpus()
    numbers = df.drop(columns=["link", "dtype", "bf16_sparse_tflops"]).to_numpy(dtype=float)
    assert np.isfinite(numbers).all() and (numbers > 0).all()
    from llmsizing.hardware import has_structured_sparsity      # NaN only where no sparse peak exists

    sparse = df["bf16_sparse_tflops"]
    assert (sparse.isna() == [not has_structured_sparsity(g) for g in df.index]).all()
    assert (sparse.dropna() == 2 * df["bf16_dense_tflops"][sparse.notna()]).all()
    assert df.loc["V100", "dtype"] == "fp16" and (df.drop(index="V100")["dtype"] == "bf16").all()
    assert df.loc["V100", "bf16_dense_tflops"] == 125


def test_catalogue_sweeps_price_the_v100_in_fp16():
    """cost_by_gpu, serving_cost_by_gpu, plan and step compute time sweep (or accept) every GPU: the V100 is
    priced in FP16 and the result says so; nothing is NaN for a GPU that fits."""
    from llmsizing.comm import step_compute_time_s
    from llmsizing.planner import plan
    from llmsizing.serve import serving_cost_by_gpu
    from llmsizing.time_cost import cost_by_gpu

    df = cost_by_gpu("llama-2-7b", tokens=1e10, seq=2048).set_index("gpu")
    assert df.loc["V100", "dtype"] == "fp16" and (df.drop(index="V100")["dtype"] == "bf16").all()
    fits = df[df["fits"]]
    assert "V100" in fits.index and np.isfinite(fits[["cost_usd", "days_on_min_gpus"]].to_numpy()).all()
    s = serving_cost_by_gpu("llama-2-7b")
    assert "fp16" in s.loc["V100", "note"] and "no bf16" in s.loc["V100", "note"]
    assert s.loc["H100 SXM", "note"] == ""
    p = plan("llama-2-7b", tokens=1e10, gpus=["V100"], seq=2048, global_batch=512)
    assert len(p) and np.isfinite(p["cost_usd"]).all()
    t = step_compute_time_s("llama-2-7b", batch=1, seq=2048, gpu="V100", kernel_efficiency=0.4)
    # 125 TFLOP/s both, but the V100's HBM (900 GB/s against the A10's 600) puts its ridge lower, so its GEMMs
    # reach more of that peak (issue 34): a little faster, never slower
    a10 = step_compute_time_s("llama-2-7b", batch=1, seq=2048, gpu="A10", kernel_efficiency=0.4)
    assert np.isfinite(t) and 0.8 * a10 < t < a10
    with pytest.raises(ValueError, match="dtype"):
        step_compute_time_s("llama-2-7b", batch=1, seq=2048, gpu="V100", dtype="fp8")


def test_memory_interface_of_the_shipping_b200_by_hand():
    """7,680 bits / 8 = 960 B per transfer; 3,996 MHz x 2 = 7.992 GT/s; 960 x 7.992 = 7,672.32 GB/s, 4.3% below
    NVIDIA's 8 TB/s (data/gpu_memory_interface.csv's B200 row, pytorch/ao PR 4002)."""
    import pytest

    from llmsizing.hardware import memory_interface, memory_interface_gbps

    assert memory_interface_gbps(7680, 3996) == pytest.approx(7672.32)
    assert memory_interface_gbps("B200") == pytest.approx(7672.32)
    mi = memory_interface("B200")
    assert (mi.bus_bits, mi.clock_mhz) == (7680, 3996) and mi.source and mi.as_of
    # NVIDIA's DGX B200 page: 64 TB/s for eight GPUs, 8,000 GB/s each (the row's quoted_gbps)
    assert mi.quoted_gbps == 64_000 / 8
    # chapter 6's "NVIDIA's 8 TB/s is 4% above what its bus and clock can carry"
    assert f"{mi.quoted_gbps / memory_interface_gbps('B200') - 1:.0%}" == "4%"
    with pytest.raises(ValueError, match="clock_mhz"):
        memory_interface_gbps(7680, 0)
    with pytest.raises(ValueError, match="gpu='H100 SXM'"):
        memory_interface("H100 SXM")


def test_catalogue_bandwidth_is_the_memory_interface_rounded():
    """Where a GPU's bus and clock are known, data/gpus.csv's memory_bandwidth_gbps is their product rounded to
    0.1 TB/s (the catalogue's precision): the two files cannot drift apart."""
    import csv

    from llmsizing import get_gpu
    from llmsizing.hardware import GPU_MEMORY_INTERFACE_CSV, memory_interface_gbps

    with open(GPU_MEMORY_INTERFACE_CSV, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert rows
    for r in rows:
        assert r["source"] and len(r["as_of"]) == 10, r["gpu"]
        assert get_gpu(r["gpu"]).memory_bandwidth_gbps == round(memory_interface_gbps(r["gpu"]) / 100) * 100


def test_old_b200_constants_warn_and_keep_their_values():
    import pytest

    import llmsizing.hardware as hw

    with pytest.warns(DeprecationWarning, match="memory_interface"):
        assert hw.B200_MEMORY_BUS_BITS == 7680
    with pytest.warns(DeprecationWarning, match="memory_interface"):
        assert hw.B200_MEMORY_CLOCK_MHZ == 3996.0


def test_landscape_table_keeps_its_columns_with_long_names():
    """Chapter 6's GPU table: every row's columns start where the header's do, whatever the name's length.
    "A100 PCIe 80GB" and "RTX 6000 Ada" (14 and 12 characters) overran a 10-character name column and pushed
    their rows 4 and 2 characters right of the header (read39a)."""
    from llmsizing.charts import render_gpu_landscape

    lines = render_gpu_landscape(["H100 SXM", "A100 PCIe 80GB", "RTX 6000 Ada"]).summary.splitlines()
    end = lines[0].index("memory") + len("memory")       # the column is right-aligned: it ends where "memory" does
    for line in lines[1:]:
        assert line.index(" GiB") + len(" GiB") == end, line


def test_decode_resident_batch_limit_by_hand_and_where_the_figure_greys():
    """Llama 3 8B in bf16 on an H100 SXM at 4,096 tokens (read39a: the figure greyed from 181, the geometric
    midpoint of the sampled batches 128 and 256, while chapter 6 says more than 129 do not fit).
    Weights 8,030,261,248 x 2 = 16,060,522,496 B; KV per token 32 layers x 8 KV heads x 128 x (K, V) x 2 B =
    131,072 B, x 4,096 = 536,870,912 B a sequence; the card 81,559 MiB = 85,520,809,984 B (data/gpus.csv).
    (85,520,809,984 - 16,060,522,496) / 536,870,912 = 69,460,287,488 / 536,870,912 = 129.380 sequences."""
    from llmsizing.charts import render_decode_roofline
    from llmsizing.hardware import decode_resident_batch_limit

    limit = decode_resident_batch_limit("llama-3-8b", "H100 SXM", context=4096)
    assert limit == pytest.approx((85_520_809_984 - 16_060_522_496) / 536_870_912, rel=1e-12)
    assert 129 < limit < 130
    fig = render_decode_roofline("llama-3-8b", "H100 SXM", context=4096).figure
    span = [p for p in fig.axes[0].patches if p.get_label() == "weights + KV cache exceed one GPU"]
    assert len(span) == 1
    x0 = span[0].get_x()
    assert x0 == pytest.approx(limit)
    with pytest.raises(ValueError, match="weights"):
        decode_resident_batch_limit("llama-3-70b", "H100 SXM", context=4096)   # 141 GB of bf16 weights
    fig = render_decode_roofline("llama-3-70b", "H100 SXM", context=4096).figure   # all greyed, no error
    span = [p for p in fig.axes[0].patches if p.get_label() == "weights + KV cache exceed one GPU"]
    assert span[0].get_x() == pytest.approx(2**-0.5)


def test_decode_resident_batch_by_hand():
    """Chapter 6's exercise 1 (the search hardware_prose.decode_fill used to run): the most 4,096-token
    sequences whose weights + KV cache fit the whole card. Llama 3 8B: weights 8,030,261,248 x 2 =
    16,060,522,496 B, KV 2 x 32 layers x 8 KV heads x 128 x 2 B x 4,096 = 536,870,912 B a sequence. H100 SXM
    (81,559 MiB = 85,520,809,984 B): 69,460,287,488 / 536,870,912 = 129.4 -> 129; H200 (150,754,820,096 B):
    250.9 -> 250. Llama 3 70B: weights 141,107,412,992 B, more than an H100 holds -> 0; KV 80 layers, so
    1,342,177,280 B a sequence; on the H200 9,647,407,104 / 1,342,177,280 = 7.19 -> 7.
    At the edge: 100 sequences of the 8B need 16,060,522,496 + 100 x 536,870,912 = 69,747,613,696 B; a card of
    66,517 MiB (69,748,129,792 B) holds them and not a 101st, one of 66,516 MiB (69,747,081,216 B) 99."""
    from dataclasses import replace

    from llmsizing import Model
    from llmsizing.catalog import get_gpu
    from llmsizing.hardware import decode_resident_batch

    assert decode_resident_batch("llama-3-8b", "H100 SXM", context=4096) == 129
    assert decode_resident_batch("llama-3-8b", "H200", context=4096) == 250
    assert decode_resident_batch("llama-3-70b", "H100 SXM", context=4096) == 0
    assert decode_resident_batch("llama-3-70b", "H200", context=4096) == 7
    h100 = get_gpu("H100 SXM")
    assert decode_resident_batch("llama-3-8b", replace(h100, memory_mib=66_517), context=4096) == 100
    assert decode_resident_batch("llama-3-8b", replace(h100, memory_mib=66_516), context=4096) == 99
    mamba = Model.from_hf_config({"model_type": "mamba2"})      # a fixed state, no KV cache: no bound
    with pytest.raises(ValueError, match="model: mamba2 has no KV cache"):
        decode_resident_batch(mamba, "H100 SXM", context=4096)
