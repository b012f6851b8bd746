"""parallel.derived_layout (plan36): the planner's layouts derived from a checked one without the checks are
the layouts ``dataclasses.replace`` gives with them (equal, hashed alike, the same field types), and it takes
no other change. The expected layouts come from ``replace``, which runs every check of ``Parallel``."""

from dataclasses import fields, replace

import pytest

from llmsizing.memory import _act_layout, _search_layouts
from llmsizing.catalog import get_model
from llmsizing.parallel import Parallel, derived_layout

LAYOUTS = [Parallel(), Parallel(tp=8, sp=True, pp=4, dp=16),
           Parallel(tp=4, sp=True, cp=4, cp_comm="all_gather", dp=2),
           Parallel(tp=2, sp=True, pp=2, virtual_stages=3, dp=8),
           Parallel(tp=8, sp=True, zero=3, dp=4, reshard_after_forward=False),
           Parallel(zero=3, dp=8, reshard_after_forward=None),
           Parallel(pp=4, zero=1, dp=8, offload="optimizer"), Parallel(tp=2, sp=True, ep=4, dp=4, zero=1),
           Parallel(pp=4, stage_layers=(7, 9, 9, 7), account_for_embedding=True, dp=2),
           Parallel(tp=8, pp=16, dp=8, cp=16, cp_comm="all_gather", zero=3, reshard_after_forward=False,
                    sp=True, virtual_stages=8, account_for_embedding=True, account_for_loss=True,
                    grad_reduce="chunk_run")]
ACT = dict(dp=1, zero=0, ep=1, offload="none", reshard_after_forward=True, grad_reduce="micro_batch")


def _same(a: Parallel, b: Parallel) -> None:
    assert a == b and hash(a) == hash(b)
    for f in fields(Parallel):
        x, y = getattr(a, f.name), getattr(b, f.name)
        assert type(x) is type(y) and x == y, f.name


@pytest.mark.parametrize("par", LAYOUTS)
def test_equal_to_replace(par):
    _same(derived_layout(par, **ACT), replace(par, **ACT))
    if not (par.zero or par.offload != "none" or par.ep > 1):
        _same(derived_layout(par, dp=1, cp=1, cp_comm="p2p"), replace(par, dp=1, cp=1, cp_comm="p2p"))
    assert derived_layout(par) == par


def test_the_search_layouts():
    """memory's two derived layouts, as replace built them before."""
    model = get_model("llama-2-7b")
    for par in (Parallel(tp=4, sp=True, pp=2, cp=2, cp_comm="all_gather", dp=4),
                Parallel(tp=2, sp=True, zero=1, dp=8, cp=2)):
        got, act, state = _search_layouts(par, model, 8192)
        _same(act, replace(par, **ACT))
        _same(state, par if par.zero else replace(par, dp=1, cp=1, cp_comm="p2p"))
        assert _act_layout(par) is act


@pytest.mark.parametrize("change", [dict(dp=2), dict(cp=2), dict(cp_comm="all_gather"), dict(zero=1),
                                    dict(ep=2), dict(offload="optimizer"), dict(tp=2), dict(sp=True),
                                    dict(dp=True), dict(dp=1.0), dict(reshard_after_forward=1)])
def test_refuses_other_changes(change):
    with pytest.raises(ValueError, match="derived_layout"):
        derived_layout(Parallel(tp=2, sp=True, dp=4), **change)


def test_refuses_a_non_layout():
    with pytest.raises(TypeError, match="Parallel"):
        derived_layout({"tp": 2}, dp=1)


@pytest.mark.parametrize("par,change", [(Parallel(ep=2, dp=2), dict(dp=1)),
                                        (Parallel(tp=2, sp=True, ep=8, dp=2, cp=2), dict(cp=1)),
                                        (Parallel(zero=1, dp=4, offload="optimizer"), dict(zero=0)),
                                        (Parallel(zero=3, dp=4, offload="optimizer+params"), dict(zero=0)),
                                        (Parallel(zero=3, dp=4, reshard_after_forward=False,
                                                  grad_reduce="chunk_run"), dict(zero=0))])
def test_a_change_that_breaks_a_rule_is_refused_as_replace_refuses_it(par, change):
    """(the rules between fields the changes can break: ``replace``'s checks raise, with their message)"""
    with pytest.raises(ValueError) as want:
        replace(par, **change)
    with pytest.raises(ValueError) as got:
        derived_layout(par, **change)
    assert str(got.value) == str(want.value)


def test_derived_layout_refuses_torchs_default_off_zero3():
    """``reshard_after_forward=None`` (torch's default, root36) is ZeRO-3 only: a derived layout that drops
    ZeRO-3 from it is refused as ``replace`` refuses it, not built without the check."""
    par = Parallel(zero=3, dp=8, reshard_after_forward=None)
    with pytest.raises(ValueError, match="reshard_after_forward"):
        derived_layout(par, zero=0)
