"""The planner's array paths (issue 35, llmsizing.plan_terms) give what the step model's own calls give, bit
for bit: the per-(GPU, tp, cp, micro-batch) terms against step_time, the data-parallel schedules on arrays
against one dp_schedule and ring_collective per key, kernels.rates for several ep at once against one call
each, and the planner's Pareto front against its definition."""

import numpy as np
import pytest

from llmsizing import catalog
from llmsizing.collectives import DP_SLOTS
from llmsizing.comm import communication, dp_bucket_params, dp_collectives, ring_collective
from llmsizing.exposure import tp_backward_async_s
from llmsizing.kernels import rates
from llmsizing.layouts import step_time
from llmsizing.moe import _split
from llmsizing.network import GroupLink, get_node
from llmsizing.parallel import Parallel
from llmsizing.plan_pricing import _dp_calls, _dp_slot
from llmsizing.plan_terms import _group_columns, dp_link_rows, dp_unit_rows, layer_terms
from llmsizing.plan_rank import _by_cost, _digits
from llmsizing.planner import _lex_orders, _pareto

GPUS = ("H100 SXM", "B200", "A100 80GB", "MI300X")


@pytest.mark.parametrize("model, cp_comm", [("mixtral-8x7b", "p2p"), ("llama-3-8b", "all_gather"),
                                            ("qwen3-30b-a3b", "a2a")])
def test_layer_terms_are_step_time_pieces(model, cp_comm):
    m = catalog.get_model(model)
    gpus = [catalog.get_gpu(g) for g in GPUS]
    node_of = {g.name: get_node(None, g) for g in gpus}
    rcs = ("none", "full")
    keys = [(g_, t, c, b, 1, r) for g_ in range(len(gpus)) for t in (1, 2) for c in (1, 2)
            for b in (1, 2) for r in (0, 1)]
    rows, peaks = layer_terms(m, gpus, keys, seq=8192, eff=None, precision="bf16-mixed", dtype="bf16",
                              node_of=node_of, cp_comm=cp_comm, rcs=rcs)
    for (g_, t, c, b, e, r), row in zip(keys, rows):
        g = gpus[g_]
        st = step_time(m, g, Parallel(tp=t, sp=t > 1, cp=c, cp_comm=cp_comm), batch=b, seq=8192,
                       recompute=rcs[r], node=node_of[g.name])
        gemm, attention = rates(m, g, tp=t, cp=c, batch=b, seq=8192, dtype="bf16",
                                kernel_efficiency=st.kernel_efficiency, ep=e)
        by = st.comm_by_group_s
        # (plan44: the last two, the TP seconds Megatron's column-parallel backward can hide behind its
        # dgrad and wgrad GEMMs, TP_BACKWARD_ASYNC's shares of the step's own collectives)
        assert tuple(row) == (gemm, st.exposed["tp"], st.exposed.get("cp", 0.0), by["tp"],
                              by.get("cp", 0.0), attention, *tp_backward_async_s(st.communication))
        if t > 1:     # 2 of the backward's 4 SP gathers behind the dgrad, both reduce-scatters the wgrad
            sp = {c.collective: c.time_s for c in st.communication.collectives}
            assert row[6] == pytest.approx(sp["SP all-gather (backward)"] / 2, rel=1e-12)
            assert row[7] == pytest.approx(sp["SP reduce-scatter (backward)"], rel=1e-12)
        else:
            assert row[6] == row[7] == 0.0
        assert peaks[g_] == st.peak_flops


def test_rates_for_several_ep_at_once():
    m, g = catalog.get_model("deepseek-v3"), catalog.get_gpu("H100 SXM")
    kw = dict(tp=2, cp=1, batch=2, seq=4096, dtype="bf16", kernel_efficiency=0.6)
    gemm, attention = rates(m, g, ep=(1, 8, 64), **kw)
    assert gemm == tuple(rates(m, g, ep=e, **kw)[0] for e in (1, 8, 64))
    assert attention == rates(m, g, ep=8, **kw)[1]
    assert gemm[0] != gemm[2]            # (the experts' GEMMs grow with ep: the tuple is not one rate)


