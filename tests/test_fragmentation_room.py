"""states.fragmentation_room: the fragmentation a memory limit leaves above a modelled peak, after the
fixed 1 GiB (chapter 5's Llama 3.1 405B reading; the inverse of the allowance rule
total = 1 GiB + (1 + f) x peak)."""

from __future__ import annotations

import pytest

from llmsizing.states import (FIXED_OVERHEAD_BYTES, FRAGMENTATION, fragmentation_room,
                              total_with_allowance_bytes)
from llmsizing.units import GiB


def test_by_hand():
    """An 80 GiB limit over a 70 GiB peak: (80 - 1) / 70 - 1 = 9/70 = 12.857%; over 79 GiB: exactly 0."""
    assert FIXED_OVERHEAD_BYTES == GiB
    assert fragmentation_room(80 * GiB, 70 * GiB) == pytest.approx(9 / 70)
    assert fragmentation_room(80 * GiB, 79 * GiB) == 0
    assert fragmentation_room(80 * GiB, 80 * GiB) == pytest.approx(-1 / 80)       # even f = 0 is over


def test_inverts_the_allowance_rule():
    """A peak whose book total is exactly the limit leaves exactly the book's 8%."""
    peak = 50 * GiB
    assert fragmentation_room(total_with_allowance_bytes(peak), peak) == pytest.approx(FRAGMENTATION)


@pytest.mark.parametrize("limit, peak, name", [(80 * GiB, 0, "peak_bytes"), (80 * GiB, -1.0, "peak_bytes"),
                                               (-1.0, GiB, "limit_bytes"),
                                               (float("nan"), GiB, "limit_bytes")])
def test_bad_input_is_named(limit, peak, name):
    with pytest.raises(ValueError, match=name):
        fragmentation_room(limit, peak)
