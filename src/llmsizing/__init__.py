"""llmsizing: how many GPUs does it take to train, fine-tune or serve a language model?

The library behind the book "How Many GPUs?". Every number in the book is computed here; the notebooks only
call it. Units follow :mod:`llmsizing.units` (GiB for memory, decimal GB/s and TFLOP/s).

``import llmsizing as L`` gives each chapter's main functions and result types, in book order below; the
modules (one per topic) hold the rest. The README's "Repository layout" says what lives where.
"""

import sys as _sys

# Units and the catalogues (data/models.csv, data/gpus.csv: a source and an as-of date on every row).
from .units import GB, GiB, fmt_bytes, fmt_count, fmt_gib
from .catalog import (GPU, get_gpu, get_model, gpu_table, list_gpus, list_models, model_entry, model_table,
                      prices_as_of)
from .precision import DTYPE_BYTES, FP8_SCHEMES, OPTIMIZERS, RECIPES, bytes_per_element

# Part I, one GPU (ch 1-5): parameters, bytes per parameter, inference memory, activations, the step's peak.
from .model import Model
from .memory import (ModelStates, TrainingMemory, max_micro_batch, model_states, recipe_tensor_table,
                     training_memory)
from .inference import InferenceMemory, inference_memory, kv_cache_bytes_per_token, weights_bytes
from .activations import ActivationMemory, activation_memory

# Part II, many GPUs (ch 6-9): links and rooflines, data/tensor/pipeline parallelism, the fewest GPUs.
from .hardware import INTER_NODE_GBPS_PER_GPU, decode_step_roofline, link_bandwidth_one_way_gbps
from .parallel import LLAMA3_RECIPE, Parallel, llama3_405b_layout, pipeline_bubble, pipeline_in_flight
from .comm import Communication, communication, step_compute_time_s
from .fewest_gpus import min_gpus
from .layouts import Plan, StepTime, step_time

# Part III, time and money (ch 10-14): FLOPs and MFU, training time, cost, the planner.
from .flops import forward_flops_per_token, training_flops_per_token
from .stages import Stage, StagedTrainingTime
from .time_cost import TrainingTime, cost_by_gpu, implied_mfu, training_time
from .planner import NoPlanError, plan
from .scaling import ComputeOptimal, compute_optimal, largest_compute_optimal, overtrained
from .reliability import Goodput, Interruptions, checkpoint_bytes, goodput, interruptions

# Part IV, serving and fine-tuning (ch 15-16).
from .serve import Serving, ServingPlan, replicas_for, serving, serving_cost_by_gpu, serving_sweep
from .serve_calibration import ServingRange, serving_range
from .finetune import FinetuneMemory, finetune_memory, lora_params

# Part VI, after pre-training (ch 19): RL post-training.
from .rl import RLRun, rl_run

# The serving module was `llmsizing.serving` until the top-level API took that name for the function:
# `from llmsizing.serving import serving` keeps working through this alias (no attribute is set, so
# `llmsizing.serving` stays the function).
_sys.modules[__name__ + ".serving"] = _sys.modules[__name__ + ".serve"]

__all__ = [
    # units and catalogues
    "GB", "GiB", "fmt_bytes", "fmt_count", "fmt_gib", "GPU", "get_gpu", "get_model", "gpu_table", "list_gpus",
    "list_models", "model_entry", "model_table", "prices_as_of", "DTYPE_BYTES", "FP8_SCHEMES", "OPTIMIZERS",
    "RECIPES", "bytes_per_element", "recipe_tensor_table",
    # Part I
    "Model", "ModelStates", "TrainingMemory", "max_micro_batch", "model_states", "training_memory",
    "InferenceMemory", "inference_memory", "kv_cache_bytes_per_token", "weights_bytes", "ActivationMemory",
    "activation_memory",
    # Part II
    "INTER_NODE_GBPS_PER_GPU", "decode_step_roofline", "link_bandwidth_one_way_gbps", "Parallel",
    "pipeline_bubble", "pipeline_in_flight", "LLAMA3_RECIPE", "llama3_405b_layout", "Communication",
    "communication", "step_compute_time_s", "Plan",
    "StepTime", "min_gpus", "step_time",
    # Part III
    "forward_flops_per_token", "training_flops_per_token", "Stage", "StagedTrainingTime", "TrainingTime",
    "cost_by_gpu", "implied_mfu", "training_time", "NoPlanError", "plan", "ComputeOptimal", "compute_optimal",
    "largest_compute_optimal", "overtrained", "Goodput", "Interruptions", "checkpoint_bytes", "goodput",
    "interruptions",
    # Part IV
    "Serving", "ServingPlan", "replicas_for", "serving", "serving_cost_by_gpu", "serving_sweep",
    "ServingRange", "serving_range", "FinetuneMemory", "finetune_memory", "lora_params",
    # Part VI
    "RLRun", "rl_run",
]
__version__ = "0.1.0"
