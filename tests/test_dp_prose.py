"""Chapter 7's data parallelism in sentences (llmsizing.dp_prose, issue 38). Expected texts are worked by hand
from the catalogue's rows (data/gpus.csv: the H100 SXM's 81,559 MiB and the A100 80GB's 81,920 MiB, the PCIe
datasheet rates), the models' published parameter counts and first principles (16 bytes a parameter of mixed
precision with Adam; a ring of n GPUs takes n - 1 steps); none is copied from the code's output."""

import math

import pytest

from llmsizing import dp_prose
from llmsizing.dp_prose import ProseOutOfDate, breakeven_prose, ddp_copies_prose, pcie_rates_gbps, \
    pcie_zero3_prose, seed_memory_prose
from llmsizing.prose import ProseOutOfDate as BaseProseOutOfDate

LLAMA3_8B_PARAMS = 8_030_261_248          # Meta's Llama-3-8B, its Hugging Face checkpoint's parameter count


def _gib(text: str) -> float:
    number, unit = text.split()
    assert unit == "GiB"
    return float(number.replace(",", ""))


@pytest.fixture(scope="module")
def ddp():
    return ddp_copies_prose()


def test_ddp_copies_quote_one_copy_of_bf16_gradients_and_the_h100(ddp):
    text, texts = ddp.report, ddp.values
    assert texts["ddpc_g"] == f"{2 * LLAMA3_8B_PARAMS / 2**30:.1f} GiB" == "15.0 GiB"
    assert texts["ddpc_h100"] == f"{81_559 / 1024:.1f} GiB" == "79.6 GiB"
    # PyTorch's default holds a whole second copy at DDP's peak; the view gives it back
    one_copy_gib = 2 * LLAMA3_8B_PARAMS / 2**30
    assert _gib(texts["ddpc_z0_copy"]) - _gib(texts["ddpc_z0_buf"]) == pytest.approx(one_copy_gib, abs=0.11)
    # with 4 micro-batches DDP's step overflows the H100, and one buffer fits its usable memory
    assert _gib(texts["ddpc_acc_view_tot"]) > 81_559 / 1024 > _gib(texts["ddpc_usable"])
    assert _gib(texts["ddpc_acc_buf_tot"]) <= _gib(texts["ddpc_usable"])
    # the printed tables: the copies by kind and the peaks by stage and micro-batches
    assert text.startswith("copies of the gradients") and "ZeRO-1, m = 4" in text


def test_pcie_rates_are_the_datasheets_both_directions_halved():
    assert pcie_rates_gbps() == (128 / 2, 64 / 2)


