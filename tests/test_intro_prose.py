"""Chapter 0's opening example in sentences (src/llmsizing/intro_prose.py): its GPU counts worked by hand from
the published parameter count and the driver's memory figure, the allowance rule at its edges, bad input, and
a reading that raises when the numbers contradict it."""

from __future__ import annotations

import math

import pytest

import llmsizing.intro_prose as ip
from llmsizing.prose import ProseOutOfDate

GIB = 2**30
# Llama-3-70B's checkpoint holds 70,553,706,496 parameters (chapter 1); 16 bytes each in bf16 mixed precision
# with AdamW (2 weights + 2 gradients + 4 master + 4 + 4 moments; ZeRO paper, Sec. 3.1)
STATES = 70_553_706_496 * 16            # 1,128,859,303,936 bytes
H100 = 81_559 * 2**20                    # nvidia-smi's 81,559 MiB = 85,521,399,808 bytes


@pytest.fixture(scope="module")
def text():
    return ip.opening_example_prose()


def test_the_counts_worked_by_hand(text):
    """15: 1,128,859,303,936 / (0.9 x 85,521,399,808 = 76,969,259,827) = 14.67, rounded up.
    17: (76,969,259,827 - 1 GiB) / 1.08 = 70,273,627,781 bytes of room; 1,128.86e9 / 70.27e9 = 16.06 -> 17.
    19: the same room / 1.272 (the published median fragmentation) = 59.67e9; 18.92 -> 19.
    2: bf16 weights 141,107,412,992 bytes; (85,521,399,808 - 1 GiB) / 1.08 = 78,192,275,911; 1.80 -> 2."""
    v = text.values
    assert (v["n_train"], v["n_train_allow"], v["n_train_meas"], v["n_serve"]) == ("15", "17", "19", "2")
    assert v["states"] == "1,051.3 GiB"                 # 1,128,859,303,936 / 2^30 = 1,051.33
    assert v["weights"] == "131.4 GiB"                  # 141,107,412,992 / 2^30 = 131.42
    assert v["h100"] == "79.6 GiB" and v["h100_box"] == "80 GB"   # 81,559 / 1,024 = 79.65
    assert v["bpp"] == "16" and v["reserve"] == "10%" and v["fixed"] == "1 GiB" and v["frag"] == "8%"
    # chapter 3: 27% over the peak of active tensors, the median over 5 sources with the default allocator
    assert v["frag_meas"] == "27%" and v["frag_meas_sources"] == "5"
    assert "at least 15 GPUs just to hold them (17 with the allowance, 19 with 27% fragmentation)" \
        in text.report


def test_the_rule_by_hand_at_its_edges():
    """An A100 80GB holds exactly 80 GiB (81,920 MiB). In the whole GPU with no fragmentation each GPU has
    79 GiB after the fixed 1 GiB: 158 GiB fit on 2, one byte more needs 3. With the planner's 90% and 8%:
    (72 - 1) / 1.08 = 65.74 GiB a GPU, so 131 GiB fit on 2 and 132 GiB need 3."""
    f = ip.fewest_gpus_with_allowance
    assert f(158 * GIB, "A100 80GB", usable_fraction=1.0, fragmentation=0.0) == 2
    assert f(158 * GIB + 1, "A100 80GB", usable_fraction=1.0, fragmentation=0.0) == 3
    assert f(131 * GIB, "A100 80GB") == 2 and f(132 * GIB, "A100 80GB") == 3
    assert math.isclose((72 - 1) / 1.08, 65.74, abs_tol=0.01)


@pytest.mark.parametrize("kwargs, match", [
    ({"fragmentation": -0.1}, "fragmentation"),
    ({"fragmentation": 10.0}, "fragmentation"),
    ({"fragmentation": float("nan")}, "fragmentation"),
    ({"usable_fraction": 0.0}, "usable_fraction"),
    ({"usable_fraction": 1.5}, "usable_fraction"),
    ({"usable_fraction": 0.04}, "leaves no room"),     # 4% of an A10's 22.5 GiB is 0.9 GiB, under the 1 GiB
])
def test_bad_input_names_the_parameter(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ip.fewest_gpus_with_allowance(GIB, "A10", **kwargs)


def test_wrong_types_name_the_parameter():
    with pytest.raises(TypeError, match="fragmentation"):
        ip.fewest_gpus_with_allowance(GIB, "A10", fragmentation="0.1")
    with pytest.raises(TypeError, match="n_bytes"):
        ip.fewest_gpus_with_allowance("1 GiB", "A10")


def test_a_reading_the_numbers_contradict_raises(monkeypatch):
    """Were the published fragmentation below the book's 8%, the sentence 'larger than the book's guess' would
    be wrong, and the chapter's cell must fail rather than print it."""
    monkeypatch.setattr(ip, "fragmentation_allowance", lambda allocator="default": 0.05)
    with pytest.raises(ProseOutOfDate, match="8%"):
        ip.opening_example_prose()
