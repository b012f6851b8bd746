"""Megatron-Core r0.8's pipelined H100 runs are priced with the interleaved schedule (issue 34, ranges34c).

The Megatron-LM README's benchmark configuration lists a pipeline (PP) overlap; in Megatron-Core r0.8
(``megatron/training/arguments.py`` at tag core_r0.8.0) ``overlap_p2p_comm`` is set to False unless
``--num-layers-per-virtual-pipeline-stage`` is given, so those runs interleaved. The number of virtual stages
is not published: ``data/published_runs.csv`` takes 2 layers per virtual stage (NVIDIA's published Llama 3
70B recipe: 80 layers on PP8 x VP5). Expected values below come from the README's model table by hand.
"""

from dataclasses import replace

import pandas as pd
import pytest

from llmsizing.calibration import _layout_of
from llmsizing.layouts import step_time
from llmsizing.time_cost import published_runs

# README model table (images/model_table.png): layers, PP, DP, global batch; micro-batch 1 (blank in the CSV).
TABLE = {"GPT 70B": (84, 2, 48, 384), "GPT 177B": (96, 6, 48, 1152), "GPT 314B": (96, 8, 48, 1536)}


def _mcore():
    d = published_runs()
    return d[d["run"].str.contains("Megatron-Core r0.8", regex=False)]


def test_only_the_pipelined_runs_interleave_and_each_says_why():
    d = _mcore()
    for r in d.itertuples():
        if pd.isna(r.pp) or r.pp == 1:
            assert pd.isna(r.virtual_stages), r.run
            continue
        assert "core_r0.8.0" in r.note and "2 layers per virtual stage" in r.note, r.run


@pytest.mark.parametrize("name", sorted(TABLE))
def test_virtual_stages_are_two_layers_each_and_valid_for_megatron(name):
    layers, pp, dp, gbs = TABLE[name]
    r = next(x for x in _mcore().itertuples() if x.run.startswith(name + ","))
    per_stage = layers // pp                                  # 42, 16, 12 layers per pipeline stage
    assert int(r.virtual_stages) == per_stage // 2            # 21, 8, 6
    micro = gbs // dp                                         # micro-batches per step: 8, 24, 32
    assert micro % pp == 0                                    # Megatron's condition for interleaving


def test_the_bubble_is_the_interleaved_one_by_hand():
    # GPT 314B: PP8, 1536 / 48 = 32 micro-batches of 1, v = 96 / 8 / 2 = 6: bubble (8 - 1) / (6 x 32).
    r = next(x for x in _mcore().itertuples() if x.run.startswith("GPT 314B,"))
    par, micro, accum, recompute = _layout_of(r)
    st = step_time(r.model, r.gpu, par, batch=micro, seq=int(r.seq), grad_accum=accum, recompute=recompute,
                   kernel_efficiency=0.65, async_tp=True)
    assert st.bubble == pytest.approx(7 / (6 * 32), rel=1e-12)
    plain = step_time(r.model, r.gpu, replace(par, virtual_stages=1), batch=micro, seq=int(r.seq),
                      grad_accum=accum, recompute=recompute, kernel_efficiency=0.65, async_tp=True)
    assert plain.bubble == pytest.approx(7 / 32, rel=1e-12)   # plain 1F1B: six times the idle time
