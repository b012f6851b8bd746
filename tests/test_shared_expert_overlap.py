"""The shared experts beside the expert-parallel all-to-all (issue 35; Parallel.shared_expert_overlap,
Megatron-Core's --moe-shared-expert-overlap; DeepSeek-V2, arXiv:2405.04434 Sec. 3.1.3), derived by hand.

Megatron-Core (megatron/core/transformer/moe/shared_experts.py, token_dispatcher.py) runs the shared experts
on their own stream: linear_fc1_forward_and_act beside the dispatch all-to-all, linear_fc2_forward beside
the combine, the backward in the same pairs. So each all-to-all call hides at most the seconds of its
partner GEMMs (the backward's twice the forward's FLOPs)."""

import pytest

from llmsizing import Parallel, get_gpu, get_model, step_time
from llmsizing.kernels import rates
from llmsizing.moe_time import shared_expert_window_s

V2 = get_model("deepseek-v2")
KW = dict(batch=1, seq=4096, grad_accum=4, precision="bf16-mixed", max_nodes=None)


def test_old_calls_are_unchanged_and_the_option_is_off_by_default():
    assert Parallel().shared_expert_overlap is False
    par = Parallel(dp=8, ep=8)
    st = step_time(V2, "H800", par, **KW)
    # the exposed all-to-all is every EP row in full (no ep_overlap), as before the option existed
    assert st.exposed_by_group_s["ep"] == sum(c.time_s for c in st.communication.collectives
                                              if c.group == "ep")
    assert shared_expert_window_s(V2, get_gpu("H800"), par, 1, 4096, "bf16", 0.5) == (0.0, 0.0)


def test_deepseek_v2s_shared_experts_window_by_hand():
    # 2 shared experts of width 1,536 = one MLP of 3,072 (DeepSeek's shared_experts module); hidden 5,120;
    # gate + up: 2 x 3,072 x 5,120 weights, down: 3,072 x 5,120; 2 FLOPs a weight and token, 4,096 tokens
    g = get_gpu("H800")
    par = Parallel(dp=8, ep=8, shared_expert_overlap=True)
    rate = rates(V2, g, tp=1, cp=1, batch=1, seq=4096, dtype="bf16", kernel_efficiency=0.5, ep=8)[0]
    fc1, fc2 = shared_expert_window_s(V2, g, par, 1, 4096, "bf16", 0.5)
    assert fc1 == pytest.approx(2 * (2 * 3072 * 5120) * 4096 / rate, rel=1e-12)
    assert fc2 == pytest.approx(2 * (3072 * 5120) * 4096 / rate, rel=1e-12)
    assert fc1 == pytest.approx(2 * fc2, rel=1e-12)       # a gated MLP: its first GEMMs hold 2/3 of its FLOPs


def test_each_all_to_all_hides_behind_its_partner_gemms():
    g = get_gpu("H800")
    par = Parallel(dp=8, ep=8, shared_expert_overlap=True)
    st = step_time(V2, "H800", par, **KW)
    off = step_time(V2, "H800", Parallel(dp=8, ep=8), **KW)
    fc1, fc2 = shared_expert_window_s(V2, g, par, 1, 4096, "bf16", st.kernel_efficiency)
    partner = {"dispatch (forward)": fc1, "combine (forward)": fc2, "combine (backward)": 2 * fc2,
               "dispatch (backward)": 2 * fc1}
    by_hand = 0.0
    for c in st.communication.collectives:
        if c.group == "ep":
            w = next(v for k, v in partner.items() if c.collective.endswith(k))
            by_hand += c.calls * max(0.0, c.time_s / c.calls - w)
    assert st.exposed_by_group_s["ep"] == pytest.approx(by_hand, rel=1e-12)
    assert 0 < st.exposed_by_group_s["ep"] < off.exposed_by_group_s["ep"]
    assert st.compute_s == off.compute_s            # the shared experts still compute; the network hides
    # with DualPipe's share on top, what the shared experts leave is exposed less that share
    half = step_time(V2, "H800", par, ep_overlap=0.5, **KW)
    assert half.exposed_by_group_s["ep"] == pytest.approx(by_hand * 0.5, rel=1e-12)


def test_a_model_without_shared_experts_is_refused():
    with pytest.raises(ValueError, match="shared_expert_overlap"):
        step_time("mixtral-8x7b", "H100 SXM", Parallel(dp=8, ep=8, shared_expert_overlap=True), batch=1,
                  seq=4096)
    with pytest.raises(TypeError, match="shared_expert_overlap"):
        Parallel(shared_expert_overlap="yes")
