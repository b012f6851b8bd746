"""Chapter 14's one rule for a claim with no stated bound (:func:`llmsizing.audit_readings.favourable_point`),
worked by hand: inside a range the claim is its own point; outside every range the nearest end on a log scale
wins; bad input names the parameter."""

import pytest

from llmsizing.audit_readings import favourable_point, offload_fit


def test_a_claim_inside_one_reading_is_judged_at_itself():
    assert favourable_point(4000, [(1000, 3000), (3500, 5000)]) == 4000


def test_outside_every_range_the_nearest_end_on_a_log_scale_wins():
    # 4,000 against (5,000, 6,000) and (1,000, 3,000): |ln(4000/5000)| = 0.223 < |ln(4000/3000)| = 0.288
    assert favourable_point(4000, [(5000, 6000), (1000, 3000)]) == 5000
    # 2,000 against (1,000, 1,500) and (3,000, 4,000): ln(2000/1500) = 0.288 < ln(3000/2000) = 0.405
    assert favourable_point(2000, [(3000, 4000), (1000, 1500)]) == 1500


@pytest.mark.parametrize("claimed, ranges, name", [
    (0, [(1, 2)], "claimed"), (-3, [(1, 2)], "claimed"), (1.0, [], "ranges"),
    (1.0, [(2, 1)], "ranges[0]"), (1.0, [(1, 2), (0, 3)], "ranges[1] low"),
])
def test_bad_input_names_the_parameter(claimed, ranges, name):
    with pytest.raises(ValueError, match=name.replace("[", r"\[").replace("]", r"\]")):
        favourable_point(claimed, ranges)


def test_offload_fit_checks_the_gpu_count():
    with pytest.raises((ValueError, TypeError), match="n_gpus"):
        offload_fit("llama-3-8b", "H100 SXM", 0)
