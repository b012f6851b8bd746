"""Issue 35's "Done when": ``training_time``, ``step_time`` and ``plan`` give the same step for the same MoE
layout, on several mixtures of experts and every MoE option the three share (audit35).

Each case is a layout written here by hand, not one read off a search. The three public calls are asked the
same question: ``step_time`` with keyword arguments, ``training_time`` with ``parallel=`` and
``global_batch=``, and the row of ``plan()`` with exactly that layout (the search narrowed to its ``ep``,
micro-batch, recomputation and ZeRO stage). Nothing is compared with a stored number: the days must be the
step's own arithmetic, ``tokens / (global_batch x seq) x step / 86,400``, and the three answers must agree
with each other.
tests/test_job.py re-checks plan rows through ``Job``; tests/test_moe_time.py does one model directly.
"""

import pytest

import llmsizing as L
from llmsizing.layouts import step_time

TOKENS = 1e12

#: (model, gpu, layout, seq, global batch, micro-batch, recomputation, options the three calls share).
#: The options: the recipe (precision), DeepSeek-V3's MTP module, DeepSeek-V2's token dropping at
#: capacity 1.0, DeepEP's dispatcher; the layouts: expert parallelism with tensor, sequence and pipeline
#: parallelism, ZeRO 1 and 2, micro-batches of 1 to 4. Only layouts plan() searches for a mixture of
#: experts: its ``pp`` divides the layers (DeepSeek-V3's 61: 1 or 61), no interleaving, the 1F1B schedule,
#: no SMs kept for communication (the published DeepSeek-V3 layout, 16 uneven stages under DualPipe, is
#: step_time's alone: tests/test_moe_runs.py).
CASES = [
    ("mixtral-8x7b", "H100 SXM", L.Parallel(tp=2, sp=True, pp=2, dp=8, ep=8, zero=1), 4096, 256, 1, "full",
     {}),
    ("mixtral-8x7b", "A100 80GB", L.Parallel(pp=4, dp=16, ep=8, zero=1), 4096, 256, 1, "full", {}),
    ("qwen3-30b-a3b", "H100 SXM", L.Parallel(tp=2, sp=True, dp=16, ep=16, zero=2), 4096, 256, 2, "selective",
     {}),
    ("qwen3-235b-a22b", "H100 SXM", L.Parallel(pp=2, dp=64, ep=32, zero=1), 4096, 512, 1, "full", {}),
    ("deepseek-v3", "H800", L.Parallel(tp=4, sp=True, dp=128, ep=256, zero=1), 4096, 1920, 1, "full",
     {"precision": "fp8-deepseek", "mtp_depth": 1}),
    ("deepseek-v2", "H800", L.Parallel(tp=2, sp=True, pp=4, dp=16, ep=8, zero=1), 4096, 512, 1, "full",
     {"capacity_factor": 1.0}),
    ("olmoe-1b-7b", "H100 SXM", L.Parallel(dp=16, ep=8, zero=1), 4096, 256, 4, "none",
     {"dispatcher": "deepep"}),
    ("gpt-oss-120b", "H100 SXM", L.Parallel(pp=2, dp=32, ep=16, zero=1), 4096, 256, 1, "full", {}),
    ("llama-4-scout", "H100 SXM", L.Parallel(tp=2, sp=True, pp=4, dp=8, ep=16, zero=1), 8192, 128, 1, "full",
     {"precision": "fp8-mixed"}),
    ("granite-3.0-3b-a800m", "H100 SXM", L.Parallel(dp=32, ep=8, zero=1), 4096, 1024, 4, "selective", {}),
]


def _ids(case):
    m, g, p, *_ = case
    return f"{m}-{g}-tp{p.tp}pp{p.pp}v{p.virtual_stages}dp{p.dp}ep{p.ep}z{p.zero}"


def _plan_row(model, gpu, par, seq, gb, mb, rc, opts):
    df = L.plan(model, tokens=TOKENS, gpus=(gpu,), seq=seq, global_batch=gb, max_gpus=par.gpus,
                ep_degrees=(par.ep,), micro_batches=(mb,), recomputes=(rc,), zero_stages=(par.zero,), **opts)
    hit = df[(df["n_gpus"] == par.gpus) & (df["tp"] == par.tp) & (df["pp"] == par.pp) & (df["dp"] == par.dp)
             & (df["cp"] == par.cp) & (df["ep"] == par.ep) & (df["virtual_stages"] == par.virtual_stages)
             & (df["zero"] == par.zero) & (df["micro_batch"] == mb) & (df["recompute"] == rc)
             & df["recompute_layers"].isna()]
    assert len(hit) == 1, f"plan() has {len(hit)} rows of the layout {par} ({len(df)} plans)"
    return hit.iloc[0]


@pytest.mark.parametrize("case", CASES, ids=[_ids(c) for c in CASES])
def test_training_time_step_time_and_plan_give_one_step(case):
    model, gpu, par, seq, gb, mb, rc, opts = case
    assert gb % (par.dp * mb) == 0
    accum = gb // (par.dp * mb)
    st = step_time(model, gpu, par, batch=mb, seq=seq, grad_accum=accum, recompute=rc, **opts)
    assert st.tokens == gb * seq                                  # the step is one global batch
    days = TOKENS / (gb * seq) * st.step_s / 86400                # by hand from the step
    t = L.training_time(model, tokens=TOKENS, gpu=gpu, seq=seq, parallel=par, global_batch=gb, micro_batch=mb,
                        recompute=rc, **opts)
    assert t.n_gpus == par.gpus
    assert t.days == pytest.approx(days, rel=1e-9)
    assert t.gpu_hours == pytest.approx(days * 24 * par.gpus, rel=1e-9)
    assert t.mfu == pytest.approx(st.mfu, rel=1e-9)
    row = _plan_row(model, gpu, par, seq, gb, mb, rc, opts)
    assert row["grad_accum"] == accum
    assert row["step_time_s"] == pytest.approx(st.step_s, rel=1e-6)
    assert row["days"] == pytest.approx(days, rel=1e-6)
    assert row["gpu_hours"] == pytest.approx(t.gpu_hours, rel=1e-6)
    assert row["mfu"] == pytest.approx(st.mfu, rel=1e-6)


def test_the_options_move_the_step_so_the_cases_test_them():
    """Each shared option of CASES changes the step (else agreeing on it would prove nothing)."""
    for model, gpu, par, seq, gb, mb, rc, opts in CASES:
        for key in set(opts) - {"precision"}:
            base = {k: v for k, v in opts.items() if k != key}
            kw = dict(batch=mb, seq=seq, grad_accum=gb // (par.dp * mb), recompute=rc)
            assert step_time(model, gpu, par, **kw, **opts).step_s \
                != pytest.approx(step_time(model, gpu, par, **kw, **base).step_s, rel=1e-6), (model, key)