@pytest.mark.parametrize("part", [0, 1])
def test_dp_unit_rows_are_the_schedules(part):
    m = catalog.get_model("deepseek-v3")
    # (the last column: the group's GPUs per domain, 1 inside it or one per node; 8 a hierarchical one)
    keys = [(t, z, n, e, x, p) for t in (1, 2, 8) for z in (0, 1, 2, 3) for n in (1, 2, 6, 16, 128)
            for e in (1, 8) for x in (0, 1) for p in ((1, 8) if x and n > 8 else (1,))]
    rows = dp_unit_rows(m, keys, part, w_b=2.0, g_b=4.0, expert_tp=False, n_slots=5, dp_calls=_dp_calls)
    unit = {(x, p): GroupLink("unit", 1.0, 1.0, 1.0, p, bool(x)) for x in (0, 1) for p in (1, 8)}
    for (t, z, n, e, x, p), got in zip(keys, rows):
        want = np.zeros((2, 5))
        if n > 1:                        # the loop plan_pricing ran before issue 35's fifth round
            on_rank = _split(m, t, 1, None, e, False)[0][part]
            for name, kind, message, calls, slot in dp_collectives(z, on_rank, 2.0, 4.0, 1, layers=m.layers,
                                                                   bucket_params=dp_bucket_params(n)):
                c = ring_collective(name, "dp", n, kind, message, calls, unit[x, p], slot)
                want[0, DP_SLOTS.index(c.slot)] += c.bytes_per_gpu
                want[1, DP_SLOTS.index(c.slot)] += c.latency_s / c.calls
        assert np.array_equal(got, want), (t, z, n, e, x, p)


def test_the_old_slot_of_still_prices_the_same_with_a_warning():
    """review24c M5: the rows read each collective's own slot; ``slot_of`` (its window from its name) is
    still taken for one release, with a DeprecationWarning, and gives the same rows."""
    m = catalog.get_model("mixtral-8x7b")
    keys = [(t, z, n, 1, x, 1) for t in (1, 8) for z in (0, 1, 2, 3) for n in (2, 16) for x in (0, 1)]
    new = dp_unit_rows(m, keys, 0, w_b=2.0, g_b=4.0, expert_tp=False, n_slots=5, dp_calls=_dp_calls)
    with pytest.warns(DeprecationWarning) as said:           # (slot_of's, and dp_slot's own)
        old = dp_unit_rows(m, keys, 0, w_b=2.0, g_b=4.0, expert_tp=False, n_slots=5, dp_calls=_dp_calls,
                           slot_of=_dp_slot)
    assert any("slot_of" in str(w.message) for w in said)
    assert np.array_equal(new, old)


def test_dp_link_rows_old_slot_of_prices_the_same_with_a_warning():
    """review25b L1: dp_link_rows' ``slot_of`` path (the window from the name) warns and gives the rows the
    collectives' own slots give."""
    m = catalog.get_model("llama-3-8b")
    gpus = [catalog.get_gpu(g) for g in GPUS]
    node_of = {g.name: get_node(None, g) for g in gpus}
    keys = [(g_, t, z, d) for g_ in range(len(gpus)) for t in (1, 8) for z in (0, 1, 2, 3) for d in (2, 16)]
    kw = dict(seq=8192, precision="bf16-mixed", node_of=node_of, n_slots=5)
    new = dp_link_rows(m, gpus, keys, **kw)
    with pytest.warns(DeprecationWarning) as said:
        old = dp_link_rows(m, gpus, keys, slot_of=_dp_slot, **kw)
    assert any("slot_of" in str(w.message) for w in said)
    for a, b in zip(new, old):
        assert np.array_equal(a, b)


