"""llmsizing.appendix: the formula summary's numbers and the claims its prose makes about them (issue 38).

Each expected value is worked by hand from a datasheet, a config or a CSV row, not read back from the function
under test: the values are the text the appendix shows, so a change of format fails here too.
"""

import csv
import math

import pytest

from llmsizing import get_model
from llmsizing.appendix import AC_CASES, allen_cunneen_errors, appendix_claims, appendix_values
from llmsizing.catalog import DATA_DIR

#: A stand-in for the simulation (2 s of CPU): the shape the real one has, both ends at 32 slots, 80% busy.
FAKE_AC = {case: 0.0 for case in AC_CASES} | {(32, 0.8, 0.0): -0.23, (32, 0.8, 2.0): 0.19,
                                              (8, 0.9, 2.0): 0.031, (8, 0.9, 1.0): 0.045,
                                              (32, 0.9, 1.0): -0.047}


@pytest.fixture(scope="module")
def values():
    return appendix_values(FAKE_AC)


def test_wire_counts_and_pipeline_examples(values):
    # two nodes of 8: each node sends 2 (2-1)/2 S = S; a flat ring of 16 GPUs 2 x 15/16 = 1.875 S
    assert (values["app_wire_hier"], values["app_wire_flat"]) == ("1", "1.875")
    assert values["app_zero_runs"] == "4"                    # m / p = 16 / 4 reduce-scatters per step
    assert values["app_vp_odd"] == "16.7%"                   # (p - 1) / (v m) = 1 / (2 x 3)


def test_numbers_from_configs(values):
    # DeepSeek-V3: kv_lora_rank 512 + qk_rope_head_dim 64; expanded, 128 heads x (128 + 64 key + 128 value)
    assert (values["app_mla_latent"], values["app_mla_expanded"]) == ("576", "40,960")
    # Llama 3 8B: 6 N_mm + 12 L s a d over 6 N_mm, N_mm = N less the untied input embedding V h
    n_mm = 8_030_261_248 - 128_256 * 4_096
    for s, key in ((2048, "app_6n_2k"), (8192, "app_6n_8k")):
        assert values[key] == f"{1 + 12 * 32 * s * 32 * 128 / (6 * n_mm):.2f}"
    assert (values["app_6n_2k"], values["app_6n_8k"]) == ("1.07", "1.29")
    # QLoRA: Llama-2-7B's block matrices, 32 x (4 h^2 + 3 h f), at nf4 with double quantisation + 2 bytes
    n_block = 32 * (4 * 4096**2 + 3 * 4096 * 11008)
    assert values["app_deq_gb"] == f"{n_block * ((4 + 8 / 64 + 32 / (64 * 256)) / 8 + 2) / 1e9:.1f}" == "16.3"


def test_constants_as_the_page_types_them(values):
    assert values["app_ckpt_bpp"] == "14"                    # bf16 weights 2 + fp32 master 4 + two moments 8
    assert values["app_cpu_adam_bytes"] == "30"              # grad 4 + master 4+4 + moments 8+8 + weight 2
    assert values["app_band"] == "1.25" and values["app_loss_bytes"] == "8"
    # PCIe Gen5 x16: 32 GT/s x 16 lanes x 128/130 / 8 bits; Gen4 half of it
    assert (values["app_host_link"], values["app_host_link_a100"]) == ("63.0", "31.5")
    assert 32 * 16 * 128 / 130 / 8 == pytest.approx(63.0, abs=0.05)
    assert values["app_rl_buckets"] == f"{math.ceil(61.064245248e9 / 2**29)}" == "114"   # slime: 512 MiB each


def test_calibration_numbers_from_their_csvs(values):
    with open(DATA_DIR / "kernel_efficiency.csv", newline="") as f:
        eff = {(r["generation"], r["dtype"]): float(r["kernel_efficiency"]) for r in csv.DictReader(f)}
    assert values["app_fp8_share"] == f"{eff['hopper', 'fp8'] / eff['hopper', 'bf16']:.3f}"
    # DDP's closed form: 2/3 x 7/8 x 989.4 TFLOP/s x eta over 450 GB/s one way (H100 datasheet)
    assert values["app_dp_closed"] == f"{2 / 3 * 7 / 8 * 989.4e12 * eff['hopper', 'bf16'] / 450e9:,.0f}"
    with open(DATA_DIR / "finetune_published.csv", newline="") as f:
        q = [r for r in csv.DictReader(f) if r["method"] == "qlora"]
    assert values["app_ft_qlora_gptq"] == f"{sum(r['quantizer'] == 'gptq-int4' for r in q)} of {len(q)}"


def test_queueing_and_goodput(values):
    # Erlang's C at 32 slots, 25.6 busy (80%): Erlang's B by its recursion, then B / (1 - rho (1 - B))
    b = 1.0
    for k in range(1, 33):
        b = 25.6 * b / (k + 25.6 * b)
    assert values["app_ac_big_wait"] == f"{b / (1 - 0.8 * (1 - b)):.0%}" == "16%"
    ends = (values["app_ac_big_lo"], values["app_ac_big_hi"], values["app_ac_small"])
    assert ends == ("-23%", "+19%", "4%")        # 8 slots: 3.1% at cs2 = 2, rounded up; M/M/c's 4.5% not in it
    assert values["app_ac_exact"] == "4.7%"      # M/M/c (cs2 = 1), where the formula is exact: |-0.047|
    # Llama 3: 419 interruptions in 54 days on 16,384 GPUs; on 8 times the GPUs, minutes between them
    assert values["app_gp_mtbi_128k"] == f"{54 * 86400 / 419 / 8 / 60:.0f}" == "23"


def test_every_claim_holds_and_each_can_fail(monkeypatch):
    claims = appendix_claims(FAKE_AC)
    assert len(claims) == 40 and all(claims.values()), [c for c, ok in claims.items() if not ok]
    # a wrong extreme of the simulation, and two constants moved, each turn their own claim False
    worst = FAKE_AC | {(8, 0.8, 0.0): -0.5}
    assert [c for c, ok in appendix_claims(worst).items() if not ok] == [
        "Allen-Cunneen's errors are largest at 32 slots, 80% busy, fixed and cs2 = 2"]
    import llmsizing.footprint
    import llmsizing.rl_trainer

    monkeypatch.setattr(llmsizing.rl_trainer, "SLIME_SYNC_QWEN3_30B_S", 8.0)
    monkeypatch.setattr(llmsizing.footprint, "LOSS_BACKWARD_BYTES_PER_LOGIT", {"fused": 8.0, "hf": 12.0})
    wrong = {c for c, ok in appendix_claims(FAKE_AC).items() if not ok}
    assert wrong == {"slime's weight sync takes 7 s",
                     "the loss backward keeps 8 bytes per logit on both stacks"}


