"""Fuzz the surfaces issue 33 hardened: the fine-tuning command line, ``time`` on stages, the nccl-tests
reader and the calibration fits on a runs table.

Promises checked on every call:

1. the command line exits 0 or 2 without a traceback, refuses before printing, and where it prints a library
   number (``--json``) that number is the library's for the same arguments (memory per GPU, the largest
   micro-batch and context, the hours, the days of each stage);
2. ``time`` refuses every flag a planned stage (one with GLOBAL_BATCH) would ignore;
3. the nccl-tests reader returns a table whose every row is clean (finite times, > 0 for a message, no wrong
   results) or refuses naming the log's line and column, never a fit's internal list; a row nccl-tests marked
   wrong is refused naming its line, or dropped with a warning naming it;
4. the calibration fits return finite coefficients or refuse naming the row and the column, never with an
   ``AttributeError``/``KeyError``.

``make fuzz`` runs many more examples (``LLMSIZING_FUZZ_EXAMPLES``, shared with tests/test_fuzz.py).
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_cli import _with
from test_fuzz import CALLS, EXAMPLES, RETURNED
from test_fuzz_cli import check_run, ints

import llmsizing as L

ROOT = Path(__file__).resolve().parents[1]
LOGS = sorted((ROOT / "data" / "nccl_tests").glob("*.txt"))

#: The fine-tuning command line runs two bisections on every call: half the examples of a plain function.
SLOW = settings(max_examples=max(5, EXAMPLES // 2), deadline=None, derandomize=EXAMPLES <= 100, database=None,
                suppress_health_check=list(HealthCheck))
FAST = settings(max_examples=EXAMPLES, deadline=None, derandomize=EXAMPLES <= 100, database=None,
                suppress_health_check=list(HealthCheck))


def _count(name: str, returned: bool) -> None:
    CALLS[name] = CALLS.get(name, 0) + 1
    if returned:
        RETURNED[name] = RETURNED.get(name, 0) + 1


# =========================================================================== the fine-tuning command line
FT_OPTIONS = {"--rank": ints(1, 128), "--gpus": ints(1, 16), "--seq": ints(1, 8192), "--batch": ints(1, 8),
              "--grad-accum": ints(1, 32)}


@st.composite
def finetune_lines(draw):
    argv = ["finetune", draw(st.sampled_from(["llama-3-8b", "qwen-7b", "mistral-7b", "gpt2", "llama-2-7b"])),
            "--method", draw(st.sampled_from(["lora", "qlora", "full"])),
            "--gpu", draw(st.sampled_from(["H100 SXM", "A100 80GB", "RTX 4090", "L40S"])),
            "--strategy", draw(st.sampled_from(["ddp", "fsdp", "zero3"])),
            "--recompute", draw(st.sampled_from(["full", "none", "selective"])),
            "--loop", draw(st.sampled_from(["trainer", "keep_output"])), "--tokens", "10M"]
    for option in draw(st.lists(st.sampled_from(sorted(FT_OPTIONS)), max_size=3, unique=True)):
        argv = _with(argv, option, draw(FT_OPTIONS[option]))
    if draw(st.booleans()):
        argv.append("--no-kbit-prep")
    return argv + ["--json"]


def _opt(argv, flag, default):
    return argv[argv.index(flag) + 1] if flag in argv else default


@given(finetune_lines())
@SLOW
def test_fuzz_finetune_cli_is_the_library(argv):
    from llmsizing.finetune_time import finetune_memory_per_gpu, finetune_time, max_batch_per_gpu, max_seq

    code, out, err = check_run(argv)
    _count("cli finetune", code == 0)
    if code != 0:
        return
    row = json.loads(out)[0]
    model, method, gpu = argv[1], _opt(argv, "--method", "lora"), _opt(argv, "--gpu", "H100 SXM")
    n = int(_opt(argv, "--gpus", "1").replace(",", "").replace("_", ""))
    num = {f: int(_opt(argv, f, d).replace(",", "").replace("_", ""))
           for f, d in (("--rank", "16"), ("--seq", "2048"), ("--batch", "1"), ("--grad-accum", "1"))}
    kw = dict(method=method, n_gpus=n, strategy=_opt(argv, "--strategy", "ddp"), rank=num["--rank"],
              recompute=_opt(argv, "--recompute", "full"), grad_accum=num["--grad-accum"],
              loop=_opt(argv, "--loop", "trainer"),
              **({"kbit_prep": False} if "--no-kbit-prep" in argv else {}))
    mem = finetune_memory_per_gpu(model, batch=num["--batch"], seq=num["--seq"], **kw)
    assert row["memory_per_gpu_bytes"] == pytest.approx(mem.total_bytes, rel=1e-9), argv
    assert row["fits"] == (mem.total_bytes <= 0.9 * L.get_gpu(gpu).memory_bytes), argv
    assert row["max_batch"] == max_batch_per_gpu(model, gpu, seq=num["--seq"], **kw), argv
    assert row["max_seq"] == max_seq(model, gpu, batch=num["--batch"], **kw), argv
    assert row["assumes"] == mem.assumes and row["loop"] == kw["loop"]
    t = finetune_time(model, gpu=gpu, method=method, tokens=1e7, seq=num["--seq"], batch=num["--batch"],
                      grad_accum=num["--grad-accum"], n_gpus=n, strategy=kw["strategy"], rank=num["--rank"],
                      recompute=kw["recompute"])
    assert row["hours"] == pytest.approx(t.hours, rel=1e-9, abs=1e-10), argv


# =========================================================================== `time` on stages
REFUSED_ON_PLANNED = (["--mfu", "0.4"], ["--mfu-range", "0.2", "0.6"], ["--whole-run"],
                      ["--recompute", "none"], ["--recompute", "full"],
                      ["--recompute", "full", "--recompute-layers", "2"])


@st.composite
def stage_lines(draw):
    one = st.tuples(st.sampled_from(["1T", "500B", "2e10"]), st.sampled_from([2048, 8192, 32768]),
                    st.one_of(st.none(), st.sampled_from([64, 128])))
    stages = draw(st.lists(one, min_size=1, max_size=3))
    argv = ["time", draw(st.sampled_from(["llama-3-8b", "llama-3-70b"])), "--gpu", "H100 SXM", "--gpus",
            draw(st.sampled_from(["64", "1,024", "16"]))]
    for tokens, seq, gb in stages:
        argv += ["--stage", f"{tokens}:{seq}" + ("" if gb is None else f":{gb}")]
    planned = any(gb is not None for _, _, gb in stages)
    flags = draw(st.lists(st.sampled_from(range(len(REFUSED_ON_PLANNED))), max_size=2, unique=True))
    if planned and not flags:             # (a planned stage runs plan(): refusals only, to stay fast)
        flags = [draw(st.sampled_from(range(len(REFUSED_ON_PLANNED))))]
    for i in flags:
        for j, tok in enumerate(REFUSED_ON_PLANNED[i]):
            if tok.startswith("--") and tok in argv:
                break
        else:
            argv += REFUSED_ON_PLANNED[i]
    return argv + ["--json"], stages, planned


@given(stage_lines())
@FAST
def test_fuzz_time_stages(case):
    from llmsizing.stages import Stage

    argv, stages, planned = case
    code, out, err = check_run(argv)
    _count("cli time --stage", code == 0)
    if planned:                                                          # promise 2
        assert code == 2 and "does not apply to --stage number" in err, argv
        return
    if code != 0:
        return
    rows = json.loads(out)
    mfu = float(_opt(argv, "--mfu", "nan"))
    rng = (float(argv[argv.index("--mfu-range") + 1]), float(argv[argv.index("--mfu-range") + 2])) \
        if "--mfu-range" in argv else None
    given = None if math.isnan(mfu) else mfu
    layers = int(_opt(argv, "--recompute-layers", "0")) if "--recompute-layers" in argv else None
    kw = dict(mfu=given, mfu_range=rng or (None if given is None else (given, given)),
              whole_run="--whole-run" in argv, recompute=_opt(argv, "--recompute", "none"),
              recompute_layers=layers)
    suffix = {"T": 1e12, "B": 1e9}
    r = L.training_time(argv[1], gpu="H100 SXM", n_gpus=int(_opt(argv, "--gpus", "1").replace(",", "")),
                        stages=[Stage(float(t[:-1]) * suffix[t[-1]] if t[-1] in suffix else float(t), s)
                                for t, s, _ in stages], **kw)
    for got, want in zip(rows, r.stages):
        assert got["days"] == pytest.approx(want.days, rel=1e-9, abs=1e-10), argv      # (JSON: 10 decimals)


# =========================================================================== the nccl-tests reader
def _table_lines(text: str) -> list[int]:
    return [i for i, t in enumerate(text.splitlines()) if t.split() and t.split()[0].isdigit()
            and len(t.split()) >= 11]


CELL_VALUES = st.one_of(st.sampled_from(["", "-1", "nan", "inf", "-inf", "N/A", "n/a", "0", "0.00", "1e+06",
                                         "x", "1,5", "3", "0e+00", "4e-07", "2e-02", "1e400", "-0", "+7"]),
                        st.floats(allow_nan=True, allow_infinity=True).map(repr))


@st.composite
def mutated_logs(draw):
    path = draw(st.sampled_from(LOGS))
    lines = path.read_text().splitlines()
    rows = _table_lines(path.read_text())
    edits = []
    for _ in range(draw(st.integers(0, 3))):
        i = draw(st.sampled_from(rows))
        toks = lines[i].split()
        pos = draw(st.sampled_from([-8, -7, -6, -5, -4, -3, -2, -1]))
        toks[pos] = draw(CELL_VALUES)
        lines[i] = "  ".join(t for t in toks)
        edits.append((i + 1, pos))
    kind = draw(st.sampled_from(["none", "drop-line", "dup-line", "prefix", "swap"]))
    if kind == "drop-line":
        del lines[draw(st.sampled_from(rows))]
    elif kind == "dup-line":
        i = draw(st.sampled_from(rows))
        lines.insert(i, lines[i])
    elif kind == "prefix":
        lines = [f"[1,0]<stdout>:{ln}" for ln in lines]
    elif kind == "swap" and len(rows) > 2:
        a, b = rows[1], rows[-1]
        lines[a], lines[b] = lines[b], lines[a]
    return "\n".join(lines), edits, kind, draw(st.sampled_from(["refuse", "drop"]))


@given(mutated_logs())
@FAST
def test_fuzz_nccl_tests_reader(case):
    from llmsizing.alpha_beta import from_nccl_tests

    text, edits, kind, mode = case
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            fit = from_nccl_tests(text, wrong_results=mode)
        except (ValueError, TypeError) as e:
            _count("from_nccl_tests", False)
            msg = str(e)
            assert "times_s" not in msg and "sizes_bytes" not in msg, msg
            assert "line" in msg or "text" in msg, msg
            return
    _count("from_nccl_tests", True)
    t = fit.table
    # every row kept is clean: finite times (> 0 for a message), no wrong results (N/A: validation off)
    assert np.isfinite(t[["time_us", "algbw_gbps", "busbw_gbps", "time_us_inplace"]].to_numpy()).all()
    assert (t.loc[t["size_bytes"] > 0, "time_us"] > 0).all()
    for col in ("wrong", "wrong_inplace"):
        for w in t[col]:
            assert w.upper() == "N/A" or float(w) == 0 or 0 < float(w) <= 1e-5, (col, w)
    dropped = [str(c.message) for c in caught if "left out" in str(c.message)]
    assert mode == "drop" or not dropped
    for msg in dropped:                  # each warning names a line the table no longer holds
        line = int(msg.split("line ")[1].split(" ")[0])
        assert line not in set(t["line"])
    r = fit.regimes
    for ab in (r.single, r.small, r.large, r.combined):
        assert math.isfinite(ab.busbw_gbps) and ab.busbw_gbps > 0
        assert math.isfinite(ab.alpha_s) and ab.alpha_s >= 0


# =========================================================================== the calibration fits
ODD_CELLS = st.sampled_from([None, math.nan, -1, 0, 2.5, 1e300, "x", "", "yes", True, [], {"a": 1}, "fp4",
                             "full", "llama-3-8b", "H100 SXM", 4096, 0.5, 3])


@pytest.fixture(scope="module")
def runs():
    from llmsizing.time_cost import published_runs

    return published_runs()


def _corrupt(df, draw, columns):
    df = df.copy()
    edits = []
    for _ in range(draw(st.integers(0, 2))):
        col = draw(st.sampled_from(columns))
        i = draw(st.integers(0, len(df) - 1))
        df[col] = df[col].astype(object)
        df.at[df.index[i], col] = draw(ODD_CELLS)
        edits.append(col)
    return df, edits


@given(st.data())
@FAST
def test_fuzz_fit_mfu_model(runs, data):
    from llmsizing.calibration import MFU_FIT_COLUMNS, fit_mfu_model

    df, edits = _corrupt(runs, data.draw, list(MFU_FIT_COLUMNS))
    if data.draw(st.booleans()):
        df = df.drop(columns=[data.draw(st.sampled_from(list(MFU_FIT_COLUMNS)))])
    try:
        coef, per_run = fit_mfu_model(df)
    except (ValueError, TypeError) as e:
        _count("fit_mfu_model", False)
        msg = str(e)
        assert "runs" in msg and ("column" in msg or "lacks" in msg or "calibration True" in msg), msg
        return
    _count("fit_mfu_model", True)
    num = coef[["intercept", "size_exponent", "seq_exponent", "low", "high"]].to_numpy(float)
    assert np.isfinite(num).all() and (coef["low"] <= 1).all() and (coef["high"] >= 1).all()
    assert np.isfinite(per_run["predicted_mfu"].to_numpy(float)).all()


@given(st.data())
@FAST
def test_fuzz_fit_kernel_efficiency(runs, data):
    from llmsizing.calibration import KERNEL_FIT_COLUMNS, fit_kernel_efficiency, run_kernel_efficiency

    with_layout = runs[runs["dp"].notna()]
    picked = with_layout.iloc[sorted(set(data.draw(st.lists(st.integers(0, len(with_layout) - 1), min_size=1,
                                                            max_size=3))))]
    df, _ = _corrupt(picked, data.draw, list(KERNEL_FIT_COLUMNS))
    try:
        per_run, fit = fit_kernel_efficiency(df)
    except (ValueError, TypeError) as e:
        _count("fit_kernel_efficiency", False)
        assert "column" in str(e) or "runs" in str(e), str(e)
    else:
        _count("fit_kernel_efficiency", True)
        effs = per_run["kernel_efficiency"].dropna().to_numpy(float)
        assert ((effs > 0) & (effs <= 1)).all()
    row = data.draw(st.one_of(st.sampled_from([r._asdict() for r in df.itertuples()]), ODD_CELLS))
    try:
        e = run_kernel_efficiency(row)
    except (ValueError, TypeError) as exc:
        _count("run_kernel_efficiency", False)
        assert "row" in str(exc), str(exc)
    else:
        _count("run_kernel_efficiency", True)
        assert e is None or 0 < e <= 1
