"""Chapter 18's published MoE runs in sentences (llmsizing.moe_run_prose, issue 38) and the prose's list and
number helpers (llmsizing.prose). Expected texts are worked by hand from the runs' published figures
(data/moe_published_runs.csv) or written out for a made-up table; none is copied from the code's output."""

import pandas as pd
import pytest

from llmsizing.moe_run_prose import ProseOutOfDate, published_runs_prose, ranges_prose
from llmsizing.prose import and_list, number_word


def test_and_list_joins_as_the_book_writes():
    assert and_list(["DeepSeek-V3"]) == "DeepSeek-V3"
    assert and_list(("a", "b")) == "a and b"
    assert and_list(iter(["a", "b", "c"])) == "a, b and c"
    with pytest.raises(ValueError, match="at least one"):
        and_list([])
    with pytest.raises(TypeError, match="str"):
        and_list(["a", 2])


def test_number_word_in_words_to_twenty_then_figures():
    assert [number_word(n) for n in (0, 1, 7, 16, 20)] == ["zero", "one", "seven", "sixteen", "twenty"]
    assert number_word(21) == "21" and number_word(1024) == "1,024"
    with pytest.raises(ValueError, match="0 or more"):
        number_word(-1)
    for bad in (2.0, True, "3"):
        with pytest.raises(TypeError, match="whole number"):
            number_word(bad)


# a made-up check: every run predicted at 100 GPU-hours with the range 81 to 125, so a run is inside when its
# published hours lie in [81, 125]
_RUNS = ["DeepSeek-V3", "DeepSeek-V2", "JetMoE-8B", "Phi-3.5-MoE", "Llama 4 Scout", "Granite 3.0 1B-A400M",
         "Granite 3.0 3B-A800M", "OLMoE-1B-7B"]
_LAID = ["yes", "yes", "partly", "partly", "no", "yes", "yes", "partly"]
_EP = [64, 8, 1, 1, 8, 1, 1, 1]


def _made_up(published):
    idx = [f"{r} pre-training" for r in _RUNS]
    pub = pd.Series(published, index=idx, dtype=float)
    chk = pd.DataFrame({"published": pub, "predicted": 100.0, "ratio": pub / 100.0, "low": 81.0,
                        "high": 125.0, "inside": (pub >= 81) & (pub <= 125), "layout_published": _LAID},
                       index=idx)
    return chk, pd.DataFrame({"ep": _EP}, index=idx)


def test_ranges_prose_names_the_misses_of_a_made_up_table():
    # V3 100 in; V2 124 in; JetMoE 140 above; Phi 74 below; Scout 118 in; Granite 135, 137 above; OLMoE 105 in
    chk, runs = _made_up([100, 124, 140, 74, 118, 135, 137, 105])
    t = ranges_prose(chk, runs).values
    assert t["miss_says"] == ("Four runs miss, three above and one below, and the misses include two of the "
                              "four runs whose layout is published: DeepSeek-V3 and DeepSeek-V2 are inside; "
                              "the two Granite runs are not")
    assert t["other_above"] == "three" and t["v2_where"] == "inside"
    assert t["n_inside"] == "4 of 8"
    assert t["inside_list"] == "DeepSeek-V3 1.00, DeepSeek-V2 1.24, Llama 4 Scout 1.18, OLMoE-1B-7B 1.05"
    assert (t["range_lo"], t["range_hi"], t["ratio_min"], t["ratio_max"]) == ("0.81", "1.25", "0.74", "1.40")
    # V2 above too: five miss, four above; of the four laid-out runs only V3 is inside
    chk, runs = _made_up([100, 130, 140, 74, 118, 135, 137, 105])
    t = ranges_prose(chk, runs).values
    assert t["miss_says"] == ("Five runs miss, four above and one below, and the misses include three of "
                              "the four runs whose layout is published: DeepSeek-V3 is inside; DeepSeek-V2 "
                              "and the two Granite runs are not")
    assert t["other_above"] == "other three" and t["v2_where"] == "above"


@pytest.mark.parametrize("published, what", [
    ([100, 124, 140, 90, 118, 135, 137, 105], "Phi-3.5-MoE alone is below"),     # Phi inside
    ([100, 124, 120, 74, 118, 135, 137, 105], "JetMoE-8B and the two Granite"),   # JetMoE inside
    ([130, 124, 140, 74, 118, 135, 137, 105], "JetMoE-8B and the two Granite"),   # V3 above
    ([100, 124, 140, 74, 118, 135, 137, 60], "Phi-3.5-MoE alone is below"),       # OLMoE below too
])
def test_ranges_prose_refuses_a_table_its_sentences_would_misread(published, what):
    chk, runs = _made_up(published)
    with pytest.raises(ProseOutOfDate, match=what):
        ranges_prose(chk, runs)


