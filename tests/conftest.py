"""Shared pytest configuration for the unit tests.

Hypothesis runs a modest number of examples with no per-example deadline, so the whole unit-test suite stays
fast and deterministic enough for a 2-core CI machine (``derandomize`` makes every run draw the same
examples: a failure seen once is seen again).
"""

from hypothesis import HealthCheck, settings

settings.register_profile(
    "llmsizing",
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("llmsizing")


def pytest_configure(config):
    # Hypothesis keeps a small cache in .hypothesis/ (git-ignored); pyproject's norecursedirs replaces
    # pytest's defaults, so hypothesis warns that it skips that folder. Harmless: silence it.
    config.addinivalue_line("filterwarnings", "ignore:Skipping collection of '.hypothesis':UserWarning")
