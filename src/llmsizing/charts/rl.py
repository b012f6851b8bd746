"""Figures of Part VI, after pre-training (chapter 19, "After pre-training"): where an RL step's time goes.
No formula lives here: the numbers come from :func:`llmsizing.rl.rl_run`."""

from __future__ import annotations

from matplotlib.figure import Figure

from .base import FixedView, View, _fast_hbars, _fixed_figure

#: The phase colours of chapter 19's figure (Okabe-Ito, as the rest of the book).
RL_PHASE_COLORS = {"generation": "#D55E00", "log_probs": "#0072B2", "reference": "#56B4E9",
                   "values": "#CC79A7", "reward": "#009E73", "update": "#E69F00", "weight_sync": "#000000",
                   "evaluation": "#F0E442"}

#: Chapter 19's default run: NeMo RL's published Llama 3.1 8B GRPO benchmark (v0.4: 16 H100s, 2,048
#: rollouts per step, responses of 932 tokens on average and up to 3,968), here as 128 prompts x 16 samples,
#: 1,000 steps.
RL_DEFAULT = dict(model="llama-3-8b", gpu="H100 SXM", n_gpus=16, prompts_per_step=128, samples_per_prompt=16,
                  prompt=128, response_mean=932, response_max=3968, algorithm="grpo", colocated=True,
                  off_policy_steps=0, steps=1000)


def render_rl_step(model: str = "llama-3-8b", gpu: str = "H100 SXM", n_gpus: int = 16,
                   prompts_per_step: int = 128, samples_per_prompt: int = 16, prompt: int = 128,
                   response_mean: int = 932, response_max: int = 3968, algorithm: str = "grpo",
                   colocated: bool = True, off_policy_steps: int = 0, steps: int = 1000, *,
                   into: Figure | None = None) -> View:
    """Chapter 19: one RL step's phases (:func:`~llmsizing.rl.rl_run`) as bars of seconds, each with the
    range of the part that prices it (a black line from the fast to the slow end), and a summary: the step,
    the GPU-hours of ``steps`` steps with their range, the memory check and the engine's batch."""
    import numpy as np

    from ..rl import rl_run

    r = rl_run(model, gpu=gpu, n_gpus=n_gpus, prompts_per_step=prompts_per_step,
               samples_per_prompt=samples_per_prompt, prompt=prompt, response=(response_mean, response_max),
               steps=steps, algorithm=algorithm, colocated=colocated, off_policy_steps=off_policy_steps)
    names = list(r.phases)
    fig, ax = _fixed_figure(7.2, 3.0, into=into, left=0.16, right=0.97, bottom=0.21, top=0.88)
    ys = np.arange(len(names))
    _fast_hbars(ax, ys, [r.phases[k] for k in names], colors=[RL_PHASE_COLORS[k] for k in names])
    ax.hlines(ys, [r.phases_low[k] for k in names], [r.phases_high[k] for k in names], color="black",
              lw=1.2)                       # one collection, not a line per phase: a widget redraw draws less
    ax.set_yticks(ys, [k.replace("_", " ") for k in names], fontsize=8)
    ax.invert_yaxis()
    # (each line is the range of the part that prices the phase, serving's or training's; their ends added up
    # give the step's, which is no measured range of an RL step: chapter 19)
    ax.set_xlabel("seconds per RL step (line: the range of the part that prices each phase, not a measured "
                  f"range of the RL step);\n{r.steps:,} steps = {r.gpu_hours:,.0f} GPU-hours", fontsize=8)
    pools = ("one pool of " + str(r.n_gpus) if r.colocated
             else f"{r.gen_gpus} generating + {r.train_gpus} training")
    ax.set_title(f"{r.model}, {r.algorithm.upper()} on {pools} x {r.gpu}: step {r.step_s:,.0f} s, "
                 f"generation {r.generation_share:.0%}", fontsize=8, loc="left")
    mode = ("colocated" if r.colocated else "split pools"
            + (f", {r.off_policy_steps} step(s) off policy" if r.off_policy_steps else ", on policy"))
    lines = [f"{r.model} on {r.n_gpus} x {r.gpu}, {r.algorithm.upper()}, {mode}: {r.rollouts:,} rollouts "
             f"per step ({prompts_per_step} prompts x {samples_per_prompt}), prompt {r.prompt:,} tokens, "
             f"responses {r.response_mean:,.0f} on average and {r.response_max:,} at most",
             f"  engines: {r.engines} of tp={r.gen_tp}, {r.engine_batch} sequences in flight each "
             f"(KV room for {r.engine_max_batch}), {r.decode_steps:,.0f} decode steps",
             "  phases (s): " + ", ".join(f"{k.replace('_', ' ')} {v:,.1f}" for k, v in r.phases.items()),
             f"  step {r.step_s:,.1f} s (the parts' ranges added up: {r.step_s_low:,.1f} to "
             f"{r.step_s_high:,.1f}); {r.steps:,} "
             f"steps = {r.days:,.1f} days, {r.gpu_hours:,.0f} GPU-hours ({r.gpu_hours_low:,.0f} to "
             f"{r.gpu_hours_high:,.0f}), ${r.cost_usd:,.0f}",
             f"  trainer memory {r.train_bytes_per_gpu / 2**30:,.1f} GiB per GPU of "
             f"{r.memory_bytes_per_gpu / 2**30:,.1f}: {'fits' if r.fits else 'does NOT fit'}"]
    return FixedView(fig, "\n".join(lines))
