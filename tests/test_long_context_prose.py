"""Chapter 17's opening numbers (llmsizing.long_context_prose, issue 38). Expected texts are worked by hand from
Llama 3's report (Table 4's 128K row: 16,384 H100s, TP8 CP16 PP16, 16M-token batches, 380 TFLOPs a GPU), the
models' published shapes and the planner's stated settings; none is copied from the code's output."""

import pandas as pd
import pytest

from llmsizing import long_context_prose as lcp
from llmsizing.prose import ChapterText, ProseOutOfDate


def test_opening_prose_reads_table_4_and_the_shapes_by_hand():
    o = lcp.opening_prose()
    assert isinstance(o, ChapterText) and o.report == ""
    t = o.values
    # Table 4's 128K row: tp 8 x cp 16 x pp 16 x dp 8 = 16,384 GPUs; 16M tokens a batch = 128 sequences of
    # 131,072, so 128 / 8 replicas = 16 micro-batches each; read with its printed DP 4, 8,192 GPUs
    assert (t["row_gpus"], t["row_degrees"], t["l3_gpus"]) == ("16,384", "tp=8, cp=16 and pp=16", "16,384")
    assert (t["row_batch"], t["gb"], t["l3_m"], t["l3_row_dp"]) == ("16M", "128", "16", "8")
    assert t["dp4_gpus"] == "8,192"
    # 380 TFLOPs a GPU of the H100's 989 dense BF16: 38.4%
    assert (t["l3_tflops"], t["l3_pub"]) == ("380", f"{380 / 989:.1%}") == ("380", "38.4%")
    # a 131,072-token sequence over cp 16 leaves 8,192 tokens a GPU; the stage is ~800B tokens (Sec. 3.4.2)
    assert (t["seq_long"], t["tok_cp16"], t["meta_cp"], t["run_tokens"]) == ("131,072", "8,192", "16", "800B")
    # the all-gather: K and V of the whole sequence, one of the 8 KV heads a GPU at tp 8, 128 wide, 2 bytes:
    # 2 x 131,072 x 1 x 128 x 2 B = 64 MiB, of which one GPU's chunk is 64 / 16 = 4 MiB
    assert (t["heads"], t["kv_heads"], t["gathered"], t["chunk"]) == ("128", "8", "64 MiB", "4 MiB")
    assert t["eager_pair"] == "32"                           # 2 a / t = 2 x 128 / 8 bytes
    # GB200 NVL72: 72 GPUs in one NVLink domain; tp 8 x cp 8 = 64 of them
    assert (t["nvl_domain"], t["nvl_group"]) == ("72", "64")
    # the planner tries cp from 16K, keeping at least 4,096 tokens a rank: 131,072 / 4,096 = 32, 16,384 / 4,096 = 4
    assert (t["cp_min_seq"], t["cp_min_tokens"]) == ("16K", "4,096")
    assert (t["cp_degrees"], t["cp_degrees_16k"]) == ("1, 2, 4, 8, 16, 32", "1, 2, 4")
    # Mistral 7B: 32 layers, hidden 4,096, 32 query and 8 KV heads, MLP 14,336; Llama 2 7B: 32 KV heads
    assert t["ex7_shape"] == "32 of them, hidden 4,096, 32 query and 8 KV heads, MLP 14,336"
    assert t["ex5_kv"] == "32"
    # what later cells compute with
    d = o.data
    assert (d["meta128"].tp, d["meta128"].cp, d["meta128"].pp, d["meta128"].dp) == (8, 16, 16, 8)
    assert d["nvl"].cp == 8 and d["rack"] == 72 and d["m"] == 16 and d["fwd"] == 2 * 131072 * 128 * 2
    assert d["run"]["global_batch"] == 128 and d["run"]["max_gpus"] == 16384 and d["run"]["seq"] == lcp.LONG_SEQ
    assert (lcp.SHORT_SEQ, lcp.LONG_SEQ) == (8192, 131072)


def test_opening_prose_refuses_a_row_its_sentences_would_misread(monkeypatch):
    rows = lcp.published_runs()

    def dp4():                                   # the 128K row as if it ran 4 replicas, as Table 4 prints
        out = rows.copy()
        out.loc[out["run"] == lcp.LLAMA3_128K_ROW, "dp"] = 4
        return out

    monkeypatch.setattr(lcp, "published_runs", dp4)
    with pytest.raises(ProseOutOfDate, match="8 data-parallel replicas"):
        lcp.opening_prose()
    assert isinstance(rows, pd.DataFrame)


