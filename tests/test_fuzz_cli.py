"""Fuzz the command line and the config files it reads (issue 20, classes 5 and 9), the way a user types them.

The CLI runs in-process (``cli.main([...])``, its output captured) on generated command lines: catalogue names
and near misses, empty and unknown names, numbers with thousands separators, decimal commas, signs, exponents,
suffixes, NaN, infinities and thousands of digits. Config files are real Hugging Face ``config.json`` files of
every supported ``model_type`` (inline copies of the hub's, from tests/test_model.py), written to a temporary
folder with odd but legal keys (unknown keys, nested objects, ``null`` and absent defaults, huge numbers where
nothing reads them, window settings that window every layer or none), and with one read key made illegal.

Promises checked on every call:

1. the exit code is 0 or 2 and nothing raises; stderr never holds a traceback;
2. exit 2 prints an error on stderr and nothing on stdout (bad input is refused before anything is printed);
3. a comma that is not followed by exactly three digits is refused, never read as a thousands separator;
4. a ``--json`` result parses, and every number in it is finite and non-negative;
5. a legal config gives the parameter count of the same config without the odd keys, in the library and in the
   CLI; an illegal value of a read key is refused naming that key and the file.

The example count is small by default so that CI stays within seconds; ``make fuzz`` runs many more
(``LLMSIZING_FUZZ_EXAMPLES``, read by tests/test_fuzz.py, whose settings and call counter this file shares).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_cli import _with
from test_fuzz import CALLS, EXAMPLES, FUZZ, RETURNED, hf_configs
from test_model import HF_GPT2, HF_LLAMA2_7B, HF_LLAMA3_8B, HF_MISTRAL_7B, HF_QWEN2_7B

import llmsizing as L
from llmsizing import cli


def run(argv: list[str]) -> tuple[int, str, str]:
    """``cli.main(argv)`` in-process: (exit code, stdout, stderr). Any exception escaping main fails the test."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(argv)
        except SystemExit as e:            # (argparse's way; main returns the code, a console script exits)
            code = e.code if isinstance(e.code, int) else 2
    CALLS["cli.main"] = CALLS.get("cli.main", 0) + 1
    if code == 0:
        RETURNED["cli.main"] = RETURNED.get("cli.main", 0) + 1
    return code, out.getvalue(), err.getvalue()


def check_run(argv: list[str]) -> tuple[int, str, str]:
    """Run ``argv`` and check promises 1, 2 and 4."""
    code, out, err = run(argv)
    assert code in (0, 2), f"{argv}: exit {code}\n{err}"
    assert "Traceback" not in err and "Traceback" not in out, f"{argv}:\n{err}"
    if code == 2:
        assert "error" in err and out == "", f"{argv}: exit 2 with stdout {out[:300]!r} and stderr {err[:300]!r}"
    elif "--json" in argv:
        for x in numbers(json.loads(out)):
            assert math.isfinite(x) and x >= 0, f"{argv}: {x} in the JSON"
    return code, out, err


def numbers(value) -> list[float]:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return []
    if isinstance(value, (int, float)):
        return [float(value)]
    if isinstance(value, dict):
        return [x for v in value.values() for x in numbers(v)]
    if isinstance(value, list):
        return [x for v in value for x in numbers(v)]
    return []


# ----------------------------------------------------------------------------- numbers as typed
#: A comma that is not a thousands separator: not preceded by a digit, or not followed by exactly three digits,
#: or inside the fraction.
BAD_COMMA = re.compile(r"(?<![0-9]),|,(?![0-9]{3}(?![0-9]))|\.[0-9]*,")


def grouped(n: int, sep: str = ",") -> str:
    return f"{n:,}".replace(",", sep)


DECIMAL_COMMAS = st.builds(lambda a, b: f"{a},{b}", st.integers(0, 999),
                           st.text("0123456789", min_size=1, max_size=5).filter(lambda t: len(t) != 3))
ODD = st.sampled_from(["", " ", "nan", "NaN", "inf", "-inf", "1e400", "-1", "0", "0.0", "+5", "1.", ".5", "1e3",
                       "9" * 30, "9" * 5001, "1..2", "1,,000", ",", ",5", "5,", "1,000,00", "1_5", "1_000",
                       "1,000_000", "１２", "٣", "0x10", "1/2", "2^10", "1 000", "1.5.T", "$2M", "12,34,567",
                       "1,5T", "1,5M", "0,4", "3,5e2"])