def _front(days, cost, memory):
    """The definition: finite days and cost, no other row at least as fast and as cheap and better in one;
    of rows tied on both, the first with the least memory."""
    out = []
    for i in range(len(days)):
        if not (np.isfinite(days[i]) and np.isfinite(cost[i])):
            out.append(False)
            continue
        beaten = any(days[j] <= days[i] and cost[j] <= cost[i] and (days[j] < days[i] or cost[j] < cost[i])
                     for j in range(len(days)) if np.isfinite(days[j]) and np.isfinite(cost[j]))
        ties = [j for j in range(len(days)) if days[j] == days[i] and cost[j] == cost[i]]
        first = min(ties, key=lambda j: (memory[j], j))
        out.append(not beaten and first == i)
    return np.array(out, dtype=bool)


@pytest.mark.parametrize("model, precision", [("llama-3-8b", "bf16-mixed"), ("llama-3-70b", "fp8-mixed"),
                                              ("gpt3-175b", "bf16-mixed-fp32-grads")])
def test_dp_link_rows_are_communications_rows(model, precision):
    """Issue 32: dp_link_rows prices a dense model's data-parallel collectives without calling
    communication; each key's row is what that key's own communication (its dp collectives, on its own link)
    gives, bit for bit: bytes of a pass summed per slot, seconds per byte, one call's latency summed."""
    m = catalog.get_model(model)
    gpus = [catalog.get_gpu(g) for g in GPUS]
    node_of = {g.name: get_node(None, g) for g in gpus}
    keys = [(g_, t, z, d) for g_ in range(len(gpus)) for t in (1, 2, 8) for z in (0, 1, 2, 3)
            for d in (1, 2, 6, 16, 64, 512)]
    per_byte, traffic, latency = dp_link_rows(m, gpus, keys, seq=8192, precision=precision, node_of=node_of,
                                              n_slots=5)
    for k, (g_, t, z, d) in enumerate(keys):
        g = gpus[g_]
        want = np.zeros((3, 5))
        if d > 1:
            comm = communication(m, Parallel(tp=t, dp=d, zero=z, sp=t > 1), batch=1, seq=8192, gpu=g,
                                 precision=precision, node=node_of[g.name])
            for c in comm.collectives:
                if c.group == "dp":
                    s = DP_SLOTS.index(c.slot)
                    want[0, s] = 1 / (c.bandwidth_gbps * 1e9)
                    want[1, s] += c.bytes_per_gpu
                    want[2, s] += c.latency_s / c.calls
            assert want[1].any()
        assert per_byte[k].tolist() == want[0].tolist(), (k, keys[k])
        assert traffic[k].tolist() == want[1].tolist(), (k, keys[k])
        assert latency[k].tolist() == want[2].tolist(), (k, keys[k])


def test_pareto_is_the_front():
    rng = np.random.default_rng(35)
    for _ in range(300):
        n = int(rng.integers(0, 25))
        days, cost = rng.integers(0, 5, n).astype(float), rng.integers(0, 5, n).astype(float)
        memory = rng.integers(0, 3, n).astype(float)
        for a in (days, cost):
            bad = rng.random(n) < 0.1
            a[bad] = rng.choice([np.nan, np.inf], bad.sum())
        assert np.array_equal(_pareto(days, cost, memory), _front(days, cost, memory)), (days, cost, memory)


def test_lex_orders_and_groups_are_numpys():
    # planner._lex_orders (issue 35) is np.lexsort: ties in every key keep the rows' order, -0.0 ties 0.0, inf
    # sorts last, a NaN or a packed key over 63 bits hands over to np.lexsort; plan_terms._group_columns is
    # np.unique of the packed key (groups in increasing order, each group's first row, each row's group)
    rng = np.random.default_rng(36)
    for _ in range(300):
        n = int(rng.integers(0, 40))
        a, b = rng.choice([0.0, -0.0, 1.5, 2.0, np.inf], n), rng.integers(0, 4, n).astype(float) / 3
        c = rng.integers(0, 3, n)
        if n and rng.random() < 0.2:
            b[0] = np.nan
        by_abc, by_ca = _lex_orders((a, b, c), (c, a))
        assert np.array_equal(by_abc, np.lexsort((a, b, c))) and np.array_equal(by_ca, np.lexsort((c, a)))
        if n:
            cols = (c, rng.integers(0, 5, n), rng.integers(0, rng.choice([4, 10**6]), n))
            key = np.ravel_multi_index(cols, [int(x.max()) + 1 for x in cols])
            _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
            values, got_first, got_inverse = _group_columns(*cols)
            assert np.array_equal(got_first, first) and np.array_equal(got_inverse, inverse.reshape(-1))
            assert all(np.array_equal(v, x[first]) for v, x in zip(values, cols))
    big = np.arange(70_000, dtype=float)
    assert np.array_equal(_lex_orders((big, -big, big % 7))[0], np.lexsort((big, -big, big % 7)))


