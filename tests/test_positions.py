"""Position encodings (llmsizing.positions, review22 M3): the catalogue's ``positions`` column, each row
with a source; the Hugging Face reading from the config's own keys (the measured configs of
data/hf_meta_param_counts.csv and data/hf_type_sweep.csv); the checks. Counts of rotating layers are
derived by hand from the published configs (SmolLM3: no RoPE on every 4th of 36 layers; Llama 4 Scout: on
every 4th of 48)."""

import csv
import json
from pathlib import Path

import pytest

from llmsizing.catalog import get_model, list_models
from llmsizing.model import Model
from llmsizing.positions import POSITIONS, position_encoding, rotary_layers

DATA = Path(__file__).resolve().parents[1] / "data"


def _rows(name):
    return list(csv.DictReader(open(DATA / name, newline="")))


@pytest.mark.parametrize("row", _rows("models.csv"), ids=lambda r: r["name"])
def test_every_catalogue_row_states_its_positions_with_a_source(row):
    assert row["positions"] in POSITIONS
    assert len(row["positions_source"].strip()) > 20
    m = get_model(row["name"])
    assert position_encoding(m) == row["positions"]
    assert (row["positions"] == "learned") == m.learned_pos


def test_the_catalogues_alibi_and_nope_rows():
    """BLOOM (Scao et al. 2022) and BloombergGPT (Wu et al. 2023, built on BLOOM) use ALiBi; SmolLM3 drops
    RoPE from layers 4, 8, ..., 36 (36 - 9 = 27 rotate); Llama 4 Scout from every 4th of 48 (48 - 12 = 36)."""
    alibi = [n for n in list_models() if position_encoding(get_model(n)) == "alibi"]
    assert alibi == ["bloom-176b", "bloomberggpt-50b"]
    assert [rotary_layers(get_model(n)) for n in ("bloom-176b", "gpt3-175b", "smollm3-3b", "llama-4-scout",
                                                  "llama-3-8b")] == [0, 0, 27, 36, 32]


def _config(file, key, value):
    row = next(r for r in _rows(file) if r[key] == value)
    return json.loads(row["config_json"])


@pytest.mark.parametrize("file, key, value, want, rope", [
    ("hf_meta_param_counts.csv", "config_name", "bloom (176B)", "alibi", 0),
    ("hf_meta_param_counts.csv", "config_name", "small-falcon-serial", "alibi", 0),    # alibi: true
    ("hf_meta_param_counts.csv", "config_name", "falcon-7b", "rope", 32),              # alibi: false
    ("hf_meta_param_counts.csv", "config_name", "pythia-1.4b", "rope", 24),            # rotary_pct 0.25
    ("hf_meta_param_counts.csv", "config_name", "opt-1.3b", "learned", 0),
    ("hf_meta_param_counts.csv", "config_name", "Mixtral-8x7B-v0.1", "rope", 32),
    ("hf_type_sweep.csv", "model_type", "mpt", "alibi", 0),
    ("hf_type_sweep.csv", "model_type", "smollm3", "rope", 27),
    ("hf_type_sweep.csv", "model_type", "llama4_text", "rope", 36),
    ("hf_type_sweep.csv", "model_type", "granitemoehybrid", "none", 0),     # position_embedding_type null
    ("hf_type_sweep.csv", "model_type", "mamba", "none", 0),
    # review23a M2: hybrids whose attention layers take no position signal (Lieber et al. 2024, Jamba,
    # Sec. 6.5 "Jamba does not require explicit positional information"; Nemotron-H and Zamba likewise);
    # their config classes (data/hf_config_classes.json) hold no rope or rotary key at all
    ("hf_type_sweep.csv", "model_type", "jamba", "none", 0),
    ("hf_type_sweep.csv", "model_type", "nemotron_h", "none", 0),
    ("hf_type_sweep.csv", "model_type", "zamba", "none", 0),
    ("hf_type_sweep.csv", "model_type", "xglm", "none", 0),                 # a fixed sinusoidal table
])
def test_hugging_face_configs_give_their_positions(file, key, value, want, rope):
    m = Model.from_hf_config(_config(file, key, value))
    assert (position_encoding(m), rotary_layers(m)) == (want, rope)


