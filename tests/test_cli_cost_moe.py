"""``llmsizing cost --mtp-depth N --capacity-factor C`` (issue 35, "one MoE path"): the cost command passes a
mixture of experts' multi-token-prediction modules and token dropping to cost_by_gpu, read by the same flag
helper as ``memory``, ``time`` and ``plan`` (cli_args.add_moe_step_flags / moe_step_options), and refuses a
bad value with an error naming the flag. DeepSeek-V3 on H800s: its published run used one MTP module
(DeepSeek-AI 2024, section 2.2) and the H800 is the GPU it ran on."""

import json

import pytest

from llmsizing import cli
from llmsizing.time_cost import cost_by_gpu

V3 = "deepseek-v3"
ARGV = ["cost", V3, "--tokens", "1T", "--seq", "4096", "--gpu", "H800"]
# the command's defaults (batch 1, full recomputation, at most 65,536 GPUs), as cost_by_gpu keywords
KW = dict(tokens=1e12, seq=4096, gpus=["H800"], batch=1, recompute="full", mfu=None, max_gpus=65536)


def _records(df):
    """The frame as ``--json`` prints it, read back."""
    return json.loads(df.reset_index().to_json(orient="records"))


def _run(capsys, *extra):
    rc = cli.main(ARGV + list(extra))
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.fixture(scope="module")
def frames():
    return {key: cost_by_gpu(V3, **KW, **opts) for key, opts in
            (("default", {}), ("mtp", dict(mtp_depth=1)), ("cap", dict(capacity_factor=1.25)))}


@pytest.mark.parametrize("key, flags", [("default", []), ("mtp", ["--mtp-depth", "1"]),
                                        ("cap", ["--capacity-factor", "1.25"])])
def test_cost_json_is_cost_by_gpu_with_the_options(key, flags, frames, capsys):
    rc, out, err = _run(capsys, *flags, "--json")
    assert (rc, err) == (0, "")
    assert json.loads(out) == _records(frames[key])


def test_the_options_move_the_cost(frames):
    """MTP adds a module (3.8% of DeepSeek-V3's FLOPs per token, tests/test_plan_mtp.py) and its weights,
    states and activations on the last stage: the fewest GPUs that hold a step cannot fall, and the row is
    not the default one; the warning says what was priced."""
    base, mtp = frames["default"].iloc[0], frames["mtp"].iloc[0]
    assert base["fits"] and mtp["fits"]
    assert mtp["min_gpus"] >= base["min_gpus"]
    assert (mtp["min_gpus"], mtp["gpu_hours"]) != (base["min_gpus"], base["gpu_hours"])
    assert "1 MTP module" in mtp["warnings"] and "MTP" not in base["warnings"]
    assert "capacity factor 1.25" in frames["cap"].iloc[0]["warnings"]


def test_cost_text_names_the_options(capsys):
    rc, out, _ = _run(capsys, "--mtp-depth", "1", "--capacity-factor", "1.25")
    assert rc == 0
    assert out.splitlines()[0].endswith("(its fewest GPUs; cheapest first; with --mtp-depth 1 "
                                        "--capacity-factor 1.25):")
    rc, out, _ = _run(capsys)
    assert rc == 0 and out.splitlines()[0].endswith("(its fewest GPUs; cheapest first):")


@pytest.mark.parametrize("flags, says", [
    (["--mtp-depth", "9"], "--mtp-depth 9: mtp_depth must be an integer >= 0 and <= 8, got 9"),
    (["--mtp-depth", "-1"], "argument --mtp-depth: must be an integer >= 0, got -1"),
    (["--mtp-depth", "1.5"], "argument --mtp-depth: not an integer: '1.5'"),
    (["--capacity-factor", "0.5"], "argument --capacity-factor: must be a number >= 1 and <= 64, got '0.5'"),
    (["--capacity-factor", "65"], "argument --capacity-factor: must be a number >= 1 and <= 64, got '65'"),
    (["--mtp-depth", "1", "--mfu", "0.4"], "--mtp-depth 1: not with --mfu"),
])
def test_bad_values_name_the_flag(flags, says, capsys):
    rc, out, err = _run(capsys, *flags)
    assert rc == 2 and out == ""
    assert says in err


@pytest.mark.parametrize("flags", [["--mtp-depth", "1"], ["--capacity-factor", "1.25"]])
def test_a_dense_model_refuses_the_options_naming_the_flag(flags, capsys):
    rc = cli.main(["cost", "llama-3-8b", "--tokens", "1T", "--seq", "4096", "--gpu", "H800", *flags])
    err = capsys.readouterr().err
    assert rc == 2
    assert f"llmsizing cost: error: {' '.join(flags)}: " in err and "dense" in err
