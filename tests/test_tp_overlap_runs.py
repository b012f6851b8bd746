"""Each published run's TP overlap enters the step model (issue 34, round 3: why the layout range was wide).

The Megatron-Core runs hide their tensor-parallel collectives behind the matrix multiplies (Megatron-LM
README's benchmark configuration lists ``--tp-comm-overlap``), as do torchtitan's AsyncTP rows. Charged in
full, those runs looked 1.3-1.5x faster than the step model; the column ``tp_comm_overlap`` of
data/published_runs.csv carries what each source states.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest

from llmsizing.calibration import _layout_of, attention_kernel_of, run_mfu_at, tp_overlap_of
from llmsizing.layouts import step_time
from llmsizing.mfu import published_runs


def _row(name_part):
    df = published_runs()
    return next(df[df["run"].str.contains(name_part, regex=False)].itertuples())


def test_marked_rows_say_where_the_overlap_is_published():
    df = published_runs()
    marked = df[df["tp_comm_overlap"].fillna("") == "yes"]
    # the frameworks whose sources state it, and nothing else
    assert set(marked["framework"]) == {"megatron-core", "torchtitan"}
    stated = df[df["framework"] == "megatron-core"]
    assert (stated["tp_comm_overlap"] == "yes").all()
    for r in marked.itertuples():
        assert "tp_comm_overlap: yes" in r.note, r.run
        assert ("--tp-comm-overlap" in r.note or "AsyncTP" in r.note), r.run
    # torchtitan: only the rows whose own source names AsyncTP
    tt = marked[marked["framework"] == "torchtitan"]
    assert all("AsyncTP" in s + n or "async TP" in r for s, n, r in zip(tt["source"], tt["note"], tt["run"]))
    # Meta's Llama 3 runs do not state it: blank, no overlap
    meta = df[df["framework"].fillna("").str.startswith("Meta")]
    assert meta["tp_comm_overlap"].isna().all()


@pytest.mark.parametrize("value, expected", [("yes", True), (" Yes ", True), ("no", False), ("", False),
                                             (None, False), (float("nan"), False)])
def test_tp_overlap_of_reads_the_cell(value, expected):
    assert tp_overlap_of(pd.Series({"tp_comm_overlap": value})) is expected
    assert tp_overlap_of(pd.Series({"model": "x"})) is False          # a table without the column


def test_overlap_hides_the_tp_collectives_behind_compute_by_hand():
    """Megatron-Core's GPT 70B on 768 H100s (TP8 PP2 DP48): with the overlap the step loses its TP time up to
    the compute time (exposed_by_group's rule for async TP), so step_with = step_without - min(tp, compute)
    and the MFU rises by step_without / step_with; the calibration call uses the row's flag."""
    r = _row("GPT 70B, 768 H100s")
    assert tp_overlap_of(r)
    par, micro, accum, rc = _layout_of(r)
    kw = dict(batch=micro, seq=int(r.seq), grad_accum=accum, kernel_efficiency=0.65, recompute=rc,
              dtype="bf16", attention_kernel=attention_kernel_of(r.framework, r.gpu))
    off = step_time(r.model, r.gpu, par, **kw)
    on = step_time(r.model, r.gpu, par, async_tp=True, **kw)
    tp_s = sum(c.time_s for c in off.communication.collectives if c.group == "tp")
    assert tp_s > 0.05 * off.step_s                       # a TP8 step: the collectives are not negligible
    hidden = min(tp_s, off.compute_s)
    assert on.step_s == pytest.approx(off.step_s - hidden, rel=1e-9)
    assert on.mfu == pytest.approx(off.mfu * off.step_s / (off.step_s - hidden), rel=1e-9)
    assert run_mfu_at(r, 0.65) == pytest.approx(on.mfu, rel=1e-12)


def test_unmarked_run_is_priced_as_before():
    r = _row("GPT 1T, 3,072 GPUs (Megatron-LM PTD-P")        # Narayanan et al. 2021: no TP overlap stated
    assert not tp_overlap_of(r)
    par, micro, accum, rc = _layout_of(r)
    off = step_time(r.model, r.gpu, par, batch=micro, seq=int(r.seq), grad_accum=accum, kernel_efficiency=0.7,
                    recompute=rc, dtype="bf16", attention_kernel=attention_kernel_of(r.framework, r.gpu))
    assert run_mfu_at(r, 0.7) == pytest.approx(off.mfu, rel=1e-12)
    assert not math.isnan(off.mfu)
