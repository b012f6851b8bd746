"""llmsizing: how many GPUs does it take to train, fine-tune or serve a language model?

The library behind the book "How Many GPUs?". Every number in the book is computed here; the notebooks only
call it. Units follow :mod:`llmsizing.units` (GiB for memory, decimal GB/s and TFLOP/s).
"""

from .activations import ActivationMemory, activation_memory
from .comm import Communication, communication, step_compute_time_s
from .catalog import GPU, get_gpu, get_model, gpu_table, list_gpus, list_models, model_entry, model_table
from .finetune import FinetuneMemory, finetune_memory, lora_params
from .flops import forward_flops_per_token, training_flops_per_token
from .inference import InferenceMemory, inference_memory, kv_cache_bytes_per_token, weights_bytes
from .hardware import INTER_NODE_GBPS_PER_GPU, link_bandwidth_one_way_gbps
from .layouts import Plan, min_gpus
from .memory import ModelStates, TrainingMemory, model_states, training_memory
from .model import Model
from .parallel import Parallel, pipeline_bubble, pipeline_in_flight
from .planner import plan
from .precision import DTYPE_BYTES, OPTIMIZERS, RECIPES, bytes_per_element
from .time_cost import TrainingTime, training_time
from .units import GB, GiB, fmt_bytes, fmt_count, fmt_gib

__all__ = [
    "ActivationMemory", "activation_memory", "GPU", "get_gpu", "get_model", "gpu_table", "list_gpus",
    "list_models", "model_entry", "model_table", "forward_flops_per_token", "training_flops_per_token",
    "InferenceMemory", "inference_memory", "kv_cache_bytes_per_token", "weights_bytes", "ModelStates",
    "TrainingMemory", "model_states", "training_memory", "Model", "Parallel", "DTYPE_BYTES", "OPTIMIZERS",
    "RECIPES", "bytes_per_element", "GB", "GiB", "fmt_bytes", "fmt_count", "fmt_gib",
    "Communication", "communication", "step_compute_time_s", "INTER_NODE_GBPS_PER_GPU",
    "link_bandwidth_one_way_gbps", "Plan", "min_gpus", "pipeline_bubble", "pipeline_in_flight",
    "TrainingTime", "training_time", "plan", "FinetuneMemory", "finetune_memory", "lora_params",
]
__version__ = "0.1.0"
