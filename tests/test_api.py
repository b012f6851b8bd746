"""The top-level API a reader can guess (issue 19): ``import llmsizing as L`` gives each chapter's main functions
and result types, and the old module path of chapter 15 still imports."""

import importlib
import inspect

import pytest

import llmsizing as L

# the names the house issue promises, as a reader would type them after reading the chapters
PROMISED = ("serving", "replicas_for", "serving_sweep", "finetune_memory", "lora_params", "communication",
            "step_time", "min_gpus", "plan", "training_time")


@pytest.mark.parametrize("name", PROMISED)
def test_promised_names_are_functions(name):
    obj = getattr(L, name)
    assert inspect.isfunction(obj), f"L.{name} is {type(obj).__name__}, not a function"
    assert name in L.__all__


def test_every_exported_name_exists_and_is_documented():
    assert len(L.__all__) == len(set(L.__all__)), "a name is exported twice"
    for name in L.__all__:
        obj = getattr(L, name)
        if inspect.isfunction(obj) or inspect.isclass(obj):
            assert (obj.__doc__ or "").strip(), f"L.{name} has no docstring"


def test_serving_is_the_function_after_every_import_of_the_old_path():
    from llmsizing.serving import replicas_for, serving   # the module's old name, kept as an alias
    importlib.import_module("llmsizing.serving")
    importlib.import_module("llmsizing.serve")
    assert serving is L.serving and replicas_for is L.replicas_for
    assert inspect.isfunction(L.serving)
    s = L.serving("llama-3-8b", "H100 SXM")
    assert s.itl_s > 0 and s.output_tokens_per_s > 0


def test_result_types_match_what_the_functions_return():
    assert isinstance(L.serving("llama-3-8b", "H100 SXM"), L.Serving)
    assert isinstance(L.training_time("llama-3-8b", tokens=1e9, gpu="H100 SXM", n_gpus=8, seq=4096), L.TrainingTime)
    assert isinstance(L.finetune_memory("llama-3-8b", method="lora", batch=1, seq=1024), L.FinetuneMemory)
    assert isinstance(L.step_time("llama-3-8b", "H100 SXM", L.Parallel(dp=8), batch=1, seq=4096), L.StepTime)