def ints(lo: int, hi: int) -> st.SearchStrategy:
    """An integer option as typed: plain, grouped by commas or underscores, or an odd text."""
    n = st.integers(lo, hi)
    return st.one_of(n.map(str), n.map(grouped), n.map(lambda v: grouped(v, "_")), DECIMAL_COMMAS, ODD)


def floats(lo: float, hi: float) -> st.SearchStrategy:
    x = st.floats(lo, hi, allow_nan=False)
    return st.one_of(x.map(lambda v: f"{v:.3g}"), x.map(repr), DECIMAL_COMMAS, ODD)


def counts() -> st.SearchStrategy:
    mantissa = st.one_of(st.integers(1, 999).map(str), st.integers(1, 10**6).map(grouped),
                         st.floats(0.1, 99.9).map(lambda v: f"{v:.1f}"), DECIMAL_COMMAS)
    return st.one_of(st.tuples(mantissa, st.sampled_from(["", "k", "M", "B", "G", "T", "t", " T"])).map("".join),
                     st.integers(6, 13).map(lambda e: f"1e{e}"), ODD)


MODELS = st.one_of(st.sampled_from(["gpt2", "llama-3-8b", "mistral-7b", "qwen2-7b"]),
                   st.sampled_from(["", " ", "\t", "Llama-3-8B", "llama3-8b", "gpt-2", "no/such/config.json",
                                    "x.json", "ллама", "a" * 5000, "a\x00b", "."]))
GPUS = st.one_of(st.sampled_from(["H100 SXM", "h100sxm", "A100 80GB", "B200"]),
                 st.sampled_from(["", " ", "H100", "A100", "nan", "80", "H100 SXM "]))

#: Each subcommand: a valid command line, and how to draw each numeric option's text.
COMMANDS = {
    "memory": (["--batch", "1", "--seq", "512"],
               {"--batch": ints(1, 8), "--seq": ints(1, 4096), "--grad-accum": ints(1, 8), "--tp": ints(1, 8),
                "--pp": ints(1, 4), "--dp": ints(1, 64), "--zero": ints(0, 3), "--virtual-stages": ints(1, 2)}),
    "time": (["--tokens", "1T", "--gpu", "H100 SXM", "--gpus", "64", "--seq", "4096"],
             {"--tokens": counts(), "--gpus": ints(1, 4096), "--seq": ints(1, 8192), "--mfu": floats(0.01, 1),
              "--price": floats(0, 10)}),
    # --max-gpus stays small and valid: the planner's search grows with it
    "plan": (["--tokens", "10B", "--seq", "1024", "--global-batch", "64", "--max-gpus", "16"],
             {"--tokens": counts(), "--seq": ints(1, 4096), "--global-batch": ints(1, 512),
              "--deadline-days": floats(0, 1000), "--budget": counts(), "--overlap": floats(0, 1),
              "--compute-efficiency": floats(0.01, 1), "--top": ints(1, 30)}),
}


@st.composite
def command_lines(draw) -> tuple[list[str], list[str]]:
    """A command line and the option values drawn as text (to check the comma promise on)."""
    sub = draw(st.sampled_from(sorted(COMMANDS)))
    base, options = COMMANDS[sub]
    argv = [sub, draw(MODELS), *base]
    typed = []
    for option in draw(st.lists(st.sampled_from(sorted(options)), max_size=3, unique=True)):
        value = draw(options[option])
        typed.append(value)
        argv = _with(argv, option, value)
    if sub in ("memory", "time") and draw(st.booleans()):
        argv = _with(argv, "--gpu", draw(GPUS))
    if sub == "time" and draw(st.booleans()):
        argv += ["--mfu-range", draw(floats(0.01, 1)), draw(floats(0.01, 1))]
    if draw(st.booleans()):
        argv.append("--json")
    return argv, typed


def test_fuzz_command_lines():
    before = RETURNED.get("cli.main", 0)

    @given(command_lines())
    @settings(FUZZ)
    def fuzz(call):
        argv, typed = call
        code, _, err = check_run(argv)
        for value in typed:                                                      # promise 3
            if BAD_COMMA.search(value) and value.strip():
                assert code == 2, f"{argv}: {value!r} was read as a number"
    fuzz()
    # a fuzz whose every command line is refused would check nothing but the refusals
    assert RETURNED.get("cli.main", 0) > before, "no generated command line ran"


