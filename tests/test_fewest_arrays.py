"""min_gpus weighs a mixture of experts' layouts of one (tp, pp, ZeRO stage) together (fewest_arrays, issue
35, fast10b): each layout's smallest dp must be fewest_gpus._smallest_dp's, bit for bit the same solve on the
same pieces, and min_gpus' answer (its Plan, floats and all) the one it gives with every layout weighed by
its own calls."""

import pytest

from llmsizing import fewest_gpus
from llmsizing.catalog import get_gpu, resolve_model
from llmsizing.fewest_arrays import smallest_dps, supports
from llmsizing.memory import FIXED_OVERHEAD_BYTES, FRAGMENTATION
from llmsizing.moe_layouts import dp_unit, ep_candidates, heavy_stages
from llmsizing.parallel import check_layout, kept_parallel

KW = dict(batch=1, seq=8192, grad_accum=1, precision="bf16-mixed", optimizer="adamw", attention="flash",
          recompute="none", stack="fused", optimizer_impl="foreach")


@pytest.mark.parametrize("name, gpu", [("deepseek-v2", "A100 80GB"), ("mixtral-8x7b", "H100 SXM"),
                                       ("qwen3-30b-a3b", "A100 40GB"), ("deepseek-v3", "H100 SXM")])
def test_each_layout_solves_as_smallest_dp(name, gpu):
    model = resolve_model(name, moe=True)
    limit = 0.9 * get_gpu(gpu).memory_bytes
    room = (limit - FIXED_OVERHEAD_BYTES) / (1 + FRAGMENTATION)
    assert supports(model, KW, "none") and not supports(model, {**KW, "mtp_depth": 1}, "none")
    weighed = solved = 0
    for tp in (1, 2, 8):
        for pp in (1, 2, 4):
            def par(dp, ep, zero):
                return kept_parallel(tp=tp, pp=pp, dp=dp, zero=zero, sp=tp > 1, ep=ep)
            groups = []                            # (every ZeRO stage's layouts in one call, as min_gpus)
            for zero in (0, 1, 2) if pp == 1 else (0, 1):
                calls = []
                for ep in ep_candidates(model):
                    try:
                        check_layout(model, tp=tp, pp=pp, zero=zero, sp=tp > 1, ep=ep)
                    except ValueError:
                        continue
                    calls.append((ep, dp_unit(tp, 1, ep)))
                if calls:
                    groups.append((par(calls[0][1], calls[0][0], zero), calls))
            if not groups:
                continue
            stages = heavy_stages(model, groups[0][0])
            for (base, calls), got in zip(groups, smallest_dps(model, groups, stages, KW, room, {})):
                for (ep, a), dp in zip(calls, got):
                    want = fewest_gpus._smallest_dp(lambda d, ep=ep, z=base.zero: par(d, ep, z), limit, KW, model,
                                                unit=a, stages=stages)
                    assert dp == want, (tp, pp, base.zero, ep)
                    weighed += 1
                    solved += dp is not None
    assert weighed > 40 and 0 < solved < weighed          # (both answers met)


@pytest.mark.parametrize("name, gpu, seq", [("deepseek-v2", "A100 80GB", 8192),
                                            ("mixtral-8x7b", "H100 SXM", 4096),
                                            ("qwen3-30b-a3b", "H100 SXM", 32768),
                                            ("deepseek-v3", "H100 SXM", 8192),
                                            ("gpt-oss-120b", "A100 80GB", 4096)])
def test_min_gpus_answers_as_one_layout_at_a_time(name, gpu, seq, monkeypatch):
    def answers():
        out = []
        for kw in ({}, {"max_gpus": 64}, {"recompute": "full"}, {"max_gpus": 512, "optimizer_impl": "fused"}):
            try:
                out.append(fewest_gpus.min_gpus(name, gpu, batch=1, seq=seq, **kw))
            except ValueError as e:
                out.append(str(e))
        return out

    fewest_gpus._kept_stage_runs.cache_clear()
    fast = answers()
    monkeypatch.setattr(fewest_gpus, "supports", lambda *a: False)      # every layout by its own calls
    fewest_gpus._kept_stage_runs.cache_clear()
    assert answers() == fast
    assert any(not isinstance(x, str) for x in fast)


def test_groups_kept_across_gpu_types_give_the_answers_weighed_afresh():
    """fit39: fewest_arrays keeps each group's pieces per (model, keywords) (cost_by_gpu asks the same groups
    once per GPU type). min_gpus over a run of GPU types, models, micro-batches and recomputations, the groups
    kept between calls (and the keeping exercised: some group asked again), gives every Plan exactly as with
    nothing kept (a fresh store each call)."""
    from llmsizing import fewest_arrays

    def run():
        out = []
        for name in ("deepseek-v3", "mixtral-8x7b", "qwen3-30b-a3b"):
            for gpu in ("H100 SXM", "A100 80GB", "B200", "L40S", "H100 SXM"):
                for accum, rc in ((1, "none"), (8, "full")):
                    try:
                        out.append(repr(fewest_gpus.min_gpus(name, gpu, batch=1, seq=4096, grad_accum=accum,
                                                             recompute=rc)))
                    except ValueError as exc:
                        out.append(str(exc))
        return out

    asked = []
    real = fewest_arrays._pieces_of

    def counted(model, groups, *a):
        asked.append(len(groups))
        return real(model, groups, *a)

    fewest_arrays._kept_pieces.cache_clear()
    with pytest.MonkeyPatch.context() as m:
        m.setattr(fewest_arrays, "_pieces_of", counted)
        kept = run()
    fewest_arrays._kept_pieces.cache_clear()
    with pytest.MonkeyPatch.context() as m:
        m.setattr(fewest_arrays, "_kept_pieces", lambda model, kw_items: {})
        m.setattr(fewest_arrays, "_pieces_of", counted)
        n_kept = len(asked)
        fresh = run()
    assert sum(asked[:n_kept]) < sum(asked[n_kept:])        # (groups were read back, not weighed again)
    assert kept == fresh