def test_ranges_prose_refuses_expert_parallelism_in_a_run_above():
    chk, runs = _made_up([100, 124, 140, 74, 118, 135, 137, 105])
    runs.loc["JetMoE-8B pre-training", "ep"] = 8
    with pytest.raises(ProseOutOfDate, match="without expert parallelism"):
        ranges_prose(chk, runs)


def test_published_runs_prose_reads_the_published_figures():
    p = published_runs_prose()
    t, table = p.values, p.data["table"]
    assert len(table) == 9 and list(table.columns) == ["layout published", "published", "MoE step",
                                                       "published / step", "dense range", "inside dense",
                                                       "MoE range"]
    # DeepSeek-V2: 172.8K H800 GPU-hours per trillion tokens over 8.1T tokens = 1,399,680
    assert table.loc["DeepSeek-V2 pre-training", "published"] == "1,399,680"
    # OLMoE: 5.133T tokens over 256 GPUs x 240 h = 61,440 GPU-hours, 221,184,000 GPU-seconds: 23,207 a second
    assert t["olmoe_tps"] == "23,207"
    assert t["olmoe_per_gpu"] == "4"                       # 1,024 sequences over dp=256
    # JetMoE: 1.25T tokens at about 100B a day on 96 GPUs: 12.5 days x 96 x 24 h = 28,800 GPU-hours
    # (30,000 published)
    assert (t["jet_per_day"], t["jet_steady_gpuh"], t["jet_gpuh"]) == ("100B", "28,800", "30,000")
    # Granite 3.0 1B-A400M: 71,171 GPU-hours x 0.7 kW x PUE 1.3 = 64,765.6 kWh
    assert (t["table7_watts"], t["table7_pue"], t["granite1_mwh"]) == ("700 W", "1.3", "64.8")
    # ... and 10T tokens over 71,171 h: 39,030 tokens a GPU-second, read as node-hours of eight GPUs 4,879
    assert (t["granite1_tps"], t["granite1_node_gpus"]) == ("39,030", "eight")
    assert t["granite1_node_tps"] == "4,879"
    # its experts: a 4,096-token sequence routed top-8 over 32 experts gives 1,024 rows an expert
    assert t["pad_rows"] == "1,024"
    assert t["n_runs"] == "9" and t["nominal"] == "80%" and t["range_miss"] == "1.8"   # 9 x (1 - 0.8)
    # the glued names the chapter's markdown quotes, each a non-empty sentence or number
    assert all(isinstance(v, str) and v for k, v in t.items() if k != "fp8_cov_says")
    assert {"miss_says", "v2_miss_says", "moe_held", "grin_faster", "jet_moa_cost", "phi_8_where"} <= set(t)
    # the table's ratio column is published / step, and the planner's MoE factors bracket 1
    v2_step = p.data["check"].loc["DeepSeek-V2 pre-training", "predicted"]
    assert table.loc["DeepSeek-V2 pre-training", "published / step"] == f"x{1_399_680 / v2_step:.2f}"
    assert p.data["moe_low"] < 1 < p.data["moe_high"]
    # the printed report is the table under its title
    assert p.report.splitlines()[0] == "GPU-hours of published MoE pre-training runs against the library"
    assert "DeepSeek-V2 pre-training" in p.report and "1,399,680" in p.report


def test_rack_dispatch_prose_reads_the_catalogue_and_deepep_by_hand():
    import math

    from llmsizing.moe_case_prose import rack_dispatch_prose

    t = rack_dispatch_prose().values
    # DeepEP's one-node test: a token reaches the GPUs holding any of its 8 experts, 32 of the 256 a GPU:
    # 8 (1 - C(224, 8) / C(256, 8)) = 5.29 GPUs
    assert t["dep_gpus_8"] == f"{8 * (1 - math.comb(224, 8) / math.comb(256, 8)):.1f}" == "5.3"
    # ... so its 153 GB/s at EP 8 is 4,096 x 5.2947 x 7,168 x 1.03125 B (FP8 and a 4-byte scale per 128)
    # = 160.3 MB in 1.05 ms
    assert t["dep_gbps_8"] == "153 GB/s"
    assert t["dep_ms_8"] == f"{4096 * 5.2947 * 7168 * 1.03125 / 153e9 * 1e3:.2f} ms" == "1.05 ms"
    # the datasheets: GB200 NVLink 1.8 TB/s and the DGX H100's 900 GB/s both ways, FP8 dense 5,000 / 1,979
    assert (t["nvl_link"], t["nvl_h100_link"], t["nvl_nic"]) == ("900 GB/s", "450 GB/s", "400 Gb/s")
    assert t["nvl_peak_ratio"] == "2.5"
    assert t["nvl_m"] == "120"                         # 15,360 sequences a step over 128 data-parallel ranks
    # the ratios the prose quotes agree with the times it quotes
    keys = ("nvl_h800_ms", "nvl_rack_ms", "nvl_h800_ep8_ms", "dep_ms_8")
    ms = {key: float(t[key].split()[0]) for key in keys}
    assert abs(ms["nvl_h800_ms"] / ms["nvl_rack_ms"] / float(t["nvl_ratio"]) - 1) < 0.05
    assert abs(ms["nvl_h800_ep8_ms"] / ms["dep_ms_8"] / float(t["dep_x_8"]) - 1) < 0.02
    assert t["nvl_h800_ep8_ms"] == t["nvl_h800_ep16_ms"]       # the prose: the H800's first two points equal
    with pytest.raises(ValueError, match="tokens"):
        rack_dispatch_prose(tokens=0)


