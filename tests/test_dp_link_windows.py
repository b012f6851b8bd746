"""The data-parallel window is taken off once per link (issue 35; llmsizing.exposure.dp_window_exposed_s).

A mixture of experts reduces its dense gradients over dp x cp and its routed experts' over edp: two
collectives behind the same last backward (two weight all-gathers before the same first forward). On one link
they share its bandwidth, so their times add before the window is taken off; on two links they run side by
side, and in each window the step waits for the one that ends last (review24b M2). The expected values below are worked out by hand from round numbers (or from the collectives' own
seconds, with the window rule done by hand), never read off the code's output.
"""

import warnings

import pytest

from llmsizing import exposure, layouts
from llmsizing.catalog import get_gpu
from llmsizing.comm import Communication, communication
from llmsizing.network import Collective
from llmsizing.parallel import Parallel

# a step of two micro-batches of 0.6 s, a third of each the forward: windows of 0.2 s (forward) and
# 0.4 s (backward)
COMPUTE_S, M, FWD_SHARE = 1.2, 2, 1 / 3
FWD_S, BWD_S = 0.2, 0.4


#: The window each hand-made collective below hides behind (ZeRO, Rajbhandari et al. 2020, Sec. 7, as chapter 8
#: tells it): written here by hand, the test's own data (review24c M5: the library reads a collective's slot).
_WINDOW = {"DP gradient all-reduce": "gradients", "ZeRO-1 gradient reduce-scatter": "gradients",
           "ZeRO-1 weight all-gather": "weight all-gather", "ZeRO-2 weight all-gather": "weight all-gather",
           "ZeRO-2 gradient reduce-scatter": "ZeRO-2 reduce-scatter",
           "ZeRO-3 weight all-gather (forward)": "ZeRO-3 forward gather",
           "ZeRO-3 weight all-gather (backward)": "ZeRO-3 backward",
           "ZeRO-3 gradient reduce-scatter": "ZeRO-3 backward",
           # ZeRO-3 under a pipeline without resharding gathers once per step, before the first forward
           "FSDP weight all-gather (kept for the step)": "weight all-gather"}


def _row(name, seconds, link, slot=None, calls=1):
    """A hand-made collective of ``seconds`` (bytes at 1 GB/s, no latency) on ``link``, in its window
    (``slot``; by default :data:`_WINDOW`'s for its name, the experts' rows as the dense ones)."""
    slot = slot or _WINDOW[name.removesuffix(" (experts)")]
    return Collective(name, "dp", 16, link, calls, seconds * 1e9, seconds * 1e9, 1.0, slot=slot)


def _exposed_dp(rows, parallel, m=M):
    comm = Communication(tuple(rows), parallel)
    return exposure.exposed_by_group(comm, COMPUTE_S, grad_accum=m, fwd_share=FWD_SHARE)["dp"]


def _zero1_rows(dense_rs, dense_ag, expert_rs, expert_ag, expert_link="NVLink 4"):
    """ZeRO-1's four data-parallel collectives of a mixture of experts: the dense ones on the NICs, the
    experts' on ``expert_link`` (seconds each, by hand)."""
    return [_row("ZeRO-1 gradient reduce-scatter", dense_rs, "network"),
            _row("ZeRO-1 weight all-gather", dense_ag, "network"),
            _row("ZeRO-1 gradient reduce-scatter (experts)", expert_rs, expert_link),
            _row("ZeRO-1 weight all-gather (experts)", expert_ag, expert_link)]


def _on_the_nics(rows):
    """The same collectives, all on the NICs (one shared link)."""
    return [r if r.link == "network" else _row(r.collective, r.time_s, "network", r.slot) for r in rows]


ZERO1 = Parallel(dp=16, ep=8, zero=1)