def test_appendix_prose_is_the_page_in_one_container_and_refuses_a_false_claim():
    from llmsizing.appendix import appendix_prose
    from llmsizing.prose import ChapterText, ProseOutOfDate

    page = appendix_prose(FAKE_AC)
    assert isinstance(page, ChapterText) and page.report == ""
    assert page.values == appendix_values(FAKE_AC) and page.data["claims"] == appendix_claims(FAKE_AC)
    assert page.values["app_ac_small_n"] == "8" and all(page.data["claims"].values())
    # the wrong extreme above: the page's claim about it is named, not printed
    with pytest.raises(ProseOutOfDate, match="the appendix says Allen-Cunneen's errors are largest at 32 slots"):
        appendix_prose(FAKE_AC | {(8, 0.8, 0.0): -0.5})
    with pytest.raises(TypeError, match="ac must be a dict"):
        appendix_prose([0.0] * len(AC_CASES))


def test_active_parameters_claim_by_hand():
    """N_active = N - (1 - k/E) N_routed, by hand for Mixtral 8x7B: 32 layers x 8 experts x 3 h f."""
    m = get_model("mixtral-8x7b")
    routed = 32 * 8 * 3 * 4096 * 14336
    assert m.active_params == m.n_params - routed + routed * 2 // 8


def test_bad_simulation_results_are_refused():
    with pytest.raises(TypeError, match="ac must be a dict"):
        appendix_values([0.0] * len(AC_CASES))
    with pytest.raises(ValueError, match="ac must hold one error for each of AC_CASES"):
        appendix_claims({(8, 0.8, 0.0): 0.0})
    with pytest.raises(ValueError, match="finite"):
        appendix_values(FAKE_AC | {(8, 0.8, 0.0): float("nan")})


def test_the_simulation_sizes_allen_cunneen_as_the_page_says():
    ac = allen_cunneen_errors()
    assert set(ac) == set(AC_CASES)
    assert (min(ac, key=ac.get), max(ac, key=ac.get)) == ((32, 0.8, 0.0), (32, 0.8, 2.0))
    assert max(abs(e) for (c, _, s), e in ac.items() if c == 8 and s != 1) < 0.05  # "within 4%" at 8 slots
    # M/M/c, where Erlang's C is exact: the simulation's own error, within tests/test_fleet.py's 5%
    assert max(abs(e) for (_, _, s), e in ac.items() if s == 1) < 0.05


def test_the_fp8_layout_coverage_says_when_it_is_short(values):
    """The FP8 layout range's coverage, from data/intervals.csv's row (training-layout, fp8), and the page
    saying so when it is below the nominal 80% (6 of 8 runs on 2026-11-30: 75%, short)."""
    with open(DATA_DIR / "intervals.csv", newline="") as f:
        row = next(r for r in csv.DictReader(f) if (r["area"], r["group"]) == ("training-layout", "fp8"))
    held = round(float(row["measured_coverage"]) * int(row["n_rows"]))
    assert values["app_fp8_layout_held"] == f"{held}" and values["app_fp8_layout_n"] == row["n_rows"]
    short = float(row["measured_coverage"]) < float(row["nominal_coverage"])
    assert values["app_fp8_layout_verdict"].startswith(f"{held / int(row['n_rows']):.0%}, ")
    assert ("short of" in values["app_fp8_layout_verdict"]) == short


# ------------------------------------------------------------------ the checks of four entries (appx46)
def test_the_gguf_check_by_hand(values):
    """Llama 3 8B in Q6_K, every matrix at 6.5625 bits and the 2 x 32 + 1 norm vectors (4,096 each) in fp32,
    against bartowski's 6.60 GB file: the largest of the five misses (data/gguf_file_sizes.csv)."""
    vectors = (2 * 32 + 1) * 4096
    q6_k = (8_030_261_248 - vectors) * 6.5625 / 8 + vectors * 4
    assert q6_k == 6_588_170_240
    assert values["app_gguf_err"] == f"{abs(q6_k / 6.60e9 - 1):.1%}" == "0.2%" and values["app_gguf_n"] == "five"