def test_the_rotating_layers_follow_the_interval_without_a_list():
    """Llama4TextConfig and SmolLM3Config derive the list from no_rope_layer_interval (default 4): with 3,
    layers 3, 6, ..., 36 of 36 do not rotate."""
    cfg = _config("hf_type_sweep.csv", "model_type", "smollm3")
    cfg.pop("no_rope_layers")
    assert rotary_layers(Model.from_hf_config(cfg)) == 27
    cfg["no_rope_layer_interval"] = 3
    assert rotary_layers(Model.from_hf_config(cfg)) == 24
    cfg["no_rope_layers"] = [1] * 35
    with pytest.raises(ValueError, match="no_rope_layers must be a list of 36"):
        Model.from_hf_config(cfg)


def _tiny(**kw):
    return Model(name="tiny", layers=4, hidden=64, heads=4, ffn_hidden=128, vocab=100, **kw)


def test_defaults_keep_the_older_reading():
    assert position_encoding(_tiny()) == "rope" and rotary_layers(_tiny()) == 4
    assert position_encoding(_tiny(learned_pos=True)) == "learned"
    assert rotary_layers(_tiny(positions="rope", rope_layers=3)) == 3


@pytest.mark.parametrize("kw, match", [
    (dict(positions="sinusoidal"), "positions"),
    (dict(positions="alibi", learned_pos=True), "learned_pos"),
    (dict(positions="learned"), "learned_pos"),
    (dict(positions="alibi", rope_layers=2), "rope_layers"),
    (dict(rope_layers=5), "rope_layers"),
    (dict(rope_layers=-1), "rope_layers"),
])
def test_bad_positions_are_refused_by_name(kw, match):
    with pytest.raises(ValueError, match=match):
        _tiny(**kw)


def test_a_non_integer_rope_layers_is_a_type_error():
    with pytest.raises(TypeError, match="rope_layers"):
        _tiny(rope_layers=2.5)


def test_a_rotary_key_in_the_config_keeps_a_class_without_one_rotary():
    """The rule reads data, not the type's name: a Jamba config that sets ``rope_theta`` rotates, and a
    class the library has no defaults for keeps the old reading (rotary)."""
    cfg = _config("hf_type_sweep.csv", "model_type", "jamba")
    assert position_encoding(Model.from_hf_config({**cfg, "rope_theta": 10000.0})) == "rope"
    from llmsizing.positions import hf_positions
    assert hf_positions({}, "x", "unknown", {"layers": 4}, {}) == {"positions": "rope"}
    assert hf_positions({}, "x", "unknown", {"layers": 4}, {"hidden_size": 8}) == {"positions": "none"}


# review23a M4: edits that worked before the position fields existed (4839f4d) work again
def test_with_learned_pos_resets_the_positions_it_implies():
    m = get_model("llama-3-8b").with_(learned_pos=True)
    assert (m.learned_pos, position_encoding(m), rotary_layers(m)) == (True, "learned", 0)
    g = get_model("gpt2").with_(learned_pos=False)          # without a table the old reading: rotary
    assert (g.learned_pos, position_encoding(g), rotary_layers(g)) == (False, "rope", 12)
    s = get_model("smollm3-3b").with_(learned_pos=True)     # its NoPE layer count goes with the rotary
    assert (position_encoding(s), s.rope_layers) == ("learned", None)
    # an unchanged learned_pos keeps the stated encoding: BLOOM stays ALiBi
    assert position_encoding(get_model("bloom-176b").with_(learned_pos=False)) == "alibi"


def test_with_layers_keeps_every_fourth_layer_without_rope():
    """SmolLM3Config leaves out layers 4, 8, ... (no_rope_layer_interval 4): 27 of 36 rotate, so 12 layers
    leave out layers 4, 8 and 12, and 9 rotate; 10 layers leave out 4 and 8, and 8 rotate."""
    m = get_model("smollm3-3b")
    assert (m.with_(layers=12).rope_layers, m.with_(layers=10).rope_layers) == (9, 8)
    assert m.with_(layers=12, rope_layers=12).rope_layers == 12     # given: taken as it is
    full = Model(name="t", layers=8, hidden=64, heads=4, ffn_hidden=128, vocab=100, positions="rope",
                 rope_layers=8)
    assert full.with_(layers=20).rope_layers == 20


def test_with_layers_scales_a_count_no_interval_gives_with_a_warning():
    m = get_model("smollm3-3b").with_(rope_layers=20)      # 20 of 36: no every-k-th rule gives it
    with pytest.warns(DeprecationWarning, match="rope_layers=20 of 36 follows no every-k-th-layer rule"):
        assert m.with_(layers=12).rope_layers == 7          # round(20 x 12 / 36)