@pytest.mark.parametrize("argv", [["models"], ["gpus"], ["models", "--json"], ["gpus", "--csv"], ["--help"],
                                  ["memory", "--help"], [], ["nosuch"], ["memory"], ["time", "gpt2"],
                                  ["memory", "gpt2", "--batch", "1", "--seq", "8", "--json", "--csv"]])
def test_fixed_command_lines(argv):
    check_run(argv)


# ----------------------------------------------------------------------------- config files
REAL = {"llama": [HF_LLAMA2_7B, HF_LLAMA3_8B], "mistral": [HF_MISTRAL_7B], "qwen2": [HF_QWEN2_7B], "gpt2": [HF_GPT2]}

JSON_VALUES = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70),
                                     st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20)),
                           lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                   st.dictionaries(st.text(max_size=10), inner, max_size=4)),
                           max_leaves=12)

#: Keys from_hf_config reads, by model_type, and which ones Hugging Face fills when absent or null.
READ = {"llama": ["num_attention_heads", "hidden_size", "num_hidden_layers", "intermediate_size", "vocab_size",
                  "num_key_value_heads", "head_dim", "max_position_embeddings", "tie_word_embeddings", "hidden_act",
                  "attention_bias", "mlp_bias"],
        "gpt2": ["n_embd", "n_head", "n_layer", "n_inner", "vocab_size", "n_positions", "tie_word_embeddings",
                 "activation_function"]}
READ["mistral"] = READ["llama"][:-2] + ["sliding_window"]
READ["qwen2"] = READ["llama"][:-2] + ["use_sliding_window", "sliding_window", "max_window_layers"]
#: Keys whose default (absent or null) changes no count: head_dim is hidden_size // heads in these configs, the
#: positions are rotary (not GPT-2's n_positions, which are rows of a matrix), the activation has no weights.
NO_COUNT = {"head_dim", "max_position_embeddings", "hidden_act", "activation_function"}
BOOLS = {"tie_word_embeddings", "attention_bias", "mlp_bias", "use_sliding_window"}
NAMES = {"hidden_act", "activation_function"}


@st.composite
def legal_oddities(draw, mtype: str, config: dict) -> dict:
    """``config`` with odd but legal changes that leave the parameter count alone."""
    cfg = dict(config)
    for key in draw(st.lists(st.text(min_size=1, max_size=12).filter(lambda k: k not in READ[mtype] and
                                                                     k not in L.model.MOE_KEYS and k not in
                                                                     ("model_type", "layer_types", "_name_or_path")),
                                       max_size=3)):
        cfg[key] = draw(JSON_VALUES)
    cfg["rope_scaling"] = draw(st.sampled_from([None, {"type": "linear", "factor": 2.0},
                                                {"rope_type": "llama3", "factor": 8.0, "original_max_position"
                                                 "_embeddings": 8192}]))
    cfg["_name_or_path"] = draw(st.sampled_from(["", "org/model", "ünï/cödé", None, " "]))
    # keys whose Hugging Face default (absent or null) changes no parameter count
    for key in draw(st.lists(st.sampled_from(sorted(NO_COUNT & set(READ[mtype]))), max_size=2, unique=True)):
        if draw(st.booleans()):
            cfg.pop(key, None)
        else:
            cfg[key] = None
    if mtype == "qwen2":             # windows on every layer or on none (the count is the same either way)
        layers = cfg["num_hidden_layers"]
        cfg.update(draw(st.sampled_from([
            {"use_sliding_window": False}, {"use_sliding_window": True, "max_window_layers": layers},
            {"use_sliding_window": True, "max_window_layers": layers + 5},
            {"use_sliding_window": True, "max_window_layers": 0, "sliding_window": 4096},
            {"use_sliding_window": True, "layer_types": ["full_attention"] * layers},
            {"use_sliding_window": True, "layer_types": ["sliding_attention"] * layers, "sliding_window": 1024}])))
    if mtype in ("llama", "gpt2"):
        cfg["sliding_window"] = draw(st.sampled_from([None, 4096, "ignored", -1]))     # Hugging Face ignores it
    if mtype == "mistral":
        cfg["sliding_window"] = draw(st.sampled_from([None, 1, 4096, 131072]))
    return cfg