def test_breakeven_texts_from_first_principles():
    _out = breakeven_prose()
    text, texts, acc_busy = _out.report, _out.values, _out.data["acc_busy"]
    assert texts["pcie5_gbps"] == "64 GB/s" and texts["pcie4_gbps"] == "32 GB/s"
    # a ring of 512 takes 511 steps; PAT's binomial schedule ceil(log2 512) = 9, 9/511 = 1.8%
    assert (texts["ring_steps"], texts["pat_steps"], texts["pat_share"]) == ("511", "9", "2%")
    # 512 sequences a step over dp replicas, one a micro-batch
    assert (texts["acc_m_64"], texts["acc_m_256"]) == ("8", "2")
    # half the link's bandwidth (Gen4 against Gen5, the same achievable share) doubles the threshold
    pcie5, pcie4 = (int(texts[k].replace(",", "")) for k in ("be_pcie5", "be_pcie4"))
    assert pcie4 / pcie5 == pytest.approx(2, rel=0.02)
    assert int(texts["be_nvlink"].replace(",", "")) < pcie5
    # ZeRO-3 sends 1.5 times DDP's bytes; across two filled nodes latency pulls its ratio below that
    assert 1 < float(texts["be_fill_z3_x"]) < 1.5
    assert set(acc_busy) == {64, 256} and 0 < acc_busy[256] < acc_busy[64] < 1
    assert "closed form on NVLink" in text


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def test_pcie_zero3_thresholds_from_the_20_percent_line():
    _out = pcie_zero3_prose()
    text, texts = _out.report, _out.values
    assert texts["h_over_a_flops"] == f"{989.4 / 312:.1f}" == "3.2"     # the datasheets' dense BF16 peaks
    assert texts["h_over_a_link"] == "2.0"                            # PCIe Gen5 x16 against Gen4 x16
    for key in ("a100", "h100", "l40s"):
        full = _int(texts[f"s4_{key}_p2p_full"])
        # busy = comp / (comp + comm) < 20% once comm > 4 comp (no overlap); comp / max(comp, comm) < 20%
        # once comm > 5 comp (perfect overlap); the traffic equals the compute at the full threshold
        assert _int(texts[f"s4_{key}_p2p_hi"]) == pytest.approx(full / 4, abs=1)
        assert _int(texts[f"s4_{key}_p2p_lo"]) == pytest.approx(full / 5, abs=1)
        assert _int(texts[f"s4_{key}_hi"]) == pytest.approx(_int(texts[f"s4_{key}_lo"]) * 5 / 4, abs=2)
    # the step model's 80% range (data/intervals.csv, training-layout, bf16: 0.7974 to 1.1625) stretches the
    # A100's ends: a 4x faster compute would need 4x the tokens to be 20% busy, so the ends scale with it
    for key in ("a100", "h100", "l40s"):
        r_lo, r_hi = (_int(x) for x in texts[f"s4_{key}_range"].split("–"))
        assert r_lo == pytest.approx(0.7974 * _int(texts[f"s4_{key}_lo"]), abs=2)
        assert r_hi == pytest.approx(1.1625 * _int(texts[f"s4_{key}_hi"]), abs=2)
    # the prose's order: the L40S crosses 20% first, then the A100, then the H100
    assert _int(texts["s4_l40s_hi"]) < _int(texts["s4_a100_hi"]) < _int(texts["s4_h100_hi"])
    assert "busy fraction by tokens per micro-batch" in text
    # the table shows each threshold's 80% range on its own row (small47): the A100's perfect-overlap end
    # 3,794 x (0.7974, 1.1625) = 3,025-4,410 tokens, its no-overlap end 4,742 x the same = 3,781-5,513
    ranges = [ln.split("range")[1].split() for ln in text.splitlines() if "its 80% range" in ln]
    assert len(ranges) == 3
    for (no_ov, perfect), key in zip(ranges, ("a100", "h100", "l40s")):
        lo, hi = (_int(x) for x in perfect.split("–"))
        assert (lo, hi) == (pytest.approx(0.7974 * _int(texts[f"s4_{key}_lo"]), abs=2),
                            pytest.approx(1.1625 * _int(texts[f"s4_{key}_lo"]), abs=2))
        lo, hi = (_int(x) for x in no_ov.split("–"))
        assert (lo, hi) == (pytest.approx(0.7974 * _int(texts[f"s4_{key}_hi"]), abs=2),
                            pytest.approx(1.1625 * _int(texts[f"s4_{key}_hi"]), abs=2))


def test_seed_memory_texts_worked_by_hand():
    _out = seed_memory_prose()
    text, texts = _out.report, _out.values
    assert texts["seed70_share"] == "8.75B"                      # 70B / 8 GPUs
    assert texts["seed405_bpp"] == f"{80e9 / (405e9 / 32):.1f}" == "6.3"    # 80 GB for 405B / 32 GPUs
    assert texts["seed10"] == "80 GB"                            # 16 bytes x 10B / 2 GPUs
    assert texts["seed10_12"] == "12"                            # 2 + 2 + 8 bytes: no fp32 master copy
    assert texts["seed10_12half"] == "60 GB"                     # 12 bytes x 10B / 2 GPUs
    assert texts["a100_gib"] == "80.0 GiB" and texts["h100_gib"] == "79.6 GiB"   # 81,920 and 81,559 MiB
    # all of 405B's 16 bytes a parameter on H100s, with nothing kept back
    from llmsizing import get_model

    n405 = get_model("llama-3.1-405b").n_params
    assert texts["seed405_min_all"] == f"{math.ceil(16 * n405 / (81_559 * 2**20))}"
    assert int(texts["seed405_min"]) > int(texts["seed405_min_all"])      # a usable share below 100%
    assert text.splitlines()[0].split() == "seed setting seed says model states per GPU fits?".split()
    # the seeds' own figures (data/seed_claims.csv: 80; 80; 35; 80 to 100, "GB per GPU") in the table's column
    for quoted in ("80 GB per GPU", "35 GB per GPU", "80-100 GB per GPU with act."):
        assert f" {quoted} " in text, quoted


def test_a_false_statement_raises_prose_out_of_date(monkeypatch):
    """If the catalogue gave PCIe Gen5 x16 another rate, the chapter's 64 GB/s would be out of date."""
    assert ProseOutOfDate is BaseProseOutOfDate
    monkeypatch.setattr(dp_prose, "link_bandwidth_one_way_gbps", lambda gpu: 50.0)
    with pytest.raises(ProseOutOfDate, match="chapter 7's prose says PCIe Gen5 x16 moves 64 GB/s"):
        pcie_rates_gbps()