# ------------------------------------------------------------- the sections' hand formulas (nb47, issue 38)
def test_ulysses_shards_by_hand():
    """Llama 3 8B (32 query heads, 8 KV heads, 128 wide) at 131,072 tokens over cp 8: 16,384 tokens a GPU in
    16 bits, S_q = 2 x 16,384 x 32 x 128 B = 128 MiB and S_kv = 2 x 16,384 x 2 x 8 x 128 B = 64 MiB."""
    from llmsizing import get_model

    q, kv = lcp.ulysses_shard_bytes(get_model("llama-3-8b"), seq=131072, cp=8)
    assert (q, kv) == (128 * 2**20, 64 * 2**20)
    # the ring sends 3 cp S_kv / (2 (2 S_q + S_kv)) = 3 x 8 x 64 / (2 x 320) = 2.4 times Ulysses' bytes
    assert lcp.ring_over_ulysses(q, kv, 8) == pytest.approx(2.4, rel=1e-12)
    # with one KV head per query head (Llama 2 7B, exercise 5), S_kv = 2 S_q: 3 cp / 4, 24 at cp 32
    q7, kv7 = lcp.ulysses_shard_bytes(get_model("llama-2-7b"), seq=16384, cp=32)
    assert kv7 == 2 * q7 and lcp.ring_over_ulysses(q7, kv7, 32) == 24


def test_window_exchange_by_hand():
    # cp 8 over 131,072 tokens: the gather brings 7 chunks of 16,384 tokens, a 4,096-token window 2 x 4,096
    assert lcp.window_exchange_fewer(131072, 8, 4096) == 7 * 16384 / 8192 == 14


@pytest.mark.parametrize("call", [
    lambda: lcp.ulysses_shard_bytes(None, seq=131072, cp=0),
    lambda: lcp.ulysses_shard_bytes(None, seq=0, cp=8),
    lambda: lcp.ring_over_ulysses(1.0, -1.0, 8),
    lambda: lcp.ring_over_ulysses(1.0, 1.0, 0),
    lambda: lcp.window_exchange_fewer(131072, 8, 0),
])
def test_the_hand_formulas_refuse_bad_input(call):
    with pytest.raises(ValueError):
        call()


def test_the_hand_formulas_refuse_non_numbers():
    with pytest.raises(TypeError, match="cp"):
        lcp.window_exchange_fewer(131072, 8.0, 4096)
    with pytest.raises(ValueError, match="q_bytes"):
        lcp.ring_over_ulysses(float("nan"), 1.0, 8)


def test_a_section_refuses_numbers_its_sentences_would_misread():
    """gloo_prose says the library's saved memory is within 0.5% of the measured and the bytes sent exact:
    a measurement 1% off, or one byte off, must stop the chapter, not print a false sentence."""
    from llmsizing.dist_compare import compare_cp
    from llmsizing.long_context_prose_plan import gloo_prose

    cmp = compare_cp()
    assert float(gloo_prose(cmp).values["gloo_gap"].rstrip("%")) < 0.5
    with pytest.raises(ProseOutOfDate, match="within 0.5%"):
        gloo_prose(cmp.assign(saved_ratio=cmp["saved_ratio"] * 1.01))
    with pytest.raises(ProseOutOfDate, match="bytes sent exact"):
        gloo_prose(cmp.assign(grad_sync_measured_bytes=cmp["grad_sync_measured_bytes"] + 1))


@pytest.fixture(scope="module")
def l405_h100():
    from llmsizing import get_gpu, get_model
    return get_model("llama-3.1-405b"), get_gpu("H100 SXM")


def test_the_first_tables_use_the_runs_the_cell_computed(l405_h100):
    """The chapter's cells compute the runs a reader edits and hand them to the sections: the sections must
    read those runs (a cp=16 that no longer fits must stop the chapter) and name the ones they miss."""
    from llmsizing.parallel import llama3_405b_layout

    model, gpu = l405_h100
    runs = lcp.cp_memory_prose(model, gpu).data["st_cp"]
    lays = {cp: llama3_405b_layout(8, cp=cp) for cp in (1, 4, 16)}
    given = {k: (lays[k[0]], t, s) for k, (t, s) in runs.items()}
    assert lcp.cp_memory_prose(model, gpu, given).values["cp16_none_tot"] == "78.5 GiB"   # Meta's, section 5
    swapped = dict(given)
    swapped[(16, "none")] = (lays[16], given[(1, "none")][1], given[(16, "none")][2])      # 128K on one GPU
    with pytest.raises(ProseOutOfDate, match="cp=16 fits"):
        lcp.cp_memory_prose(model, gpu, swapped)
    with pytest.raises(ValueError, match=r"runs .*missing \[\(4, 'full'\)\]"):
        lcp.cp_memory_prose(model, gpu, {k: v for k, v in given.items() if k != (4, "full")})
    par = llama3_405b_layout(128)
    mem = lcp.memory_prose(model, gpu, par).data["mem"]
    wrong = dict(mem)
    wrong[(8192, "none")] = mem[(131072, "none")]
    with pytest.raises(ProseOutOfDate, match="8K fits"):
        lcp.memory_prose(model, gpu, par, wrong)
    with pytest.raises(ValueError, match="mem must hold"):
        lcp.memory_prose(model, gpu, par, {(8192, "none"): mem[(8192, "none")]})


