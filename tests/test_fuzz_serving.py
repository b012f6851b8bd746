"""Chapter 15: the fuzz test's three promises (test_fuzz.py) for llmsizing.serve: generated valid arguments
give finite, non-negative figures, NumPy arguments the same result, and one bad argument a ValueError or
TypeError that names it."""

from __future__ import annotations

import pytest
from hypothesis import strategies as st
from test_fuzz import EXAMPLES, Arg, Spec, _run, gpus, ints, lists_of, models, names, nums

from llmsizing import charts, serve

TP = Arg(st.sampled_from([1, 2, 4, 8]), st.sampled_from([0, -1, 2.0, "2", None, True]))
FRACTION = Arg(st.floats(0.05, 1.0), st.sampled_from([0, 1.5, -0.1, "0.4", float("nan"), None]))
SERVING_ARGS = dict(model=models(), gpu=gpus(), tp=TP, weights=names(serve.WEIGHT_FORMATS),
                    kv_cache=names(serve.KV_FORMATS), prompt=ints(1, 32768), output=ints(1, 4096),
                    batch=ints(1, 4096), mbu=FRACTION, mfu=FRACTION)
SPECS = {
    "serving": Spec(serve.serving, SERVING_ARGS),
    "replicas_for": Spec(serve.replicas_for,
                         dict(model=models(), gpu=gpus(), users=ints(1, 10_000), prompt=ints(1, 8192),
                              output=ints(1, 2048), ttft_s=nums(0.01, 100), itl_s=nums(0.001, 10))),
    # a GPU on which no layout meets the target is a row of NaN with a note, by design: drop those rows here
    "serving_cost_by_gpu": Spec(lambda **kw: serve.serving_cost_by_gpu(**kw).drop(columns="note").dropna(),
                                dict(model=models(), gpus=lists_of(gpus(), max_size=2, optional=True), prompt=ints(1, 8192),
                                     output=ints(1, 2048), itl_s=nums(0.001, 10)),
                                aliases={"gpus": ("gpu",)}),
    "render_serving_curve": Spec(charts.render_serving_curve,
                                 {k: v for k, v in SERVING_ARGS.items() if k not in ("mbu", "mfu")}),
}


@pytest.mark.parametrize("name", sorted(SPECS))
def test_fuzz_serving(name):
    _run(name, SPECS[name], EXAMPLES if not name.startswith("render") else max(5, EXAMPLES // 5))