def test_by_cost_is_numpys_lexsort():
    # plan_rank._by_cost (plan42: answer_frame's order by cost, then days, then row) is
    # np.lexsort((days, cost)) on values at 12 digits with many ties (as plans' days and cost are), on values
    # not at 12 digits, with 0, inf or NaN (its own check hands over to _lex_orders) and on one row or none
    rng = np.random.default_rng(42)
    for _ in range(300):
        n = int(rng.integers(0, 60))
        days = _digits(rng.choice([1.5, 2.25, 3.0, 1e-3, 7e14, 123.456789012345], n)
                       * rng.choice([1.0, 10.0, 1e6], n))
        cost = _digits(rng.choice([5.0, 5.0000000001, 8e9, 0.25], n) * rng.choice([1.0, 3.0, 1e-9], n))
        assert np.array_equal(_by_cost(days, cost), np.lexsort((days, cost)))
        raw_d, raw_c = rng.random(n) * 10, rng.choice([0.0, 0.5, np.inf, rng.random()], n)
        if n and rng.random() < 0.2:
            raw_c[0] = np.nan
        assert np.array_equal(_by_cost(raw_d, raw_c), np.lexsort((raw_d, raw_c)))
    # the order pinned by hand: cost first, then days, then the row
    assert _by_cost(np.array([2.0, 1.0, 2.0, 3.0]), np.array([5.0, 5.0, 5.0, 4.0])).tolist() == [3, 1, 0, 2]
    big = np.arange(70_000, dtype=float)[::-1] + 1
    assert np.array_equal(_by_cost(big % 11 + 1, big % 13 + 1), np.lexsort((big % 11 + 1, big % 13 + 1)))


def test_model_hash_is_kept_and_not_pickled():
    # Model.__hash__ is the dataclass's (the hash of every compared field), worked out once; a pickled Model
    # leaves it behind (a str's hash differs between processes) and is equal to, and hashes as, the original
    import dataclasses
    import pickle

    m = dataclasses.replace(catalog.get_model("llama-3-8b"), name="hash probe")
    fields = tuple(getattr(m, f.name) for f in dataclasses.fields(m) if f.compare)
    assert hash(m) == hash(fields) and m.__dict__["_hash"] == hash(fields)
    back = pickle.loads(pickle.dumps(m))
    assert "_hash" not in back.__dict__ and back == m and hash(back) == hash(m)
    other = dataclasses.replace(m, hidden=m.hidden + 128)
    assert other != m and hash(other) == hash(tuple(getattr(other, f.name) for f in dataclasses.fields(m)
                                                    if f.compare))