def test_zero1_groups_on_one_nic_share_each_window():
    # last backward 0.4 s: 0.30 + 0.25 = 0.55 s of reduce-scatters on the NICs -> 0.15 s exposed
    # first forward 0.2 s: 0.10 + 0.15 = 0.25 s of all-gathers -> 0.05 s exposed; 0.20 s in all
    # (each against the whole window on its own, the old rule, would have hidden all of it: 0)
    rows = [_row("ZeRO-1 gradient reduce-scatter", 0.30, "network"),
            _row("ZeRO-1 weight all-gather", 0.10, "network"),
            _row("ZeRO-1 gradient reduce-scatter (experts)", 0.25, "network"),
            _row("ZeRO-1 weight all-gather (experts)", 0.15, "network")]
    assert _exposed_dp(rows, ZERO1) == pytest.approx(0.15 + 0.05, rel=1e-12)


def test_an_expert_group_inside_the_node_runs_beside_the_nic():
    # the experts' collectives on NVLink, the dense ones on the NICs: each against the whole window,
    # dense 0.50 - 0.40 = 0.10 s exposed, its gather 0.10 < 0.20 hidden; the experts' 0.25 < 0.40 and
    # 0.15 < 0.20 hidden: 0.10 s (on one link it would be 0.50 + 0.25 - 0.40 + 0.10 + 0.15 - 0.20 = 0.40 s)
    rows = _zero1_rows(0.50, 0.10, 0.25, 0.15)
    assert _exposed_dp(rows, ZERO1) == pytest.approx(0.10, rel=1e-12)
    shared = _on_the_nics(rows)
    assert _exposed_dp(shared, ZERO1) == pytest.approx(0.40, rel=1e-12)


def test_ddp_all_reduces_share_the_last_backward():
    # 0.30 + 0.20 = 0.50 s against 0.40 s: 0.10 s
    rows = [_row("DP gradient all-reduce", 0.30, "network"),
            _row("DP gradient all-reduce (experts)", 0.20, "network")]
    assert _exposed_dp(rows, Parallel(dp=16, ep=8)) == pytest.approx(0.10, rel=1e-12)


def test_zero2_reduce_scatters_share_each_backward():
    # per micro-batch (0.60 + 0.40) / 2 = 0.50 s against 0.40 s: 0.10 s, twice = 0.20 s; gathers hidden
    rows = [_row("ZeRO-2 gradient reduce-scatter", 0.60, "network"),
            _row("ZeRO-2 weight all-gather", 0.05, "network"),
            _row("ZeRO-2 gradient reduce-scatter (experts)", 0.40, "network"),
            _row("ZeRO-2 weight all-gather (experts)", 0.05, "network")]
    assert _exposed_dp(rows, Parallel(dp=16, ep=8, zero=2)) == pytest.approx(0.20, rel=1e-12)


def test_zero3_forward_gathers_share_each_forward():
    # per micro-batch (0.30 + 0.26) / 2 = 0.28 s against 0.20 s: 0.08 s, twice = 0.16 s; the backward's
    # gathers and reduce-scatters (0.30 + 0.30) / 2 = 0.30 s against 0.40 s: hidden
    rows = [_row("ZeRO-3 weight all-gather (forward)", 0.30, "network"),
            _row("ZeRO-3 weight all-gather (backward)", 0.10, "network"),
            _row("ZeRO-3 gradient reduce-scatter", 0.20, "network"),
            _row("ZeRO-3 weight all-gather (forward) (experts)", 0.26, "network"),
            _row("ZeRO-3 weight all-gather (backward) (experts)", 0.10, "network"),
            _row("ZeRO-3 gradient reduce-scatter (experts)", 0.20, "network")]
    rows = [r if "(forward)" in r.collective else          # the backward's: one call per micro-batch
            Collective(r.collective, "dp", 16, r.link, M, r.message_bytes, r.bytes_per_gpu, 1.0, slot=r.slot)
            for r in rows]
    assert _exposed_dp(rows, Parallel(dp=16, ep=8, zero=3)) == pytest.approx(0.16, rel=1e-12)


def _dp_rows(comm):
    return [c for c in comm.collectives if c.group == "dp"]