def test_the_allowance_against_published_fragmentation(values):
    """Each source's median of reserved / peak active - 1 (rows not superseded), then the median over sources,
    from data/allocator_fragmentation.csv's rows: PyTorch's default allocator and expandable segments."""
    import statistics

    with open(DATA_DIR / "allocator_fragmentation.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["statistic"] == "peak_active" and r["superseded"] != "yes"]
    for setting, key in ((False, "pub"), (True, "es")):
        by = {}
        for r in rows:
            if r["allocator_settings"].startswith("expandable_segments:True") == setting:
                by.setdefault(r["source_key"], []).append(float(r["reserved_gib"]) / float(r["allocated_gib"]) - 1)
        assert values[f"app_frag_{key}"] == f"{statistics.median(map(statistics.median, by.values())):.0%}"
        assert values[f"app_frag_{key}_n"] == f"{len(by)} source" + "s" * (len(by) > 1)
    assert (values["app_frag_pub"], values["app_frag_es"]) == ("27%", "17%")


def test_the_kv_and_state_checks_count_the_sweeps_types(values):
    """data/hf_type_sweep.csv's buildable decoder types that the reader reads (its class default too), with
    k_proj/v_proj widths (KV) or a state after a forward pass (a hybrid)."""
    from llmsizing.hf_types import CLASS_DEFAULT_GAPS, REFUSED_TYPES

    with open(DATA_DIR / "hf_type_sweep.csv", newline="") as f:
        read = [r for r in csv.DictReader(f) if r["kind"] == "full" and not r["error"] and r["encoder_style"] == "0"
                and r["model_type"] not in REFUSED_TYPES and r["model_type"] not in CLASS_DEFAULT_GAPS]
    assert values["app_kv_types"] == f"{sum(int(r['kv_per_token']) > 0 for r in read)}"
    assert values["app_state_types"] == f"{sum(r['state_per_sequence'] not in ('', '0') for r in read)}" == "24"


def test_the_paged_optimizer_check(values):
    """LLaMA-65B, rank-64 adapters on its 7 matrices a layer (h 8,192, f 22,016, 80 layers): 64 x (4 x 2h +
    3 (h + f)) x 80 = 799,539,200 adapter numbers, whose fp32 AdamW states (8 B) the paged optimizer keeps on
    the host; the L40S's 46,068 MiB (data/gpus.csv) is the 48 GB card."""
    from llmsizing.finetune import QLORA_SCRIPT, finetune_memory

    n = 64 * (4 * 2 * 8192 + 3 * (8192 + 22016)) * 80
    assert n == 799_539_200
    paged = finetune_memory("llama-65b", **QLORA_SCRIPT)
    assert paged.host_bytes == 8 * n and paged.optimizer_bytes == 0
    assert values["app_paged_gpu"] == f"{46068 / 1024:.1f} GiB" == "45.0 GiB"
    assert (values["app_paged_peak"], values["app_unpaged_peak"]) == ("37.0 GiB", "47.0 GiB")


def test_the_longest_context_check(values):
    """Unsloth's two published maxima (28,454 tokens for Llama 3.1 8B, 6,916 for Llama 3.3 70B, both QLoRA
    rank 32 on an A100 80GB: data/finetune_max_context.csv) over the library's longest context."""
    from llmsizing.finetune import max_context

    kw = dict(method="qlora", rank=32, targets="all-linear", batch=1, optimizer="adamw-8bit", recompute="full",
              stack="hf")
    r8, r70 = (pub / max_context(m, "A100 80GB", **kw) for m, pub in (("llama-3-8b", 28454), ("llama-3-70b", 6916)))
    assert values["app_ctx_n"] == "two"
    assert (values["app_ctx_lo"], values["app_ctx_hi"]) == (f"{min(r8, r70):.2f}", f"{max(r8, r70):.2f}")
    assert (values["app_ctx_lo"], values["app_ctx_hi"]) == ("0.85", "0.99")


def test_a_false_check_statement_raises(monkeypatch):
    """Each of the five new statements, made false, stops the page (ProseOutOfDate names it)."""
    import llmsizing.finetune
    import llmsizing.inference
    import llmsizing.states
    from llmsizing.appendix import appendix_prose
    from llmsizing.prose import ProseOutOfDate

    with monkeypatch.context() as m:
        m.setattr(llmsizing.states, "FRAGMENTATION", 0.1)          # the page types "8%" in its formula
        assert [c for c, ok in appendix_claims(FAKE_AC).items() if not ok] == [
            "the allowance is 1 GiB + 8% of the modelled bytes"]
    with monkeypatch.context() as m:
        m.setattr(llmsizing.states, "FRAGMENTATION", 0.2)          # above the expandable-segments median
        with pytest.raises(ProseOutOfDate, match="the 8% is below the published fragmentation"):
            appendix_prose(FAKE_AC)
    with monkeypatch.context() as m:
        state = llmsizing.inference.state_bytes_per_sequence
        m.setattr(llmsizing.inference, "state_bytes_per_sequence", lambda model, dtype: state(model, dtype) + 2)
        with pytest.raises(ProseOutOfDate, match="a hybrid's state equal transformers'"):
            appendix_prose(FAKE_AC)
    with monkeypatch.context() as m:
        m.setattr(llmsizing.finetune, "max_context", lambda *a, **k: 4096)     # where a source ran out of memory
        with pytest.raises(ProseOutOfDate, match="the library runs out of memory where a source did"):
            appendix_prose(FAKE_AC)
    with monkeypatch.context() as m:
        m.setattr(llmsizing.finetune, "QLORA_SCRIPT", {**llmsizing.finetune.QLORA_SCRIPT, "seq": 4096})
        with pytest.raises(ProseOutOfDate, match="LLaMA-65B's QLoRA script fits the 48 GB GPU"):
            appendix_prose(FAKE_AC)


def test_the_peak_of_a_step_check_is_chapter_5s(values):
    """The Hugging Face rows of data/step_measurements.csv (counted here), and the worst peak error chapter 5
    prints of them (measure_prose's ``step_hf_worst``): one figure on both pages."""
    from llmsizing.measure_prose import step_sweep_prose
    from llmsizing.measurements import compare_measurements, compare_steps

    with open(DATA_DIR / "step_measurements.csv", newline="") as f:
        assert values["app_peak_n"] == f"{sum(r['stack'] == 'hf' for r in csv.DictReader(f))}" == "162"
    ch5 = step_sweep_prose(compare_measurements(), compare_steps()).values
    assert values["app_peak_err"] == ch5["step_hf_worst"] and ch5["step_n_hf"] == values["app_peak_n"]


# ------------------------------------------------------------------ the checks of five more entries (appx47)
def test_the_hf_layer_check_from_the_listing(values):
    """data/step_saved_tensors.csv's Hugging Face layers (counted here, by storage as the tool lists them)
    against the library's count: exact but for GPT-2 in bf16, where the CPU keeps LayerNorm's mean and 1/std in
    bf16 (2 bytes) and the library counts a GPU's fp32 (4 bytes): 2 norms x 2 statistics x 2 bytes x b s more."""
    from llmsizing.activations import layer_terms
    from llmsizing.measurements import load_steps, step_model

    with open(DATA_DIR / "step_saved_tensors.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["stack"] == "hf"]
    layers = {}
    for r in rows:
        layers.setdefault((r["model_class"], r["mode"], r["attention"]), []).append(r)
    steps = load_steps()
    errors = {}
    for (cls, mode, att), rs in layers.items():
        measured = sum(int(r["nbytes"]) for r in rs if r["kind"] == "activation")
        b, s = int(rs[0]["batch"]), int(rs[0]["seq"])
        model = step_model(steps[(steps["stack"] == "hf") & (steps["model_class"] == cls)].iloc[0])
        lib = sum(layer_terms(model, batch=b, seq=s, dtype="fp32" if mode == "fp32" else "bf16",
                              attention="eager" if att == "eager" else "flash", stack="hf",
                              autocast=mode == "autocast-bf16").values())
        if (cls, mode) == ("GPT2LMHeadModel", "bf16"):
            stats = [r for r in rs if r["op"] == "native_layer_norm" and r["dtype"] == "bfloat16"
                     and r["shape"] == f"{b}x{s}x1"]
            assert len({r["created_in"] for r in stats}) == 2          # ln_1 and ln_2, mean and 1/std each
            assert lib - measured == 2 * 2 * 2 * b * s
        errors[cls, mode, att] = lib / measured - 1
    exact = sum(e == 0 for e in errors.values())
    assert (values["app_hfl_n"], values["app_hfl_exact"]) == (f"{len(errors)}", f"{exact}") == ("18", "16")
    assert values["app_hfl_err"] == f"{max(map(abs, errors.values())):.2%}" == "0.06%"


def test_the_autocast_copies_check_by_hand(values):
    """2 bytes per weight a matrix multiply reads, from each model's shape (data/step_measurements.csv): Llama
    (untied) N - V h - (2L + 1) h norms; GPT-2 (tied, LayerNorm, 512 learned positions) N - 512 h - (2L + 1) 2h;
    Qwen2 (tied) N - (2L + 1) h. That is every step's largest copies; at the forward's end, once autocast's
    cache has emptied, GPT-2 lacks its biases' copies, 2 x L (3h + h + f + h) bytes, which no backward keeps."""
    from llmsizing.measurements import load_steps

    amp = load_steps().query("stack == 'hf' and mode == 'autocast-bf16'")
    for cls, r in amp.drop_duplicates("model_class").set_index("model_class").iterrows():
        L, h, n = int(r["layers"]), int(r["hidden"]), int(r["n_params"])
        matmul = {"LlamaForCausalLM": n - int(r["vocab"]) * h - (2 * L + 1) * h,
                  "GPT2LMHeadModel": n - 512 * h - (2 * L + 1) * 2 * h,
                  "Qwen2ForCausalLM": n - (2 * L + 1) * h}[cls]
        assert (amp.loc[amp["model_class"] == cls, "weight_copy_max_bytes"] == 2 * matmul).all(), cls
    gpt2 = amp[(amp["model_class"] == "GPT2LMHeadModel") & (amp["recompute"] == "none")]
    r = gpt2.iloc[0]
    biases = int(r["layers"]) * (5 * int(r["hidden"]) + int(r["ffn"]))
    assert (gpt2["weight_copy_forward_end_bytes"] == gpt2["weight_copy_max_bytes"] - 2 * biases).all()
    assert values["app_amp_n"] == f"{len(amp)}" == "54"
    assert values["app_amp_end"] == f"{2 * biases / (r['weight_copy_max_bytes'] - 2 * biases):.2%}" == "0.13%"


def test_the_stages_check_by_hand_and_as_chapter_10_prints_it(values):
    """Llama 3.1 405B at Table 4's MFUs, by hand: F = 6 (N - V h) + 12 L s a d per token (the CSV's tokens and
    sequences, the H100's 989.4 TFLOP/s), over the model card's 30.84M GPU-hours; the range is the min and max
    of stages.published_stage_checks, whose rows chapter 10 prints and glues (x0.97, x1.10, x1.21)."""
    from llmsizing.stages import published_stage_checks

    m = get_model("llama-3.1-405b")
    with open(DATA_DIR / "published_stages.csv", newline="") as f:
        ll = [r for r in csv.DictReader(f) if r["run"] == "Llama 3.1 405B"]
    hours = sum(float(r["tokens"]) * (6 * (m.n_params - m.vocab * m.hidden)
                                      + 12 * m.layers * int(r["seq"]) * m.heads * m.head_dim)
                / (989.4e12 * float(r["reported_mfu"])) / 3600 for r in ll)
    ratio = hours / float(ll[0]["phase_gpu_hours"])
    assert f"{ratio:.2f}" == "0.97"
    ratios = published_stage_checks()["ratio"]
    assert ratios[ratios < 1].tolist() == pytest.approx([ratio], rel=1e-9)
    assert (values["app_stage_lo"], values["app_stage_hi"]) == (f"{ratios.min():.2f}", f"{ratios.max():.2f}")
    assert (values["app_stage_lo"], values["app_stage_hi"], values["app_stage_n"]) == ("0.97", "1.21", "three")


def test_the_lora_check_from_the_rows_and_chapter_16s_cell(values):
    """Every fp32/bf16 step of data/lora_step_measurements.csv without dropout, its model built from the row
    (as tests/test_finetune.py builds it), against finetune_memory's peak; and chapter 16 glues its figure
    from the same function (finetune_prose.lora_step_errors) in the same format: one figure on both pages."""
    import json
    from pathlib import Path

    from llmsizing import Model
    from llmsizing.finetune import ALL_LINEAR, ATTENTION_ONLY, finetune_memory

    with open(DATA_DIR / "lora_step_measurements.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["mode"] in ("fp32", "bf16") and float(r["lora_dropout"]) == 0]
    errors = []
    for r in rows:
        m = Model(r["model"], layers=int(r["layers"]), hidden=int(r["hidden"]), heads=int(r["heads"]),
                  kv_heads=int(r["kv_heads"]), ffn_hidden=int(r["ffn"]), vocab=int(r["vocab"]), gated_mlp=True,
                  tied_embeddings=r["tied_embeddings"] == "True", norm="rmsnorm", max_seq=4096)
        peak = finetune_memory(m, method="lora", rank=int(r["r"]), batch=int(r["batch"]), seq=int(r["seq"]),
                               targets=ATTENTION_ONLY if r["targets"] == "attention" else ALL_LINEAR,
                               recompute=r["recompute"], dtype=r["mode"]).peak_bytes
        errors.append((peak / int(r["peak_bytes"]) - 1, r["recompute"]))
    assert values["app_lora_n"] == f"{len(rows)}" == "50"
    assert values["app_lora_err"] == f"{max(abs(e) for e, _ in errors):.1%}" == "1.0%"
    assert all((e > 0) == (rc == "none") for e, rc in errors)          # "over only without recomputation"
    ch16 = json.loads((Path(__file__).resolve().parents[1] / "book" / "16_finetuning.ipynb").read_text())
    cell = next("".join(c["source"]) for c in ch16["cells"] if "ch16_clean_err" in "".join(c["source"]))
    assert "steps = lora_step_errors()" in cell and 'clean = steps[~steps["dropout"]]["error"]' in cell
    assert 'glue("ch16_clean_err", f"{clean.abs().max():.1%}"' in cell
    assert 'glue("ch16_steps_n", f"{len(clean)}"' in cell


def test_the_rl_check_is_chapter_19s(values):
    """Published over predicted step for every checked row of data/rl_published.csv (the ratios taken here
    from the rows' step_s and predicted_step_s), and the same figures chapter 19 glues (rl_prose)."""
    import statistics

    from llmsizing.rl import published_rl
    from llmsizing.rl_prose import default_run_prose, published_check_prose

    chk = published_rl().query("checked == 'yes'")
    ratios = (chk["step_s"] / chk["predicted_step_s"]).tolist()
    inside = int(((chk["step_s"] >= chk["low"]) & (chk["step_s"] <= chk["high"])).sum())
    assert (values["app_rl_n"], values["app_rl_inside"]) == (f"{len(ratios)}", f"{inside}")
    assert (values["app_rl_med"], values["app_rl_lo"], values["app_rl_hi"]) == (
        f"{statistics.median(ratios):.2f}", f"{min(ratios):.2f}", f"{max(ratios):.2f}")
    assert statistics.median(ratios) > 1                                  # "optimistic"
    ch19 = published_check_prose(default_run_prose().data).values
    assert [values[f"app_rl_{k}"] for k in ("n", "inside", "med", "lo", "hi")] == [
        ch19[k] for k in ("n_rows", "inside", "ratio_med", "ratio_min", "ratio_max")]


def test_a_false_measured_check_statement_raises(monkeypatch):
    """Each of the five statements, made false, stops the page (ProseOutOfDate names it)."""
    import dataclasses

    import llmsizing.activations
    import llmsizing.finetune_prose
    import llmsizing.memory
    import llmsizing.rl
    import llmsizing.stages
    from llmsizing.appendix import appendix_prose
    from llmsizing.prose import ProseOutOfDate

    def raises(what):
        return pytest.raises(ProseOutOfDate, match=f"the appendix says {what}")

    with monkeypatch.context() as m:                    # one byte more in every layer: no layer exact
        terms = llmsizing.activations.layer_terms
        m.setattr(llmsizing.activations, "layer_terms", lambda *a, **k: {**terms(*a, **k), "extra": 1})
        with raises("the Hugging Face layer count is exact but for GPT-2's bf16 layers"):
            appendix_prose(FAKE_AC)
    with monkeypatch.context() as m:
        copies = llmsizing.memory.autocast_copies_bytes
        m.setattr(llmsizing.memory, "autocast_copies_bytes", lambda *a, **k: copies(*a, **k) - 2)
        with raises("autocast's copies equal the largest measured"):
            appendix_prose(FAKE_AC)
    with monkeypatch.context() as m:
        checks = llmsizing.stages.published_stage_checks
        m.setattr(llmsizing.stages, "published_stage_checks", lambda: checks().assign(ratio=0.9))
        with raises("a run in stages comes in below a published figure only at the paper's own MFUs"):
            appendix_prose(FAKE_AC)
    with monkeypatch.context() as m:
        lora = llmsizing.finetune_prose.lora_step_errors
        m.setattr(llmsizing.finetune_prose, "lora_step_errors", lambda: lora().assign(error=0.005))
        with raises("the LoRA peak over-counts only without recomputation"):
            appendix_prose(FAKE_AC)
    with monkeypatch.context() as m:
        ck = llmsizing.rl.rl_checked
        m.setattr(llmsizing.rl, "rl_checked", lambda *a, **k: dataclasses.replace(ck(*a, **k), ratio_median=0.9))
        with raises("the RL step is optimistic at the median"):
            appendix_prose(FAKE_AC)


# ------------------------------------------------------------- the checks of the last four entries (appx47b)
def test_the_op_sac_check_by_hand_and_as_chapter_5_says(values):
    """data/op_sac_tp_saved.csv's bytes per layout, summed over its ops, against op SAC's count worked by hand
    for the measured block (hidden 256, 8 heads of 32, 4 KV heads, FFN 512, 2 x 64 tokens, bf16): the input
    (s / t tokens with SP), wq, wv, w1 split t ways, w2's partial sum whole, SDPA's output and fp32 LSE over
    a / t heads, both reduce-scatter outputs with SP. Exact in every layout; chapter 5 glues the same count."""
    from llmsizing.measure_prose import _op_sac_tp_texts

    measured = {}
    with open(DATA_DIR / "op_sac_tp_saved.csv", newline="") as f:
        for r in csv.DictReader(f):
            key = (int(r["tp"]), r["sp"] == "1")
            measured[key] = measured.get(key, 0) + int(r["bytes"])
    p, tok = 2, 2 * 64
    for (t, sp), got in measured.items():
        by_hand = (p * tok * 256 // (t if sp else 1) + p * tok * ((256 + 128 + 512) // t + 256)
                   + p * tok * 256 // t + 4 * 2 * (8 // t) * 64 + (2 * p * tok * 256 // t if sp else 0))
        assert got == by_hand, (t, sp)
    assert values["app_sac_n"] == f"{len(measured)}" == "5"
    assert _op_sac_tp_texts()["sac_tp_n"] == values["app_sac_n"]


#: PyTorch DDP's copies of the gradients by hand (chapter 7's reading of reducer.cpp): (layout, m) -> copies in
#: the forward, at the backward's end, in the optimizer step, at the worst micro-batch. ``plain``: .grad only,
#: alive from the backward's end, and before the backward from the 2nd micro-batch; ``ddp-copy``: buckets + the
#: same; ``ddp-view``: buckets, .grad beside them only under no_sync; ``ddp-view-keep``: the buckets alone.
DDP_BY_HAND = {("plain", 1): (0, 1, 1), ("plain", 2): (1, 1, 1), ("ddp-copy", 1): (1, 2, 2),
               ("ddp-copy", 2): (2, 2, 2), ("ddp-view", 1): (1, 1, 1), ("ddp-view", 2): (2, 2, 1),
               ("ddp-view-keep", 1): (1, 1, 1), ("ddp-view-keep", 2): (1, 1, 1)}


def test_the_ddp_copies_check_by_hand(values):
    """Every row of data/grad_buffer_measurements.csv holds a whole number of copies of the parameters' bytes,
    and the most of each (layout, dtype, micro-batches, phase) is the count by hand: 48 cases, all exact."""
    most = {}
    with open(DATA_DIR / "grad_buffer_measurements.csv", newline="") as f:
        for r in csv.DictReader(f):
            copies, rest = divmod(int(r["gradient_bytes"]), int(r["param_bytes"]))
            assert rest == 0
            key = (r["layout"], r["param_dtype"], int(r["grad_accum"]), r["phase"])
            most[key] = max(most.get(key, 0), copies)
    phases = ("forward peak", "backward end", "optimizer step")
    for (lay, _, m, phase), copies in most.items():
        assert copies == DDP_BY_HAND[lay, m][phases.index(phase)], (lay, m, phase)
    assert values["app_ddp_n"] == f"{len(most)}" == "48"


def test_chapter_7_checks_the_copies_through_the_same_function(monkeypatch):
    """Chapter 7's prose loops over dp_prose.ddp_copy_checks, the appendix's source: one wrong count stops it."""
    import llmsizing.dp_prose as dp
    from llmsizing.prose import ProseOutOfDate

    checks = dp.ddp_copy_checks
    monkeypatch.setattr(dp, "ddp_copy_checks", lambda: checks().assign(counted=lambda d: d["counted"] + 1))
    with pytest.raises(ProseOutOfDate, match="the measured copies of"):
        dp.ddp_copies_prose()


def test_the_all_to_all_check_by_hand_and_as_chapter_18_prints_it(values):
    """The forward dispatch of data/moe_all_to_all_gloo.csv against S_a2a = T k h B (ep - 1) / ep, by hand from
    each row: a rank's mean and the busiest rank (the most any rank sent or received) under the near-uniform
    router, the busiest under skewed routing; chapter 18 glues the same four figures."""
    from llmsizing.charts import MOE_LAYOUT_DEFAULT
    from llmsizing.moe_case_prose import all_to_all_evidence_prose

    groups = {}
    with open(DATA_DIR / "moe_all_to_all_gloo.csv", newline="") as f:
        for r in csv.DictReader(f):
            if r["phase"] == "forward":
                groups.setdefault((r["routing"], r["dtype"], r["ep"], r["tokens_per_rank"]), []).append(r)
    mean_dev, busy, skew = [], [], []
    for (routing, _, ep, tokens), rs in groups.items():
        ep, r0 = int(ep), rs[0]
        s_a2a = int(tokens) * int(r0["top_k"]) * int(r0["hidden"]) * int(r0["bytes_per_element"]) * (ep - 1) / ep
        sent = [int(r["dispatch_sent_bytes"]) for r in rs]
        busiest = max(max(sent), max(int(r["dispatch_recv_bytes"]) for r in rs)) / s_a2a
        if routing == "hf-init":
            mean_dev.append(abs(sum(sent) / len(sent) / s_a2a - 1))
            busy.append(busiest - 1)
        else:
            skew.append(busiest)
    assert (len(mean_dev), len(skew)) == (8, 2)
    assert values["app_a2a_mean_dev"] == f"{max(mean_dev):.1%}" and values["app_a2a_busy_dev"] == f"{max(busy):.1%}"
    assert (values["app_a2a_skew_min"], values["app_a2a_skew_max"]) == (f"{min(skew):.2f}", f"{max(skew):.2f}")
    assert min(busy) > 0 and min(skew) > 1 + max(busy)          # "over"; the skewed router's busiest furthest
    ch18 = all_to_all_evidence_prose(MOE_LAYOUT_DEFAULT).values
    assert [values[f"app_a2a_{k}"] for k in ("mean_dev", "busy_dev", "skew_min", "skew_max")] == [
        ch18[f"gloo_{k}"] for k in ("mean_dev", "busy_dev", "skew_min", "skew_max")]


def test_the_kbit_check_by_hand(values):
    """data/loss_logits_measurements.csv's model (2 Llama layers, hidden 256, 8 + 2 heads of 32, FFN 688,
    untied): its blocks' matrices 2 (2 h^2 + 2 h 64 + 3 h 688) = 1,384,448 in nf4 at (4 + 8/64 + 32/(64 x 256))
    / 8 bytes; embedding, head and 5 norms (2 V h + 1,280) fp32 after the preparation, 4 bytes. The measured base
    is the nf4 step's baseline less the bf16 step's beside its 2 N bytes of weights; the head copy, 2 V h, is
    what the nf4 step (autocast) leaves alive from the head on beyond the bf16-kbit step."""
    with open(DATA_DIR / "loss_logits_measurements.csv", newline="") as f:
        rows = {(int(r["vocab"]), int(r["seq"]), r["mode"]): r for r in csv.DictReader(f)}
    h, blocks = 256, 2 * (2 * 256 * 256 + 2 * 256 * 64 + 3 * 256 * 688)
    assert blocks == 1_384_448
    base_err, copy_err = [], []
    for (vocab, seq, mode), nf in rows.items():
        if mode != "nf4-kbit":
            continue
        bf, kb = rows[vocab, seq, "bf16"], rows[vocab, seq, "bf16-kbit"]
        rest = 2 * vocab * h + 1280
        lib_base = blocks * (4 + 8 / 64 + 32 / (64 * 256)) / 8 + 4 * rest
        measured_base = int(nf["baseline_bytes"]) - (int(bf["baseline_bytes"]) - 2 * (blocks + rest))
        base_err.append(lib_base / measured_base - 1)
        copy_err.append(2 * vocab * h / (int(nf["saved_loss_bytes"]) - int(kb["saved_loss_bytes"])) - 1)
        assert nf["layer_input_dtype"] == kb["layer_input_dtype"] == "float32"
    assert values["app_kbit_n"] == f"{len(base_err)}" == "8"
    assert values["app_kbit_base"] == f"{max(map(abs, base_err)):.2%}" == "0.03%"
    assert values["app_kbit_copy"] == f"{max(map(abs, copy_err)):.1%}" == "1.8%"
    assert min(base_err) >= 0 and min(copy_err) >= 0                      # "over"


def test_a_false_last_four_statement_raises(monkeypatch):
    """Each of the four statements, made false, stops the page (ProseOutOfDate names it)."""
    import llmsizing.dist_compare
    import llmsizing.dp_prose
    import llmsizing.finetune_base
    import llmsizing.op_sac
    from llmsizing.appendix import appendix_prose
    from llmsizing.prose import ProseOutOfDate

    def raises(what):
        return pytest.raises(ProseOutOfDate, match=f"the appendix says {what}")

    with monkeypatch.context() as m:                        # one byte more than PyTorch kept
        sac = llmsizing.op_sac.op_sac_tp_measured
        m.setattr(llmsizing.op_sac, "op_sac_tp_measured",
                  lambda: sac().assign(model_bytes=lambda d: d.model_bytes + 1))
        with raises("op SAC's bytes are exactly what PyTorch's checkpoint kept"):
            appendix_prose(FAKE_AC)
    with monkeypatch.context() as m:
        ddp = llmsizing.dp_prose.ddp_copy_checks
        m.setattr(llmsizing.dp_prose, "ddp_copy_checks", lambda: ddp().assign(counted=0))
        with raises("DDP's copies of the gradients are exactly the measured ones"):
            appendix_prose(FAKE_AC)
    with monkeypatch.context() as m:                        # every rank as busy as the formula says
        a2a = llmsizing.dist_compare.compare_all_to_all
        m.setattr(llmsizing.dist_compare, "compare_all_to_all", lambda: a2a().assign(ratio_busiest=1.0))
        with raises("the busiest rank sends more than S_a2a under either router"):
            appendix_prose(FAKE_AC)
    with monkeypatch.context() as m:
        kb = llmsizing.finetune_base.kbit_prep_checks
        m.setattr(llmsizing.finetune_base, "kbit_prep_checks", lambda: kb().assign(base_error=-0.001))
        with raises("k-bit preparation's base and head copy are never below the measured"):
            appendix_prose(FAKE_AC)


def test_the_speculative_example_fits_its_gpu_and_is_chapter_15s():
    """read90: the page timed its speculative example, Llama 3 70B in bf16, on one H100, which it does not fit.
    By hand from the config (L 80, h 8192, 64 query and 8 KV heads of 128, f 28672, V 128256, untied,
    RMSNorm): N = 2Vh + L (2hd(a+g) + 3hf + 2h) + h = 2,101,346,304 + 80 x 855,654,400 + 8,192
    = 70,553,706,496; in bf16 141.1 GB, over the H100's 80 GB; in FP8 (embedding and head kept in 16 bits)
    (N - 2Vh) + 2 x 2Vh = 72.7 GB, under the H200's 141 GB. The example is now chapter 15's pair."""
    import json

    from llmsizing import get_gpu
    from llmsizing.appendix import SPEC_EXAMPLE

    L, h, a, g, d, f, V = 80, 8192, 64, 8, 128, 28672, 128256
    n = 2 * V * h + L * (2 * h * d * (a + g) + 3 * h * f + 2 * h) + h
    assert n == 70_553_706_496 == get_model("llama-3-70b").n_params
    assert 2 * n > get_gpu("H100 SXM").memory_bytes                             # the old example
    fp8_bytes = (n - 2 * V * h) + 2 * (2 * V * h)
    assert fp8_bytes == pytest.approx(72.66e9, rel=1e-3)
    assert SPEC_EXAMPLE["weights"] == "fp8" and fp8_bytes < get_gpu(SPEC_EXAMPLE["gpu"]).memory_bytes
    ch15 = json.loads((DATA_DIR.parent / "book" / "15_serving.ipynb").read_text())
    src = "".join("".join(c["source"]) for c in ch15["cells"] if c["cell_type"] == "code")
    pair = ", ".join(f'{k}="{v}"' for k, v in SPEC_EXAMPLE.items() if k != "model")
    assert f'spec_pair = dict(model="{SPEC_EXAMPLE["model"]}", {pair})' in src


def test_the_typed_usable_fraction_is_the_librarys(monkeypatch):
    """read90: the page types the usable fraction three times ("usable = 0.9 in every part", "fits in 0.9 of
    its memory", "fits 90% of the GPU"); a claim holds it to the states' constant and to the defaults of
    plan, min_gpus and max_context, and a moved constant stops the page."""
    import llmsizing.states

    name = "the usable fraction is 0.9 in every part (states, planner, fewest GPUs, longest context)"
    assert appendix_claims(FAKE_AC)[name]
    monkeypatch.setattr(llmsizing.states, "USABLE_FRACTION", 0.85)
    assert [c for c, ok in appendix_claims(FAKE_AC).items() if not ok] == [name]


# ------------------------------------------- the fused count, a padded batch, TP, recomputation (appx47c)
def _stand_in_errors():
    """data/activation_measurements.csv's fp32 and bf16 runs (autocast apart), read here: the measured bytes with
    GPU-style 1-byte dropout masks (act_bytes less the CPU's masks plus one byte per mask element) against the
    fused formula, activation_memory, for the model each row names; errors per (recompute, attention)."""
    from llmsizing.activations import activation_memory
    from llmsizing.measurements import measured_model

    errors = {}
    with open(DATA_DIR / "activation_measurements.csv", newline="") as f:
        for r in csv.DictReader(f):
            if r["mode"] == "autocast-bf16":
                continue
            measured = int(r["act_bytes"]) - int(r["mask_bytes"]) + int(r["mask_elements"])
            model = measured_model({k: (v == "True" if v in ("True", "False") else v) for k, v in r.items()})
            lib = activation_memory(model, batch=int(r["batch"]), seq=int(r["seq"]), dtype=r["mode"],
                                    attention=r["attention"], dropout=float(r["dropout"]) > 0,
                                    recompute=r["recompute"], mask_bytes=1.0).total_bytes
            errors.setdefault((r["recompute"], r["attention"]), []).append(
                (lib / measured - 1, measured - lib, r))
    return errors


def test_the_fused_and_recomputation_checks_from_the_rows_and_as_chapter_5_says(values):
    """The stand-ins' fp32 and bf16 runs: without recomputation 72 runs (36 per kernel), each level's worst
    error as the page prints it. Selective recomputation with eager attention is low because the stand-in's
    rebuilt layer keeps contiguous copies of Q, K and V (Megatron-LM's layout feeds views): by hand, it lacks
    exactly s b (a + 2g) d B_x more than the same run with flash attention, in every such run. Chapter 5's two
    figures (measure_prose's pure_worst and pure_worst_rest) are the same numbers."""
    from llmsizing.measure_prose import step_sweep_prose
    from llmsizing.measurements import compare_measurements, compare_steps

    errors = _stand_in_errors()
    worst = {k: max(abs(e) for e, _, _ in v) for k, v in errors.items()}
    none = errors["none", "eager"] + errors["none", "flash"]
    assert values["app_fused_n"] == f"{len(none)}" == "72"
    assert values["app_fused_err"] == f"{max(abs(e) for e, _, _ in none):.1%}" == "0.4%"
    assert values["app_rc_full"] == f"{max(worst['full', 'eager'], worst['full', 'flash']):.1%}" == "0.5%"
    assert values["app_rc_sel"] == f"{worst['selective', 'flash']:.1%}" == "0.2%"
    assert values["app_rc_eager"] == f"{worst['selective', 'eager']:.1%}" == "3.7%"
    assert all(e < -0.01 for e, _, _ in errors["selective", "eager"])                     # "low"
    flash = {(r["model"], r["mode"], r["dropout"]): short for _, short, r in errors["selective", "flash"]}
    for _, short, r in errors["selective", "eager"]:
        a, g, d = int(r["heads"]), int(r["kv_heads"]), int(r["head_dim"])
        width = 4 if r["mode"] == "fp32" else 2
        copies = int(r["seq"]) * int(r["batch"]) * (a + 2 * g) * d * width
        assert short - flash[r["model"], r["mode"], r["dropout"]] == copies, r
    ch5 = step_sweep_prose(compare_measurements(), compare_steps()).values
    assert ch5["pure_worst"] == values["app_rc_eager"]
    assert ch5["pure_worst_rest"] == max(values["app_fused_err"], values["app_rc_full"], values["app_rc_sel"])


def test_the_padded_batch_check_from_the_rows_and_as_chapter_5_says(values):
    """data/masked_sdpa.csv: every layer's saved bytes equal the Hugging Face count with the mask HF passed on
    (54 layers, 18 of them padded: an all-ones mask is dropped); the padded layers hold, by hand, 2 B_x s b (a - g)
    d of repeated K and V plus B_x b s^2 of additive mask over the same layer without a mask. Chapter 5 glues the
    same count of configurations."""
    from llmsizing import Model
    from llmsizing.activations import layer_terms
    from llmsizing.measure_prose import step_findings_prose
    from llmsizing.measurements import compare_steps

    with open(DATA_DIR / "masked_sdpa.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    by_key = {(r["mode"], r["mask"], r["batch"], r["seq"]): int(r["saved_layer_bytes"]) for r in rows}
    for r in rows:
        n = {k: int(r[k]) for k in ("layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "vocab", "batch",
                                     "seq")}
        model = Model("x", layers=n["layers"], hidden=n["hidden"], heads=n["heads"], kv_heads=n["kv_heads"],
                      head_dim=n["head_dim"], ffn_hidden=n["ffn"], vocab=n["vocab"], gated_mlp=True,
                      tied_embeddings=False, norm="rmsnorm", max_seq=512)
        lib = sum(layer_terms(model, batch=n["batch"], seq=n["seq"], dtype="fp32" if r["mode"] == "fp32" else "bf16",
                              attention="flash", stack="hf", autocast=r["mode"] == "autocast-bf16",
                              attention_mask=r["mask_passed"] == "True").values())
        assert lib == int(r["saved_layer_bytes"]), r
        if r["mask"] == "padded":
            width, b, s = 4 if r["mode"] == "fp32" else 2, n["batch"], n["seq"]
            extra = 2 * width * s * b * (n["heads"] - n["kv_heads"]) * n["head_dim"] + width * b * s * s
            assert lib - by_key[r["mode"], "none", r["batch"], r["seq"]] == extra
    padded = sum(r["mask_passed"] == "True" for r in rows)
    assert padded == sum(r["mask"] == "padded" for r in rows)
    assert (values["app_mask_n"], values["app_mask_padded"]) == (f"{len(rows)}", f"{padded}") == ("54", "18")
    assert step_findings_prose(compare_steps()).values["mask_rows"] == values["app_mask_n"]


def test_the_tensor_parallel_figure_is_chapter_5s(values):
    """Besides torchtitan's block (below), the page gives the logged live peaks of tensor-parallel steps: the
    max_allocated rows with TP in their layout, all KempnerForge's (10, counted from
    data/published_measured_memory.csv), chapter 5's mm_kf_ratio_tp."""
    from llmsizing.measure_prose import measured_memory_prose

    with open(DATA_DIR / "published_measured_memory.csv", newline="") as f:
        tp = [r for r in csv.DictReader(f) if r["statistic"] == "max_allocated" and "TP=" in r["run"]]
    assert len(tp) == 10 and all(r["run"].startswith("KempnerForge") for r in tp)
    assert values["app_tp_kf"] == measured_memory_prose().values["mm_kf_ratio_tp"] == "1.32 to 4.07"
    # priced as their code runs (chapter 5's traced column), every one within the 2% chapter 5 states
    lo, hi = (float(x) for x in values["app_tp_kf_traced"].split(" to "))
    assert 0.97 <= lo <= hi <= 1.02 and lo < 1 < hi


def test_a_false_appx47c_statement_raises(monkeypatch, tmp_path):
    """Each of the four new statements, made false, stops the page (ProseOutOfDate names it)."""
    import llmsizing.layout_fits
    import llmsizing.measurements
    import llmsizing.step_measurements
    from llmsizing.appendix import appendix_prose
    from llmsizing.prose import ProseOutOfDate

    def raises(what):
        return pytest.raises(ProseOutOfDate, match=f"the appendix says {what}")

    with monkeypatch.context() as m:                        # Megatron's SwiGLU saving a fourth f-wide tensor
        swiglu = tmp_path / "swiglu.csv"
        with open(llmsizing.step_measurements.FUSED_SWIGLU_CSV) as f:
            swiglu.write_text(f.read().replace(",3.0,", ",4.0,"))
        m.setattr(llmsizing.step_measurements, "FUSED_SWIGLU_CSV", swiglu)
        with raises("Megatron-LM's fused SwiGLU saved 3 f-wide columns"):
            appendix_prose(FAKE_AC)
    with monkeypatch.context() as m:                        # the eager rebuild no longer low
        fe = llmsizing.measurements.fused_formula_errors
        m.setattr(llmsizing.measurements, "fused_formula_errors",
                  lambda *a: fe(*a).assign(worst_error=lambda d: d["worst_error"].abs()))
        with raises("selective recomputation with eager attention is the stand-ins' one count low"):
            appendix_prose(FAKE_AC)
    with monkeypatch.context() as m:                        # one byte more in every masked layer
        me = llmsizing.step_measurements.masked_sdpa_errors
        m.setattr(llmsizing.step_measurements, "masked_sdpa_errors",
                  lambda *a: me(*a).assign(error=lambda d: 1 / d["saved_layer_bytes"]))
        with raises("a padded batch's layer count is exact in every measured configuration"):
            appendix_prose(FAKE_AC)
    with monkeypatch.context() as m:                        # a tensor-parallel step below the library's peak
        pm = llmsizing.layout_fits.published_measured_memory
        m.setattr(llmsizing.layout_fits, "published_measured_memory", lambda: pm().assign(ratio=0.9))
        with raises("KempnerForge's tensor-parallel steps all peak above the library's"):
            appendix_prose(FAKE_AC)


# ---------------------------------------------- tensor/sequence parallelism against torchtitan's block (tp47)
def test_the_tensor_parallel_check_from_the_rows(values):
    """data/tp_saved.csv, read here: per (tp, sp) the bytes rank 0 saved, against activation_memory's
    per-layer bytes of the same block; the page's range is the smallest and largest shortfall (tp 1: 857,088
    of 1,324,032 bytes, 35% low; tp 4 with SP: 214,272 of 435,456, 51% low; by hand in test_tp_saved.py)."""
    from llmsizing import Model
    from llmsizing.activations import activation_memory

    measured = {}
    with open(DATA_DIR / "tp_saved.csv", newline="") as f:
        for r in csv.DictReader(f):
            key = (int(r["tp"]), r["sp"] == "1")
            measured[key] = measured.get(key, 0) + int(r["bytes"])
    block = Model("b", layers=1, hidden=256, heads=8, kv_heads=4, ffn_hidden=512, vocab=2048, gated_mlp=True,
                  tied_embeddings=False, norm="rmsnorm", max_seq=64)
    short = [1 - activation_memory(block, batch=2, seq=64, tp=tp, sp=sp).per_layer_bytes / got
             for (tp, sp), got in measured.items()]
    assert len(short) == 5 and min(short) > 0
    page = (values["app_tp_lo"], values["app_tp_hi"])
    assert page == (f"{min(short):.0%}", f"{max(short):.0%}") == ("35%", "51%")
    assert 1 - 857_088 / 1_324_032 == pytest.approx(min(short))
    assert 1 - 214_272 / 435_456 == pytest.approx(max(short))


def test_a_false_tp47_statement_raises(monkeypatch):
    """One untraced byte in one layout (or the formula no longer low) stops the page."""
    import llmsizing.step_measurements
    from llmsizing.appendix import appendix_prose
    from llmsizing.prose import ProseOutOfDate

    te = llmsizing.step_measurements.tp_saved_errors
    name = ("the tensor-parallel count is low on each layout of torchtitan's block "
            "by exactly the named tensors, which stack='torchtitan' adds")
    for broken in (lambda d: d.assign(untraced_bytes=[0, 0, 1, 0, 0]),
                   lambda d: d.assign(torchtitan_bytes=d["torchtitan_bytes"] + [0, 0, 0, 1, 0]),
                   lambda d: d.assign(error=d["error"].abs())):
        with monkeypatch.context() as m:
            m.setattr(llmsizing.step_measurements, "tp_saved_errors", lambda *a, b=broken: b(te(*a)))
            with pytest.raises(ProseOutOfDate, match=f"the appendix says {name}"):
                appendix_prose(FAKE_AC)