def test_zero1_gradients_by_hand_and_the_runs_it_reads(l405_h100):
    """Llama 3.1 405B's layer: attention 16,384 x (16,384 + 2 x 8 x 128) + 16,384^2 = 570,425,344 weights,
    MLP 3 x 16,384 x 53,248 = 2,617,245,696, two norms 32,768: 3,187,703,808. An eight-layer stage at tp 8
    holds one layer's worth a GPU: ZeRO-1's whole bf16 gradient is 2 x 3.19e9 B = 5.94 GiB; FSDP's fp32
    gradient of one one-layer chunk before its reduce-scatter 4 x 3.19e9 / 8 B = 1.48 GiB."""
    from llmsizing.long_context_prose_plan import zero1_prose
    from llmsizing.memory import training_memory
    from llmsizing.parallel import LLAMA3_RECIPE, llama3_405b_layout, llama3_long_context_layout

    model, gpu = l405_h100
    l3 = llama3_long_context_layout()
    t_meta = training_memory(model, batch=1, seq=131072, grad_accum=16, parallel=llama3_405b_layout(8, cp=16),
                             precision=LLAMA3_RECIPE)
    z = zero1_prose(model, gpu, l3, 16, pd.Series({"reported_tflops_per_gpu": 380.0}), 0.384, t_meta)
    per_layer = 16384 * (16384 + 2 * 8 * 128) + 16384**2 + 3 * 16384 * 53248 + 2 * 16384
    assert per_layer == 3_187_703_808
    assert z.values["zero1_grads"] == f"{2 * per_layer / 2**30:.1f} GiB" == "5.9 GiB"
    assert z.values["meta_gathered"] == f"{4 * per_layer / 8 / 2**30:.1f} GiB" == "1.5 GiB"
    given = z.data["res"]
    assert zero1_prose(model, gpu, l3, 16, pd.Series({"reported_tflops_per_gpu": 380.0}), 0.384, t_meta,
                       res=given).values == z.values
    with pytest.raises(ValueError, match="'none' and 'full'"):
        zero1_prose(model, gpu, l3, 16, pd.Series({"reported_tflops_per_gpu": 380.0}), 0.384, t_meta,
                    res={"none": given["none"]})


def test_the_rack_section_reads_the_step_the_cell_computed(l405_h100):
    """The GB200 section's step comes from the cell: the same layout priced on H100s (no Blackwell range note,
    a lower MFU than the racks') must stop the chapter rather than print the racks' sentences."""
    from llmsizing.layouts import step_time
    from llmsizing.long_context_prose_plan import nvl_prose
    from llmsizing.parallel import LLAMA3_RECIPE

    model, gpu = l405_h100
    o = lcp.opening_prose().data
    kw = dict(batch=1, seq=131072, grad_accum=16, precision=LLAMA3_RECIPE)
    s_meta = step_time(model, gpu, o["meta128"], **kw)
    args = (model, gpu, o["nvl"], o["rack"], o["m"], o["meta128"], o["run"], s_meta, o["l3"])
    ok = nvl_prose(*args)
    assert nvl_prose(*args, ag=ok.data["ag"]).values == ok.values
    assert ok.values["nvl_racks"] == f"{8 * 16}" and ok.values["nvl_rack_gpus"] == f"{8 * 16 * 72:,}"
    with pytest.raises(ProseOutOfDate):
        nvl_prose(*args, ag=step_time(model, gpu, o["nvl"], **kw))


def test_overlap_prose_splits_the_sequence_by_the_layouts_cp():
    """The tokens per rank where the ring starts to hide are the sequence over the layout's own cp (it was a
    typed 16, right only for Meta's layout): a toy sweep worked by hand, hidden from 16,384 tokens."""
    import pandas as pd

    from llmsizing.catalog import get_model
    from llmsizing.long_context_prose import overlap_prose
    seqs = [4096, 8192, 16384, 32768, 65536, 131072]
    sweep = pd.DataFrame({"exposed_s": [1.0, 0.5, 0.0, 0.0, 0.0, 0.0], "cp_comm_s": [1.0] * 6,
                          "all_gather_s": [0.4, 0.5, 0.4, 0.3, 0.2, 0.1], "compute_s": [1.0] * 6,
                          "attention_s": [0.5] * 6},
                         index=pd.Index(seqs, name="seq"))
    for cp, per_rank in ((16, "1,024"), (8, "2,048")):
        v = overlap_prose(sweep, get_model("llama-3.1-405b"), cp=cp).values
        assert (v["hidden_from"], v["hidden_from_rank"]) == ("16,384", per_rank)
    with pytest.raises(TypeError, match="cp"):
        overlap_prose(sweep, get_model("llama-3.1-405b"), cp=8.0)
