"""model_states_for_params (chapter 2) agrees with model_states for every elementwise optimizer."""

from dataclasses import replace

import pytest

from llmsizing import Parallel, get_model, model_states
from llmsizing.memory import model_states_for_params
from llmsizing.precision import OPTIMIZERS, RECIPES


@pytest.mark.parametrize("precision", list(RECIPES))
@pytest.mark.parametrize("optimizer", [o for o, v in OPTIMIZERS.items() if not v.shape_dependent])
@pytest.mark.parametrize("parallel", [None, Parallel(tp=2), Parallel(dp=8, zero=1), Parallel(dp=8, zero=3)])
def test_same_as_model_states(precision, optimizer, parallel):
    m = get_model("llama-2-13b")
    a = model_states(m, precision=precision, optimizer=optimizer, parallel=parallel)
    b = model_states_for_params(m.n_params, precision=precision, optimizer=optimizer, parallel=parallel)
    if RECIPES[precision].fp8:
        # a bare count gives every parameter an FP8 copy (an upper bound: 13B's embeddings and norms have none)
        # and no scaling state (no layers); everything else is the same
        assert b.fp8_weights_bytes > a.fp8_weights_bytes > 0.9 * b.fp8_weights_bytes and b.fp8_meta_bytes == 0
        a, b = (replace(x, fp8_weights_bytes=0.0, fp8_meta_bytes=0.0) for x in (a, b))
    if parallel is None or parallel.tp == 1:
        assert b == a
    else:   # a bare count can only be split evenly; the model's norms are replicated over TP (13B: 41 KB/GPU)
        assert b.total_bytes < a.total_bytes < b.total_bytes * 1.0001


def test_bad_input():
    with pytest.raises(ValueError, match="factored"):
        model_states_for_params(10**10, optimizer="adafactor")
    with pytest.raises(ValueError, match="hidden matrices"):     # Muon treats the hidden matrices apart
        model_states_for_params(10**10, optimizer="muon")
    with pytest.raises(TypeError, match="n_params"):
        model_states_for_params(1e10)
    with pytest.raises(ValueError, match="n_params"):
        model_states_for_params(0)
    with pytest.raises(ValueError, match="precision"):
        model_states_for_params(10**10, precision="bf17")
