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
    # GPT 314B: PP8, 1536 / 48 = 32 micro-batches of 1, v = 96 / 8 / 2 = 6, 12 layers a stage, the last with
    # the output layer. The fill and drain pass a chunk of each other stage at its own speed (session 39):
    # (7 x 12) / (12 + h) / (6 x 32), h the output layer in layers by FLOPs a token: 2 x 131,072 x 16,384 =
    # 4,295.0M over 2 x 3,221.4M + 4 x 4,096 x 128 x 128 = 6,711.3M, h = 0.640: 6.646 / (6 x 32), where the
    # slowest stage's speed gave 7 / (6 x 32) (the memory-bound kernels, not counted by hand: 1%).
    r = next(x for x in _mcore().itertuples() if x.run.startswith("GPT 314B,"))
    par, micro, accum, recompute = _layout_of(r)
    st = step_time(r.model, r.gpu, par, batch=micro, seq=int(r.seq), grad_accum=accum, recompute=recompute,
                   kernel_efficiency=0.65, async_tp=True)
    h = 4295.0 / 6711.3
    assert st.bubble == pytest.approx(7 * 12 / (12 + h) / (6 * 32), rel=0.01)
    plain = step_time(r.model, r.gpu, replace(par, virtual_stages=1), batch=micro, seq=int(r.seq),
                      grad_accum=accum, recompute=recompute, kernel_efficiency=0.65, async_tp=True)
    assert plain.bubble == pytest.approx(6 * st.bubble, rel=1e-12)   # plain 1F1B: six times the idle time


def test_narayanan_table_1_runs_take_the_authors_script_s_micro_batches_and_virtual_stages():
    # ranges34e: Narayanan et al. 2021's Table 1 runs interleave too, as the authors' launch script
    # NVIDIA/Megatron-LM examples/sc21/run_table_1.sh says (the test above keeps to Megatron-Core r0.8's
    # rows). By hand from the script: MBS per model size, and
    # v = layers / PP / --num-layers-per-virtual-pipeline-stage: 145B 80/8/5 = 2, 310B 96/16/3 = 2,
    # 530B 105/35/1 = 3; the others have no virtual stages.
    want = {"gpt-1.7b": (16, None), "gpt-7.5b": (16, None), "gpt-18b": (8, None), "gpt-39b": (4, None),
            "gpt-145b": (2, 2), "gpt-310b": (1, 2), "gpt-530b": (1, 3), "gpt-1t": (1, None)}
    d = published_runs()
    nar = d[d["source"].str.startswith("Narayanan et al. 2021") & d["model"].isin(want)]
    assert len(nar) == 8
    for r in nar.itertuples():
        mbs, v = want[r.model]
        assert int(r.micro_batch) == mbs, r.run
        assert (pd.isna(r.virtual_stages) if v is None else int(r.virtual_stages) == v), r.run
        assert "examples/sc21/run_table_1.sh" in r.source and "run_table_1.sh" in r.note, r.run
    assert set(nar.loc[nar["virtual_stages"].notna(), "model"]) == {"gpt-145b", "gpt-310b", "gpt-530b"}
