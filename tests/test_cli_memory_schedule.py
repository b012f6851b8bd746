"""``llmsizing memory --schedule`` (jobtime42): the CLI's per-GPU memory is training_memory(schedule=)'s."""

import json

import pytest

import llmsizing as L
from llmsizing import cli

BASE = ["memory", "llama-3-8b", "--batch", "1", "--seq", "4096", "--pp", "4", "--dp", "2",
        "--grad-accum", "8", "--json"]


def _rows(capsys, argv):
    assert cli.main(argv) in (0, None)
    return {r["component"]: r for r in json.loads(capsys.readouterr().out)}


@pytest.mark.parametrize("schedule", ["1f1b", "zb1p", "dualpipe"])
def test_memory_schedule_is_the_library(schedule, capsys):
    rows = _rows(capsys, BASE + ["--schedule", schedule])
    lib = L.training_memory("llama-3-8b", batch=1, seq=4096, grad_accum=8, parallel=L.Parallel(pp=4, dp=2),
                            schedule=schedule)
    assert rows["total"]["bytes"] == pytest.approx(lib.total_bytes, rel=1e-12)


def test_dualpipe_holds_more_than_1f1b_and_no_flag_is_1f1b(capsys):
    plain = _rows(capsys, BASE)["total"]["bytes"]
    assert _rows(capsys, BASE + ["--schedule", "1f1b"])["total"]["bytes"] == plain
    # DualPipe: each rank holds two stages (pp=4: 2/4 of the layers, not 1/4). By hand, one stage's weights,
    # gradients and AdamW states are ~8.0e9 / 4 x 16 bytes = 30 GiB of 1F1B's ~56 GiB: ~+50% at least
    assert _rows(capsys, BASE + ["--schedule", "dualpipe"])["total"]["bytes"] > 1.5 * plain


@pytest.mark.parametrize("argv, match", [(["--pp", "3", "--schedule", "dualpipe"], "even parallel.pp"),
                                         (["--schedule", "dual"], "--schedule")])
def test_memory_schedule_refusals(argv, match, capsys):
    base = ["memory", "llama-3-8b", "--batch", "1", "--seq", "4096", "--grad-accum", "8"]
    try:
        rc = cli.main(base + argv)
    except SystemExit as e:
        rc = e.code
    assert rc not in (0, None)
    assert match in capsys.readouterr().err
