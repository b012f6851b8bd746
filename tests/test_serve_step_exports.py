"""The names serve_step exported before split25 moved the result into serve_result still import from it
(review25c L3): an old import path keeps working."""


def test_serve_step_still_exports_what_it_did():
    from llmsizing import serve_engine, serve_result
    from llmsizing.serve_step import (BLOCK_SIZE, ENGINES, KV_FORMATS, STEP_OVERHEAD_S, WEIGHT_FORMATS,
                                      KVCapacity, Serving, serving_constants)

    assert (BLOCK_SIZE, KVCapacity, serving_constants) == (serve_engine.BLOCK_SIZE, serve_engine.KVCapacity,
                                                           serve_engine.serving_constants)
    assert Serving is serve_result.Serving and STEP_OVERHEAD_S == serve_result.STEP_OVERHEAD_S
    assert "bf16" in WEIGHT_FORMATS and "fp8" in KV_FORMATS and ENGINES