@pytest.mark.parametrize("model, expert_tp", [("deepseek-v3", False), ("mixtral-8x7b", True)])
def test_moe_all_to_all_shared_by_equal_links_is_one_call_per_plan(model, expert_tp):
    # moe_all_to_all_s calls ep_all_to_all once per (the links all_to_all_s reads, tokens, etp, ep) and gives
    # it to every GPU with equal links: here every plan gets its own call, on its own GPU, written out
    from llmsizing.moe import ep_all_to_all, stage_moe_layers
    from llmsizing.plan_pricing import moe_all_to_all_s, pipeline_split

    m = catalog.get_model(model)
    gpus = [catalog.get_gpu(g) for g in catalog.list_gpus()]
    node_of = {g.name: get_node(None, g) for g in gpus}
    rcs, seq = ("none", "full"), 4096
    rows = [(g_, t, c, p, b, e, r) for g_ in range(len(gpus)) for t in (1, 2) for c in (1, 2) for p in (1, 4)
            for b in (1, 2) for e in (1, 8, 64) for r in (0, 1) if e <= m.experts]
    cols = {k: np.array(v) for k, v in zip(("gpu", "tp", "cp", "pp", "micro", "ep", "rc"), zip(*rows))}
    mf = np.array([3.0 + i % 5 for i in range(len(rows))])
    got = moe_all_to_all_s(m, gpus, cols, mf, seq=seq, precision="bf16-mixed", node_of=node_of, cp_comm="p2p",
                           rcs=rcs, expert_tp=expert_tp, max_nodes="model")
    for (g_, t, c, p, b, e, r), f, x in zip(rows, mf, got):
        if e == 1:
            assert x == 0.0
            continue
        g = gpus[g_]
        par = Parallel(tp=t, sp=t > 1, cp=c, dp=e, ep=e, expert_tp=expert_tp)
        d_f, c_f, c_b, d_b = (k.time_s for k in ep_all_to_all(
            m, par, batch=b, seq=seq, gpu=g, node=node_of[g.name], grad_accum=1, precision="bf16-mixed",
            recompute="none", max_nodes="model"))
        one = 2 * d_f + 2 * c_f + (c_b + d_b) if rcs[r] == "full" else d_f + c_f + (c_b + d_b)
        # (the planner's split of the layers: Megatron's accounted one where pp does not divide them,
        # plan(accounted_split=True); moeapi42. Before, the even split: the same wherever pp divides them)
        most = max(stage_moe_layers(m, Parallel(pp=p, **pipeline_split(m, p)))) / m.n_moe_layers
        assert x == one * most * f


def test_kept_rows_stay_bounded_and_follow_a_changed_price(monkeypatch):
    """review29a: layer_terms' and dp_link_rows' kept rows are kept by (GPU, node), and a GPU made anew (a
    price set by catalog.use_prices, a GPU built by hand) is a new pair. In a long-running kernel the pairs
    of one kept key stay at most plan_terms.KEPT_GPU_NODES, and every call still gives the rows priced
    afresh (the unkept functions'), for the new GPUs and again for the old ones."""
    import dataclasses

    from llmsizing import plan_terms

    monkeypatch.setattr(plan_terms, "KEPT_GPU_NODES", 6)
    plan_terms._kept_dp_rows.cache_clear()
    plan_terms._kept_layer_rows.cache_clear()
    m = catalog.get_model("llama-3-8b")
    h100 = catalog.get_gpu("H100 SXM")
    node = get_node(None, h100)
    dp_keys = [(0, t, z, d) for t in (1, 8) for z in (0, 3) for d in (2, 16)]
    lay_keys = [(0, t, c, 1, 1, 0) for t in (1, 2) for c in (1, 2)]
    dp_kw = dict(seq=8192, precision="bf16-mixed", node_of={h100.name: node}, n_slots=5)
    lay_kw = dict(seq=8192, eff=None, precision="bf16-mixed", dtype="bf16", node_of={h100.name: node},
                  cp_comm="p2p", rcs=("none",))
    for i in (*range(20), 0, 1):                           # 20 prices, then two of the first again
        g = [dataclasses.replace(h100, price_usd_per_gpu_hour=2.0 + i / 100)]
        for got, want in zip(dp_link_rows(m, g, dp_keys, **dp_kw),
                             plan_terms._dp_link_rows(m, g, dp_keys, **dp_kw)):
            assert np.array_equal(got, np.array(want).reshape(len(dp_keys), 5))
        rows, _ = layer_terms(m, g, lay_keys, **lay_kw)
        assert np.array_equal(rows, plan_terms._layer_terms(m, g, lay_keys, **lay_kw)[0])
        assert len(plan_terms._kept_dp_rows(m, "bf16-mixed", 5)) <= 6
        assert len(plan_terms._kept_layer_rows(m, 8192, None, "bf16-mixed", "bf16", "p2p", ("none",))) <= 6
    plan_terms._kept_dp_rows.cache_clear()
    plan_terms._kept_layer_rows.cache_clear()