@pytest.mark.parametrize("dp, ep, link", [(16, 8, "network"), (8, 4, None)])  # None: the GPU's own
def test_a_real_moe_layout_by_hand(dp, ep, link):
    """Mixtral 8x7B on H100s, ZeRO-1: over two 8-GPU nodes (dp 16, ep 8: edp 2, 8 ranks apart) both groups
    leave the node; inside one (dp 8, ep 4: edp 2) both stay on NVLink. Either way the two groups span the
    same dp ranks, so one link, and the exposed seconds are the windows taken off the sums, by hand."""
    par = Parallel(dp=dp, ep=ep, zero=1)
    comm = communication("mixtral-8x7b", par, batch=1, seq=4096, gpu="H100 SXM", grad_accum=M)
    rows = {c.collective: c for c in _dp_rows(comm)}
    assert set(rows) == {"ZeRO-1 gradient reduce-scatter", "ZeRO-1 weight all-gather",
                         "ZeRO-1 gradient reduce-scatter (experts)", "ZeRO-1 weight all-gather (experts)"}
    assert {c.link for c in rows.values()} == {link or get_gpu("H100 SXM").link}      # one link either way
    grads = sum(rows[f"ZeRO-1 gradient reduce-scatter{tag}"].time_s for tag in ("", " (experts)"))
    gathers = sum(rows[f"ZeRO-1 weight all-gather{tag}"].time_s for tag in ("", " (experts)"))
    # a compute that leaves part of each sum exposed: windows of 0.6 and 0.3 of the sums
    compute = (0.6 * grads / (1 - FWD_SHARE)) * M
    fwd, bwd = compute / M * FWD_SHARE, compute / M * (1 - FWD_SHARE)
    assert gathers > fwd
    want = (grads - bwd) + (gathers - fwd)
    got = exposure.exposed_by_group(comm, compute, grad_accum=M, fwd_share=FWD_SHARE)["dp"]
    assert got == pytest.approx(want, rel=1e-12)


def test_both_groups_ride_one_link_in_every_layout():
    # the claim exposed_by_group's docstring makes (dense tp-cp-dp and expert etp-ep-edp grids over the same
    # ranks): every MoE layout's two data-parallel parts come out on one link, inside a node or across
    for gpu, model, layouts_ in (("H100 SXM", "mixtral-8x7b", [(1, 8, 4), (1, 16, 8), (2, 64, 8), (4, 32, 8),
                                                                (8, 16, 8), (1, 512, 8), (2, 4, 2)]),
                                 ("MI355X", "deepseek-v3", [(8, 1920, 128), (1, 256, 64), (2, 64, 32)])):
        for tp, dp, ep in layouts_:
            for expert_tp in (False, True):
                par = Parallel(tp=tp, dp=dp, ep=ep, zero=1, sp=tp > 1, expert_tp=expert_tp)
                comm = communication(model, par, batch=1, seq=4096, gpu=gpu)
                links = {c.link for c in _dp_rows(comm)}
                assert len(links) == 1, (gpu, model, tp, dp, ep, expert_tp, links)


def _old_rule_dp(comm, compute_s, m, fwd_share):
    """The rule before issue 35's change, written out: every data-parallel collective against its whole
    window on its own (what a dense model, one collective per window, must keep bit for bit)."""
    from llmsizing.pipeline_schedule import grad_reduces, zero3_exposed_s

    one = compute_s / m
    fwd, bwd = one * fwd_share, one * (1 - fwd_share)
    out, zero3_bwd, units = 0.0, 0.0, 0
    for c in _dp_rows(comm):
        t = c.time_s
        if "all-gather (forward)" in c.collective:
            out += m * max(0.0, t / m - fwd)
        elif c.collective.startswith("ZeRO-3"):
            zero3_bwd, units = zero3_bwd + t, c.calls // grad_reduces(comm.parallel, m)
        elif "weight all-gather" in c.collective:
            out += max(0.0, t - fwd)
        elif c.collective.startswith("ZeRO-2 gradient"):
            out += m * max(0.0, t / m - bwd)
        else:
            out += max(0.0, t - bwd)
    if zero3_bwd:
        out += zero3_exposed_s(comm.parallel, m, units, fwd, bwd, zero3_bwd)
    return out


