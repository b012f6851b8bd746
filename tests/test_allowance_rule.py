"""The book's memory allowance (chapter 3: 1 GiB fixed + 8% of the modelled tensors) and its inverse are
written once, in llmsizing.states (session 25): states.total_with_allowance_bytes and
states.peak_room_bytes, which the planner's arrays, activation_room_bytes and the fewest-GPU searches call.
Expected values worked out by hand from the rule's two constants."""

import ast
from pathlib import Path

import numpy as np
import pytest

from llmsizing import memory, states
from llmsizing.units import GiB

SRC = Path(states.__file__).parent


def test_the_rule_by_hand():
    # 10 GiB of modelled peak: 1 GiB + 1.08 x 10 GiB = 11.8 GiB
    assert states.total_with_allowance_bytes(10 * GiB) == pytest.approx(11.8 * GiB, rel=1e-15)
    # an 80 GB card at 90%: (72e9 - 1 GiB) / 1.08 = 65,672,461,274.1 bytes of peak
    assert states.peak_room_bytes(72e9) == pytest.approx((72e9 - 1_073_741_824) / 1.08, rel=1e-15)
    assert states.peak_room_bytes(72e9) == pytest.approx(65_672_461_274.1, rel=1e-12)
    peaks = np.array([0.0, 1e9, 5e10])
    assert np.allclose(states.peak_room_bytes(states.total_with_allowance_bytes(peaks)), peaks,
                       rtol=0, atol=1e-3)
    # the same rule as the default overhead on the peak (up to the last bits of the float sum)
    assert states.total_with_allowance_bytes(3e10) == pytest.approx(3e10 + states.default_overhead_bytes(3e10),
                                                                    rel=1e-15)


def test_memory_still_exports_the_rule():
    assert memory.total_with_allowance_bytes is states.total_with_allowance_bytes
    assert memory.peak_room_bytes is states.peak_room_bytes


def test_no_other_module_writes_the_rule_out():
    """``1 + FRAGMENTATION`` (the rule's factor) appears in code only in states.py: inference's break-even of
    the x1.2 rule is the rule's inverse, ``peak_room_bytes(1.2 W) - W``."""
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        if path.name == "states.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add)
                    and isinstance(node.left, ast.Constant) and node.left.value == 1
                    and isinstance(node.right, ast.Name) and node.right.id == "FRAGMENTATION"):
                offenders.append(path.relative_to(SRC).as_posix())
    assert offenders == [], offenders
