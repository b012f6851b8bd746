"""Part VI, "After pre-training": the widget of chapter 19.

* chapter 19, :func:`rl_widget`: pick a model, a GPU and a pool, the rollouts of a step (prompts, samples per
  prompt, response lengths), GRPO or PPO, colocated or split (and how far off policy) and see where an RL
  step's time goes and what a run of so many steps costs in GPU-hours.
"""

from __future__ import annotations

import ipywidgets as W

from .. import charts
from ..catalog import list_gpus, list_models
from .controls import _choice, _style
from .dashboard import KEPT_ANSWERS, Dashboard

#: The pool sizes the widget offers: 1 to 1,024 GPUs.
RL_GPUS = tuple(2**k for k in range(11))
#: The ways to lay out the pool the widget offers: (colocated, off_policy_steps) for each label.
RL_MODES = {"colocated": (True, 0), "split": (False, 0), "split, 1 off": (False, 1),
            "split, 2 off": (False, 2)}
#: Response lengths the widget offers (tokens): mean and longest.
RL_LENGTHS = (128, 256, 512, 932, 1024, 2048, 3968, 4096, 8192, 16384, 32768)


def rl_widget(model: str = "llama-3-8b") -> Dashboard:
    """Chapter 19: model x GPU x pool x rollouts x response lengths x algorithm x colocated/split -> the RL
    step's phases and the run's GPU-hours (:func:`~llmsizing.charts.render_rl_step`). Starts at
    :data:`~llmsizing.charts.RL_DEFAULT` (the chapter's checked figure). A setting the library refuses (a
    mean longer than the longest response, an engine that does not fit) shows its
    message instead of a figure."""
    d = charts.RL_DEFAULT
    controls = {
        "model": W.Dropdown(options=list_models(), value=model, description="model", **_style()),
        "gpu": W.Dropdown(options=list_gpus(), value=d["gpu"], description="GPU", **_style()),
        "n_gpus": W.SelectionSlider(options=list(RL_GPUS), value=d["n_gpus"], description="GPUs", **_style()),
        "prompts_per_step": W.SelectionSlider(options=[8, 16, 32, 64, 128, 256, 512, 1024],
                                              value=d["prompts_per_step"], description="prompts/step",
                                              **_style()),
        "samples_per_prompt": W.SelectionSlider(options=[1, 2, 4, 8, 16, 32, 64],
                                                value=d["samples_per_prompt"], description="samples/prompt",
                                                **_style()),
        "response_mean": W.SelectionSlider(options=list(RL_LENGTHS), value=d["response_mean"],
                                           description="mean response", **_style()),
        "response_max": W.SelectionSlider(options=list(RL_LENGTHS), value=d["response_max"],
                                          description="longest", **_style()),
        "algorithm": _choice(["grpo", "ppo"], d["algorithm"], "algorithm"),
        "mode": W.Dropdown(options=list(RL_MODES), value=_mode(d["colocated"], d["off_policy_steps"]),
                           description="pools", **_style()),
        "steps": W.SelectionSlider(options=[100, 300, 1000, 3000, 10000], value=d["steps"],
                                   description="steps", **_style()),
    }

    def render(model, gpu, n_gpus, prompts_per_step, samples_per_prompt, response_mean, response_max,
               algorithm, mode, steps, into=None):
        colocated, off_policy_steps = RL_MODES[mode]
        return charts.render_rl_step(model, gpu, n_gpus=n_gpus, prompts_per_step=prompts_per_step,
                                     samples_per_prompt=samples_per_prompt, prompt=d["prompt"],
                                     response_mean=response_mean, response_max=response_max,
                                     algorithm=algorithm, colocated=colocated,
                                     off_policy_steps=off_policy_steps, steps=steps, into=into)

    return Dashboard(render, controls, keep=KEPT_ANSWERS)    # (a function of the controls' values)


def _mode(colocated: bool, off_policy_steps: int) -> str:
    """The label of :data:`RL_MODES` for a pool layout."""
    return next(k for k, v in RL_MODES.items() if v == (colocated, off_policy_steps))