def _config_text(cfg: dict, huge_unread: bool) -> str:
    text = json.dumps(cfg)
    if huge_unread:                  # a number of thousands of digits where nothing reads it
        text = text[:-1] + ', "bos_token_id": ' + "7" * 5001 + "}"
    return text


@st.composite
def legal_configs(draw):
    mtype = draw(st.sampled_from(sorted(REAL)))
    base = draw(st.one_of(st.sampled_from(REAL[mtype]), hf_configs(mtype).map(
        lambda c, t=mtype: {"model_type": t, **{k: v for k, v in c.items() if v is not None}})))
    return mtype, base, draw(legal_oddities(mtype, base)), draw(st.booleans())


def _write(tmp_path_factory, text: str):
    path = tmp_path_factory.mktemp("cfg") / "config.json"
    path.write_text(text, encoding="utf-8")
    return path


@given(legal_configs())
@settings(FUZZ)
def test_fuzz_legal_config_files(tmp_path_factory, case):
    mtype, base, cfg, huge = case
    try:
        expected = L.Model.from_hf_config(base).n_params
    except (ValueError, TypeError):   # a generated base the library refuses (GQA that does not divide, ...)
        return
    path = _write(tmp_path_factory, _config_text(cfg, huge))
    CALLS["from_hf_config(file)"] = CALLS.get("from_hf_config(file)", 0) + 1
    model = L.Model.from_hf_config(path)
    assert model.n_params == expected, f"{mtype}: odd keys changed the count"
    code, out, err = check_run(["memory", str(path), "--batch", "1", "--seq", "64"])
    assert code == 0, err
    assert out.startswith(f"{expected:,} parameters")


ILLEGAL_INTS = [0, -1, 1.5, "8", True, [8], {"a": 1}, 2**60, "HUGE"]
ILLEGAL_BOOLS = [0, 1, "false", "true", [], 1.0]
ILLEGAL_NAMES = ["swiglu", 5, [], "", "SILU"]


@st.composite
def illegal_configs(draw):
    mtype = draw(st.sampled_from(sorted(REAL)))
    cfg = dict(draw(st.sampled_from(REAL[mtype])))
    key = draw(st.sampled_from(READ[mtype]))
    value = draw(st.sampled_from(ILLEGAL_BOOLS if key in BOOLS else ILLEGAL_NAMES if key in NAMES
                                 else ILLEGAL_INTS))
    if key == "max_window_layers" and value == 0:
        value = -1                                               # (0 is legal: every layer windowed)
    if mtype == "qwen2" and key in ("sliding_window", "max_window_layers"):
        cfg.update(use_sliding_window=True, max_window_layers=0)  # (else Qwen2 does not read the window)
    return mtype, cfg, key, value


@given(illegal_configs())
@settings(FUZZ)
def test_fuzz_illegal_config_files(tmp_path_factory, case):
    mtype, cfg, key, value = case
    text = json.dumps({**cfg, key: 0})
    text = text.replace(f'"{key}": 0', f'"{key}": ' + ("9" * 5001 if value == "HUGE" else json.dumps(value)))
    path = _write(tmp_path_factory, text)
    CALLS["from_hf_config(file)"] = CALLS.get("from_hf_config(file)", 0) + 1
    with pytest.raises((ValueError, TypeError)) as e:
        L.Model.from_hf_config(path)
    assert key in str(e.value) and str(path) in str(e.value), f"{mtype} {key}={value!r}: {e.value}"
    code, out, err = check_run(["memory", str(path), "--batch", "1", "--seq", "64"])
    assert code == 2 and key in err


@pytest.mark.parametrize("text", ['{"model_type": "llama", "x": ' + "[" * 50_000 + "]" * 50_000 + "}",
                                  '{"model_type": "llama", "num_hidden_layers": ' + "1" * 5001 + "}",
                                  "[" * 50_000, '{"model_type": "llama"', "", "\ufeff{}", "null"])
def test_broken_config_files_exit_2_without_a_traceback(tmp_path, text):
    path = tmp_path / "config.json"
    path.write_text(text, encoding="utf-8")
    code, _, err = check_run(["memory", str(path), "--batch", "1", "--seq", "64"])
    assert code == 2 and str(path) in err
    code, _, err = check_run(["memory", str(tmp_path), "--batch", "1", "--seq", "64"])      # the folder
    assert code == 2 and str(path) in err