@pytest.mark.parametrize("zero", [0, 1, 2, 3])
@pytest.mark.parametrize("pp, cp", [(1, 1), (4, 1), (1, 2), (4, 2)])
def test_dense_models_keep_their_bits(zero, pp, cp):
    for dp, m, compute in ((16, 1, 0.05), (16, 8, 1.5), (64, 8, 0.4), (64, 16, 30.0)):
        par = Parallel(tp=8, pp=pp, dp=dp, zero=zero, cp=cp, sp=True)
        comm = communication("llama-3-70b", par, batch=1, seq=8192, gpu="H100 SXM", grad_accum=m)
        got = exposure.exposed_by_group(comm, compute, grad_accum=m, fwd_share=0.3)["dp"]
        assert got == _old_rule_dp(comm, compute, m, 0.3)          # the same bits, not approximately


def test_more_compute_never_makes_a_moe_step_faster():
    # phys24's finding: DeepSeek-V3 on 15,360 MI355Xs (tp 8, dp 1,920, ep 128, ZeRO-1, one micro-batch per
    # step). Compute slower by 1% lengthens each window by 1% of it; with each window counted once per link
    # the exposed time falls by at most what the compute rose (the forward's plus the backward's share of one
    # micro-batch), so the step cannot get shorter. Counted once per collective it fell twice as fast.
    par = Parallel(tp=8, dp=1920, zero=1, ep=128, sp=True)
    kw = dict(batch=1, seq=4096, grad_accum=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        base = layouts.step_time("deepseek-v3", "MI355X", par, **kw)
        slower = layouts.step_time("deepseek-v3", "MI355X", par,
                                   kernel_efficiency=base.kernel_efficiency * 0.99, **kw)
    assert slower.compute_s > base.compute_s
    assert slower.step_s >= base.step_s
    rose = slower.compute_s - base.compute_s
    assert slower.exposed_by_group_s["dp"] >= base.exposed_by_group_s["dp"] - rose


def test_experts_in_the_dense_buffer_are_one_collective():
    """Megatron-Core's group_params_for_buffers gives the experts a buffer of their own only with ep > 1 or
    etp != tp, and FSDP's block unit gathers them with the attention: otherwise one collective per bucket.
    OLMoE-1B-7B (6,919,161,856 parameters, its config: 16 layers of 64 experts of 3 x 2,048 x 1,024 and
    attention with q/k norms, 50,304 x 2,048 embeddings twice) under ZeRO-1 in one 8-GPU node: one
    reduce-scatter of the whole model's bf16 gradients, 7/8 x 6,919,161,856 x 2 bytes from each GPU, no
    "(experts)" row."""
    from llmsizing.comm import experts_apart

    assert not experts_apart(Parallel(dp=8))
    assert not experts_apart(Parallel(tp=2, dp=8, sp=True, expert_tp=True))
    assert experts_apart(Parallel(dp=8, ep=2)) and experts_apart(Parallel(tp=2, dp=8, sp=True))
    # per layer: the experts, q k v o, the router, two block norms, the q and k norms; then the embedding and
    # the head, the final norm
    layer = 64 * 3 * 2048 * 1024 + 4 * 2048 * 2048 + 64 * 2048 + 2 * 2048 + 2 * 2048
    params = 16 * layer + 2 * 50304 * 2048 + 2048
    assert params == 6_919_161_856
    one = communication("olmoe-1b-7b", Parallel(dp=8, zero=1), batch=1, seq=4096, gpu="H100 SXM")
    rows = {c.collective: c for c in _dp_rows(one)}
    assert set(rows) == {"ZeRO-1 gradient reduce-scatter", "ZeRO-1 weight all-gather"}
    grads = rows["ZeRO-1 gradient reduce-scatter"].bytes_per_gpu
    assert grads == pytest.approx(7 / 8 * params * 2, rel=1e-12)
    apart = communication("olmoe-1b-7b", Parallel(dp=8, ep=2, zero=1), batch=1, seq=4096, gpu="H100 SXM")
    assert {c.collective for c in _dp_rows(apart)} >= {"ZeRO-1 gradient reduce-scatter (experts)"}


@pytest.mark.parametrize("expert_tp", [False, True])
def test_the_planner_prices_the_moe_windows_as_step_time(expert_tp):
    # every plan with one expert buffer (ep = 1, etp = tp) or two (ep > 1, or etp != tp), against step_time
    from llmsizing.planner import plan

    kw = dict(tokens=1e12, gpus=("H100 SXM",), seq=4096, global_batch=64, max_gpus=256, expert_tp=expert_tp)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = plan("mixtral-8x7b", **kw)
        import pandas as pd

        ep1 = df["ep"] == 1
        parts = [df[ep1 & (df["tp"] == 1)], df[ep1 & (df["tp"] > 1)], df[~ep1]]
        assert all(len(x) for x in parts)
        # (10 of each: session 37's Megatron-Core buckets, fewer calls, left 3 of 8 with exposed windows; drawn
        # from the layouts in a fixed order, not plan()'s order by step time, so a pricing change does not
        # change which are drawn: session 39)
        key = ["tp", "pp", "dp", "zero", "cp", "ep", "micro_batch", "recompute", "virtual_stages"]
        rows = pd.concat([x.sort_values(key, kind="stable").sample(min(10, len(x)), random_state=3)
                          for x in parts])
        exposed = 0
        for r in rows.itertuples():
            par = Parallel(tp=int(r.tp), pp=int(r.pp), dp=int(r.dp), zero=int(r.zero), sp=bool(r.sp),
                           cp=int(r.cp), ep=int(r.ep), expert_tp=expert_tp)
            st = layouts.step_time("mixtral-8x7b", "H100 SXM", par, batch=int(r.micro_batch), seq=4096,
                                   grad_accum=int(r.grad_accum), recompute=r.recompute)
            assert r.step_time_s == pytest.approx(st.step_s, rel=1e-9), par
            exposed += r.ep == 1 and st.exposed_by_group_s["dp"] > 0
        assert exposed >= 4                     # (plans whose data-parallel windows show: the rule is tested)


def test_two_links_expose_the_later_one_not_the_sum():
    """review24b M2: the dense ZeRO-1 reduce-scatter on the NICs and the experts' on NVLink start in the same
    last backward (Megatron-Core launches both buffers' bucket groups together) and run side by side, so the
    step waits for the one that ends last: 0.5 s and 0.5 s against a 0.4 s backward leave 0.5 - 0.4 = 0.10 s,
    not (0.5 - 0.4) + (0.5 - 0.4) = 0.20 s (the sum of each link's exposure, the rule before). On one link
    the two share its bandwidth: 0.5 + 0.5 - 0.4 = 0.60 s. Gathers 0.1 s each, inside the 0.2 s forward."""
    rows = _zero1_rows(0.50, 0.10, 0.50, 0.10)
    assert _exposed_dp(rows, ZERO1) == pytest.approx(0.10, rel=1e-12)
    shared = _on_the_nics(rows)
    assert _exposed_dp(shared, ZERO1) == pytest.approx(0.60, rel=1e-12)


def test_two_links_wait_for_the_later_one_window_by_window():
    """Slot by slot: the NICs' reduce-scatter 0.7 s and gather 0.1 s, NVLink's 0.5 s and 0.3 s. In the last
    backward (0.4 s) the NICs end last, 0.30 s exposed; before the first forward (0.2 s) NVLink does, 0.10 s:
    0.40 s in all (the larger link on its own would give 0.30 + 0 = 0.30 s, the sum of the two links'
    0.30 + 0.10 + 0.10 = 0.50 s)."""
    rows = _zero1_rows(0.70, 0.10, 0.50, 0.30)
    assert _exposed_dp(rows, ZERO1) == pytest.approx(0.40, rel=1e-12)


def test_every_data_parallel_collective_carries_its_window():
    """review24c M5: a data-parallel collective's window is its ``slot``, set where dp_collectives defines it
    (one of DP_SLOTS), and communication's rows carry it, the experts' as the dense ones; the window the
    exposure takes is the slot's, whatever the name says."""
    from llmsizing.collectives import DP_SLOTS
    from llmsizing.zero_traffic import dp_collectives, dp_schedule

    for zero in (0, 1, 2, 3):
        for reshard in (False, True):
            for pipelined in (False, True):
                rows = dp_collectives(zero, 1e9, 2.0, 4.0, 4, reshard, pipelined=pipelined)
                assert {slot for *_, slot in rows} <= set(DP_SLOTS)
                assert dp_schedule(zero, 1e9, 2.0, 4.0, 4, reshard, pipelined=pipelined) == \
                    [row[:4] for row in rows]
                assert {name: slot for name, *_, slot in rows} == {name: _WINDOW[name] for name, *_ in rows}
    for par in (Parallel(dp=16, ep=8, zero=1), Parallel(dp=8, zero=3), Parallel(dp=8, pp=2, zero=2)):
        comm = communication("mixtral-8x7b", par, batch=1, seq=4096, gpu="H100 SXM", grad_accum=M)
        dp_rows = _dp_rows(comm)
        assert dp_rows and all(c.slot == _WINDOW[c.collective.removesuffix(" (experts)")] for c in dp_rows)
        assert all(c.slot is None for c in comm.collectives if c.group != "dp")
    # the slot, not the name: a reduce-scatter placed in the next step's first forward (0.2 s) by its slot
    as_gather = [_row("ZeRO-1 gradient reduce-scatter", 0.30, "network", slot="weight all-gather")]
    assert _exposed_dp(as_gather, ZERO1) == pytest.approx(0.30 - 0.20, rel=1e-12)
    assert _exposed_dp([_row("ZeRO-1 gradient reduce-scatter", 0.30, "network")], ZERO1) == 0.0


def test_a_slot_is_checked():
    with pytest.raises(ValueError, match="slot"):
        Collective("ZeRO-1 gradient reduce-scatter", "dp", 16, "network", 1, 1e9, 1e9, 1.0, slot="backward")
    with pytest.raises(ValueError, match="slot.*group 'tp'"):
        Collective("TP all-reduce (forward)", "tp", 8, "NVLink 4", 1, 1e9, 1e9, 1.0, slot="gradients")


def test_the_name_lookup_still_works_with_a_warning():
    """The old path for one release: dp_slot(name) and a data-parallel Collective without a slot are still
    placed by the name (a table read off dp_collectives' rows), each with a DeprecationWarning; a name it
    does not know is refused, never sent to a default window."""
    from llmsizing.collectives import DP_SLOTS

    for name, window in _WINDOW.items():
        with pytest.warns(DeprecationWarning, match="Collective.slot"):
            assert exposure.dp_slot(name) == DP_SLOTS.index(window)
        with pytest.warns(DeprecationWarning, match="Collective.slot"):
            assert exposure.dp_slot(name + " (experts)") == DP_SLOTS.index(window)
    assert exposure.DP_SLOT_OF == {name: DP_SLOTS.index(window) for name, window in _WINDOW.items()}
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="name="):
        exposure.dp_slot("ZeRO-1 gradient all-reduce")
    rows = _zero1_rows(0.50, 0.10, 0.25, 0.15)
    bare = [Collective(r.collective, "dp", 16, r.link, 1, r.message_bytes, r.bytes_per_gpu, 1.0) for r in rows]
    with pytest.warns(DeprecationWarning, match="no slot"):
        assert _exposed_dp(bare, ZERO1) == _exposed_dp(rows, ZERO1)


def test_the_window_rule_keeps_its_old_keywords():
    per_pass = (0.0, 0.0, 0.3, 0.0, 0.5)           # 0.1 s over the forward, 0.1 s over the backward
    assert exposure.dp_window_exposed_s(per_pass, fwd_s=0.2, bwd_s=0.4, micro_batches=2) == pytest.approx(0.2)
    with pytest.warns(DeprecationWarning, match="fwd_s"):
        old = exposure.dp_window_exposed_s(per_pass, fwd=0.2, bwd=0.4, micro_batches=2)
    assert old == pytest.approx(0.2)
