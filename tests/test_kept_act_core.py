"""memory._kept_act_core (plan36): the kept activations' core with its parts that do not read the K/V
exchange kept apart gives what memory._act_core gives, call by call, for both exchanges; and a second
exchange reads those parts without working them out again. Expected: _act_core itself (no cache)."""

import pytest

from llmsizing import memory
from llmsizing.catalog import get_model


@pytest.mark.parametrize("name,tp,cp", [("llama-2-7b", 4, 4), ("llama-3.1-405b", 8, 16),
                                        ("qwen3-30b-a3b", 2, 8), ("gpt2", 1, 1)])
def test_as_act_core(name, tp, cp):
    model = get_model(name)
    args = (model, 1, 131072, "bf16-mixed", "flash", False, "selective", "fused", False, tp, tp > 1, cp)
    memory._kept_act_no_comm.cache_clear()
    memory._kept_act_core.cache_clear()
    for n, comm in enumerate(("p2p", "all_gather")):
        got = memory._kept_act_core(*args, comm, False)
        want = memory._act_core(*args, comm, False)
        assert got[0] == want[0]
        assert got[1:] == want[1:]
        assert memory._kept_act_no_comm.cache_info().hits == n        # (the second exchange: read, not made)
    if cp > 1:       # (the exchanges' K/V buffers differ: each call's own)
        assert memory._kept_act_core(*args, "p2p", False)[1] != memory._kept_act_core(*args, "all_gather",
                                                                                       False)[1]
