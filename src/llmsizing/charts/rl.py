"""Figures of Part VI, after pre-training (chapter 19, "After pre-training"): where an RL step's time goes.
No formula lives here: the numbers come from :func:`llmsizing.rl.rl_run`."""

from __future__ import annotations

from matplotlib.figure import Figure

from .base import FixedView, View, _fast_hbars, _fixed_figure, blank_figure

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


#: The caps on the longest response that chapter 19's length figure draws (the default run's 3,968 among
#: them).
RL_LENGTH_CAPS = (1024, 2048, 3968, 8192, 16384)


def rl_length_points(response_mean: int = 932, response_max: int = 3968, caps=RL_LENGTH_CAPS):
    """The two panels of :func:`render_rl_response_length`: ``(title, [(mean, cap), ...])`` for the mean held
    at ``response_mean`` (at most the cap) and for the mean grown with the cap in the default run's proportion
    (``cap x response_mean / response_max``, rounded to whole tokens)."""
    if not caps or any(int(c) != c or c < 1 for c in caps):
        raise ValueError(f"caps must be positive whole token counts; got {caps!r}")
    if not 1 <= response_mean <= response_max:
        raise ValueError(f"response_mean must be 1 to response_max ({response_max}); got {response_mean}")
    caps = tuple(int(c) for c in caps)
    scale = response_mean / response_max
    return ((f"mean held at {response_mean:,} tokens: only the tail grows",
             [(min(response_mean, c), c) for c in caps]),
            (f"mean grows with the cap ({response_mean:,} of {response_max:,})",
             [(max(1, round(c * scale)), c) for c in caps]))


def render_rl_response_length(model: str = "llama-3-8b", gpu: str = "H100 SXM", n_gpus: int = 16,
                              prompts_per_step: int = 128, samples_per_prompt: int = 16, prompt: int = 128,
                              response_mean: int = 932, response_max: int = 3968,
                              caps=RL_LENGTH_CAPS) -> FixedView:
    """Chapter 19, "Why generation dominates": one RL step's phases (:func:`~llmsizing.rl.rl_run`) as stacked
    bars of seconds, for each cap on the longest response in ``caps``. Left, the mean response stays at
    ``response_mean``, so only the tail grows; right, the mean grows with the cap in the default run's
    proportion (``response_mean / response_max``), so the tokens trained on grow too. Each bar is labelled
    with generation's share of the step; the default run's bar is outlined."""
    import numpy as np

    from ..rl import rl_run

    panels = rl_length_points(response_mean, response_max, caps)
    runs = [[rl_run(model, gpu=gpu, n_gpus=n_gpus, prompts_per_step=prompts_per_step,
                    samples_per_prompt=samples_per_prompt, prompt=prompt, response=lengths)
             for lengths in points] for _, points in panels]
    names = [k for k in runs[0][0].phases if any(r.phases[k] > 0 for rs in runs for r in rs)]
    width, height = 8.4, 3.4
    fig = blank_figure(width, height)
    fig.subplots_adjust(left=0.75 / width, right=1 - 0.15 / width, bottom=0.95 / height, top=1 - 0.3 / height,
                        wspace=0.08)
    axes = fig.subplots(1, 2, sharey=True, squeeze=False)[0]   # one scale: the default bar is one height
    xs = np.arange(len(caps))
    lines = [f"{model} on {n_gpus} x {gpu}, {prompts_per_step * samples_per_prompt:,} rollouts per step, "
             f"prompt {prompt:,} tokens; seconds per step by cap on the longest response:"]
    for ax, (title, points), rs in zip(axes, panels, runs):
        bottom = np.zeros(len(rs))
        for k in names:
            h = np.array([r.phases[k] for r in rs])
            ax.bar(xs, h, bottom=bottom, width=0.7, color=RL_PHASE_COLORS[k], label=k.replace("_", " "))
            bottom += h
        for x, r, (mean, cap) in zip(xs, rs, points):
            ax.text(x, r.step_s, f"{r.generation_share:.0%}", ha="center", va="bottom", fontsize=7)
            if (mean, cap) == (response_mean, response_max):
                ax.bar(x, r.step_s, width=0.7, fill=False, edgecolor="black", linewidth=1.2)
        ax.set_xticks(xs, [f"{cap:,}\nmean {mean:,}" for mean, cap in points], fontsize=7)
        ax.set_title(title, fontsize=8, loc="left")
        ax.tick_params(labelsize=7)
        ax.spines[["top", "right"]].set_visible(False)
        lines.append(f"  {title}:")
        lines += [f"    cap {cap:>6,} mean {mean:>5,}: step {r.step_s:6.1f} s, generation "
                  f"{r.phases['generation']:6.1f} s ({r.generation_share:.0%}), "
                  f"update {r.phases['update']:5.1f} s, "
                  f"{r.engine_batch} in flight" for (mean, cap), r in zip(points, rs)]
    axes[0].set_ylim(0, max(r.step_s for rs in runs for r in rs) * 1.08)
    axes[0].set_ylabel("seconds per RL step", fontsize=8)
    fig.supxlabel("longest response (tokens), and the mean response; above each bar: generation's share "
                  "of the step;\noutlined: the default run", fontsize=7, y=0.01)
    axes[1].legend(fontsize=8, frameon=False, loc="upper left", ncol=1)
    return FixedView(fig, "\n".join(lines))