def test_deepseek_terms_prose_by_hand():
    from llmsizing.moe_case_prose import deepseek_terms_prose

    terms = deepseek_terms_prose()
    table, t = terms.data["table"], terms.values
    assert len(table) == 5                  # 1F1B, DualPipe, the split, the MTP module, the SMs
    # the report (Sec. 3.2.2): 20 of each H800's 132 SMs run the communication, so compute runs on 112,
    # 132 / 112 - 1 = 17.9% more time
    assert (t["comm_sms"], t["h800_sms"], t["compute_sms"], t["terms_sms"]) == ("20", "132", "112", "18%")
    # the split 3, fourteen chunks of 4, 2: DualPipe's rank 0 holds chunks 0 and 15, 3 + 2 = 5 layers, the
    # others 4 + 4 = 8
    assert (t["rank0_layers"], t["rank_layers"]) == ("5", "8")
    # the sum against the published 2.664M GPU-hours: -0.1% means within 0.05% to 0.15% below
    final = float(t["terms_final"].rstrip("M")) * 1e6
    assert t["terms_dev"] == "-0.1%" and abs(final / 2.664e6 - 1) < 0.005
    lo, hi = (float(x.rstrip("M")) * 1e6 for x in t["terms_range"].split(" to "))
    assert lo < final < hi
    assert t["allow_rule"] == "1 GiB + 8%"
    # the MTP module (issue 38: about 3.8% of the FLOPs, not 2%)
    assert t["mtp_share"] == "3.8%"
    # the splits the prose used to type (small47): DeepSeek-V3's 61 layers over 16 chunks; evenly, 61 = 13 x 4
    # + 3 x 3; the memory plan one layer fewer at each end, 3 + 14 x 4 + 2 = 61
    assert t["ds3_layers"] == "61"
    assert t["split_even"] == "thirteen chunks of 4, then three chunks of 3"
    assert t["split_balanced"] == "3, fourteen chunks of 4, then 2"


def test_split_words_counts_runs_of_equal_chunks():
    from llmsizing.moe_case_prose import split_words

    assert split_words((5,)) == "5" and split_words([4, 4]) == "two chunks of 4"
    assert split_words((1, 2, 2, 1)) == "1, two chunks of 2, then 1"
    for bad, err in (((), ValueError), ((3, 0), ValueError), ((3, -1), ValueError), ((2.0,), TypeError)):
        with pytest.raises(err, match="split|count|whole"):
            split_words(bad)


def test_deepseek_memory_prose_by_hand():
    from llmsizing.moe_case_prose import deepseek_memory_prose

    memory = deepseek_memory_prose()
    report, t = memory.report, memory.values
    assert "what one MoE layer keeps per token (bytes)" in report and "(+ MTP)" in report
    g = {k: float(v) for k, v in t.items()}
    assert t["h800_gib"] == "79.6"                     # 81,559 MiB / 1,024
    # the margin and the overload are differences of the printed totals
    assert abs(g["h800_gib"] - g["dsm_balanced"] - g["dsm_spare"]) < 0.11
    assert abs(g["dsm_even"] - g["h800_gib"] - g["dsm_over"]) < 0.11
    # the allowance is 1 GiB + 8% of the peak it sits on (chapter 3's rule): 1 + 0.08 (76.8 - 6.6) = 6.6
    assert abs(1 + 0.08 * (g["dsm_balanced"] - g["dsm_allow"]) - g["dsm_allow"]) < 0.06
    # the most loaded GPU's total is its states, activations, backward working set and allowance
    assert abs(g["dsm_balanced_states"] + g["dsm_balanced_acts"] + g["dsm_work"] + g["dsm_allow"]
               - g["dsm_balanced"]) < 0.25
    # rank i of p = 16 holds p - i micro-batches under 1F1B, and p - i + i + 1 = p + 1 = 17 under DualPipe
    # (the report's Table 2); DualPipe's two chunks double its states
    i = int(t["dsm_1f1b_rank"])
    assert (g["dsm_1f1b_r_flight"], g["dsm_dual_r_flight"]) == (16 - i, 17)
    assert 1.9 < g["dsm_dual_r_states"] / g["dsm_1f1b_r_states"] < 2.1


