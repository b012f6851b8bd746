"""The command line (llmsizing.cli): it reports what the library computes, and refuses bad input with exit 2."""

import json
import subprocess
import sys

import pytest

import llmsizing as L
from llmsizing import cli
from llmsizing.time_cost import training_time


@pytest.mark.parametrize("text, value", [("1T", 1e12), ("15.6T", 15.6e12), ("500B", 5e11), ("2e12", 2e12),
                                         ("1,000,000", 1e6), ("3k", 3000), ("7M", 7e6)])
def test_count_suffixes(text, value):
    assert cli.count(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["1X", "", "T", "-5", "1..2"])
def test_count_refuses(text):
    with pytest.raises(Exception, match="not a count"):
        cli.count(text)


def _json(capsys, argv):
    assert cli.main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_time_json_is_the_library(capsys):
    rows = _json(capsys, ["time", "llama-3-70b", "--tokens", "1T", "--gpu", "H100 SXM", "--gpus", "1024",
                          "--seq", "8192", "--json"])
    t = training_time("llama-3-70b", tokens=1e12, gpu="H100 SXM", n_gpus=1024, seq=8192)
    central = {r["case"]: r for r in rows}["central"]
    assert central["days"] == pytest.approx(t.days) and central["cost_usd"] == pytest.approx(t.cost_usd)
    assert [r["case"] for r in rows] == ["fast end", "central", "slow end"]


def test_memory_json_and_layout(capsys):
    argv = ["memory", "llama-3-70b", "--batch", "1", "--seq", "4096", "--tp", "8", "--pp", "2", "--dp", "4",
            "--zero", "1", "--grad-accum", "8", "--json"]
    rows = {r["component"]: r for r in _json(capsys, argv)}
    t = L.training_memory("llama-3-70b", batch=1, seq=4096, grad_accum=8,
                          parallel=L.Parallel(tp=8, pp=2, dp=4, zero=1))
    assert rows["total"]["bytes"] == pytest.approx(t.total_bytes)


def test_memory_table_says_whether_it_fits(capsys):
    assert cli.main(["memory", "llama-3-8b", "--batch", "1", "--seq", "2048", "--gpu", "A10"]) == 0
    assert "does NOT fit on one A10" in capsys.readouterr().out


def test_hf_config_path(tmp_path, capsys):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"model_type": "gpt2", "n_layer": 12, "n_embd": 768, "n_head": 12,
                               "vocab_size": 50257}))
    assert cli.main(["memory", str(cfg), "--batch", "1", "--seq", "1024"]) == 0
    assert f"{L.get_model('gpt2').n_params:,} parameters" in capsys.readouterr().out


@pytest.mark.parametrize("argv, words", [
    (["memory", "llama-3-70b", "--batch", "1", "--seq", "4096", "--tp", "3"], "tp=3"),
    (["memory", "llama-3-8b", "--batch", "0", "--seq", "4096"], "batch"),
    (["memory", "lama-3-8b", "--batch", "1", "--seq", "4096"], "llama-3-8b"),
    (["time", "llama-3-8b", "--tokens", "1T", "--gpu", "H100 SXM", "--gpus", "8", "--seq", "4096", "--mfu", "2"],
     "mfu"),
    (["time", "llama-3-8b", "--tokens", "1T", "--gpu", "H1000", "--gpus", "8", "--seq", "4096"], "GPU"),
])
def test_errors_exit_2_naming_the_parameter(argv, words, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err


def test_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["time", "llama-3-8b", "--tokens", "lots"])
    assert e.value.code == 2


def test_python_m_llmsizing_help_lists_examples():
    out = subprocess.run([sys.executable, "-m", "llmsizing", "--help"], capture_output=True, text=True, check=True)
    assert "examples:" in out.stdout and "llmsizing time" in out.stdout


@pytest.mark.parametrize("sub", ["models", "gpus"])
def test_catalogues_print(sub, capsys):
    assert cli.main([sub, "--csv"]) == 0
    names = L.list_models() if sub == "models" else L.list_gpus()
    out = capsys.readouterr().out
    assert all(n in out for n in names)


def test_plan_front_json_is_the_planner(capsys):
    from llmsizing.planner import plan

    rows = _json(capsys, ["plan", "llama-3-8b", "--tokens", "100B", "--seq", "4096", "--global-batch", "256",
                          "--max-gpus", "256", "--json"])
    df = plan("llama-3-8b", tokens=1e11, seq=4096, global_batch=256, max_gpus=256)
    front = df[df["pareto"]].head(20)
    assert [r["n_gpus"] for r in rows] == list(front["n_gpus"])
    assert rows[0]["cost_usd"] == pytest.approx(front["cost_usd"].iloc[0])


def test_plan_explains_a_missed_deadline(capsys):
    argv = ["plan", "llama-3-70b", "--tokens", "1T", "--seq", "8192", "--global-batch", "1024", "--max-gpus",
            "512", "--deadline-days", "1"]
    assert cli.main(argv) == 2
    assert "the fastest takes" in capsys.readouterr().err
