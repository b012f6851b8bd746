"""Shared pytest configuration for the unit tests.

Hypothesis runs a modest number of examples with no per-example deadline, so the whole unit-test suite stays
fast and deterministic enough for a 2-core CI machine (``derandomize`` makes every run draw the same
examples: a failure seen once is seen again).
"""

from pathlib import Path

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


BROWSER_TESTS = Path(__file__).resolve().parent / "browser"


def pytest_ignore_collect(collection_path, config):
    """tests/browser (JupyterLab and the built site in Chromium) runs only when named on the command line
    (`make check-live`, `pytest tests/browser/...`); `pytest tests` and `make test` leave it out."""
    if Path(collection_path) != BROWSER_TESTS:
        return None
    for arg in config.args:
        target = Path(str(arg).split("::")[0]).resolve()
        if target == BROWSER_TESTS or BROWSER_TESTS in target.parents:
            return None
    return True


def pytest_configure(config):
    # Hypothesis keeps a small cache in .hypothesis/ (git-ignored); pyproject's norecursedirs replaces
    # pytest's defaults, so hypothesis warns that it skips that folder. Harmless: silence it.
    config.addinivalue_line("filterwarnings", "ignore:Skipping collection of '.hypothesis':UserWarning")


# ----------------------------------------------------------------------------- shared strategies
from hypothesis import strategies as st  # noqa: E402

from llmsizing import Model  # noqa: E402


@st.composite
def small_models(draw, *, gpt_like: bool | None = None) -> Model:
    """Random small decoder-only architectures (GQA, gated or not, either norm, biases, tying)."""
    heads = draw(st.sampled_from([1, 2, 4, 8, 16]))
    kv = draw(st.sampled_from([k for k in (1, 2, 4, 8, 16) if heads % k == 0]))
    head_dim = draw(st.sampled_from([8, 16, 32, 64]))
    return Model(
        "random", layers=draw(st.integers(1, 8)), hidden=heads * head_dim, heads=heads, kv_heads=kv,
        head_dim=head_dim, ffn_hidden=draw(st.sampled_from([16, 64, 128, 256, 512, 1024])),
        vocab=draw(st.integers(1, 5000)), gated_mlp=draw(st.booleans()), tied_embeddings=draw(st.booleans()),
        norm=draw(st.sampled_from(["layernorm", "rmsnorm"])), bias=draw(st.booleans()),
        qkv_bias=draw(st.booleans()), learned_pos=draw(st.booleans()), max_seq=draw(st.integers(1, 4096)),
    )


def pytest_terminal_summary(terminalreporter):
    """After a run that included tests/test_fuzz.py, say how many generated calls it made (``make fuzz``)."""
    import sys

    fuzz = sys.modules.get("test_fuzz")
    if fuzz is None or not fuzz.CALLS:
        return
    calls, returned = sum(fuzz.CALLS.values()), sum(fuzz.RETURNED.values())
    terminalreporter.write_line(f"fuzz: {calls:,} generated calls over {len(fuzz.CALLS)} functions "
                                f"({fuzz.EXAMPLES} examples each), {returned:,} returned a result, "
                                "the rest raised ValueError/TypeError/FileNotFoundError")
    cpu, wall, name = fuzz.SLOWEST
    terminalreporter.write_line(f"fuzz: slowest call {name} ({cpu:.2f} s CPU, {wall:.2f} s wall; the limit is "
                                f"{fuzz.CALL_LIMIT_S:g} s CPU per call)")
    if terminalreporter.config.getoption("verbose") > 0:
        for name in sorted(fuzz.CALLS):
            terminalreporter.write_line(f"  {name:<32s}{fuzz.CALLS[name]:>8,d} calls"
                                        f"{fuzz.RETURNED.get(name, 0):>8,d} returned")