def test_all_to_all_evidence_prose_by_hand():
    from llmsizing.charts import MOE_LAYOUT_DEFAULT
    from llmsizing.moe_case_prose import all_to_all_evidence_prose

    a2a = all_to_all_evidence_prose(MOE_LAYOUT_DEFAULT)
    table, t = a2a.data["table"], a2a.values
    assert {"ranks", "mean / library", "busiest / library", "1 sigma"} <= set(table.columns)
    # the H800 node: 400 Gb/s InfiniBand per GPU = 50 GB/s, a quarter of NVLink's 400 GB/s both ways (200 one
    # way); the report's 160 GB/s NVLink is 3.2 times the NIC
    assert (t["h800_nic_gbit"], t["nic"], t["h800_link"]) == ("400 Gb/s", "50 GB/s", "200 GB/s")
    assert (t["nic_of_nvl"], t["nvl_160_x"], t["nvl_160"]) == ("25%", "3.2", "160 GB/s")
    # the NVL72 rack: 72 GPUs, 18 trays of 4
    assert (t["nvl_domain"], t["nvl_trays"], t["nvl_tray_gpus"]) == ("72", "18", "4")
    # the skew: 1 + max violation x sqrt(ep / E): Mixtral (aux loss) 1 + mean at ep = E = 8; DeepSeek-V3
    # (no aux loss) 1 + mean x sqrt(64 / 256) = 1 + mean / 2
    assert abs(float(t["skew_mix"]) - (1 + float(t["vio_mean"]))) < 0.006
    assert abs(float(t["skew_ds3"]) - (1 + float(t["vio_free_mean"]) / 2)) < 0.006
    assert t["skew_mix_lo"] == f"{1 + float(t['vio_lo']):.2f}"
    assert t["skew_mix_hi"] == f"{1 + float(t['vio_hi']):.2f}"
    # one expert a rank (ep = E = 256): the skew unshrunk, 1 + mean of 0.04, 0.04, 0.027 = 1.036
    assert t["skew_ds3_flat"] == f"{1 + (0.04 + 0.04 + 0.027) / 3:.2f}" == "1.04"


def test_dualpipe_pick_prose_by_hand():
    """plan(schedule="dualpipe") on DeepSeek-V3's 2,048 H800s: the published pp 16 / ep 64 with ZeRO-1 over
    2,048 / 16 = 128 ranks; its micro-batches make the published batch of 15,360 sequences; the GPU-hours'
    range is the MoE range (published over predicted) around the point; another ep comes within 1%."""
    from llmsizing.mfu import layout_range_factors
    from llmsizing.moe_case_prose import dualpipe_pick_prose

    t = dualpipe_pick_prose().values
    assert (t["dp_pick_pp"], t["dp_pick_ep"], t["dp_pick_dp"], t["dp_pick_rc"]) == ("16", "64", "128", "full")
    assert 128 * int(t["dp_pick_micro"]) * int(t["dp_pick_m"]) == 15_360
    gh = float(t["dp_pick_gh"].rstrip("M"))
    lo, hi = (float(x.rstrip("M")) for x in t["dp_pick_gh_range"].split(" to "))
    f_lo, f_hi = layout_range_factors("H800", "fp8", moe=True)       # the MFU's factors: hours go as 1 / MFU
    assert abs(lo - gh / f_hi) < 0.011 and abs(hi - gh / f_lo) < 0.011
    assert lo < gh < hi and 1.3 < hi / gh < 1.5                      # the MoE range's top, about x1.40
    assert t["dp_pick_next_ep"] in {"8", "16", "32", "128", "256"}   # another divisor of 256 experts
    assert 0 <= float(t["dp_pick_next_gap"].rstrip("%")) < 1


def test_dualpipe_pick_prose_stops_if_the_pick_costs_less_than_the_terms(monkeypatch):
    """The page says the pick (fully recomputed) costs more GPU-hours than the term-by-term sum, 2.66M (the
    published 2.664M within 0.1%, chapter 18's table): with a sum above any pick the prose is out of date."""
    import llmsizing.deepseek
    from llmsizing.moe_case_prose import dualpipe_pick_prose

    monkeypatch.setattr(llmsizing.deepseek, "deepseek_v3_time_terms",
                        lambda: pd.DataFrame({"gpu_hours": [1e12]}))
    with pytest.raises(ProseOutOfDate, match="term-by-term"):
        dualpipe_pick_prose()
