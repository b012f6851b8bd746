"""The appendix's measured checks (issue 38): what thirteen of its entries were checked against, computed by
the modules that own them, the figures the page prints of them and the claims it makes in words. Split out of
:mod:`llmsizing.appendix`, which glues them (``appendix_values``, ``appendix_claims``, ``appendix_prose``)."""

from __future__ import annotations

__all__ = ["measured_checks", "measured_values", "measured_claims"]


def measured_checks():
    """What thirteen entries were checked against (chapters 4, 5, 7, 10, 16, 18, 19), as their owners compute
    it: one Hugging Face layer against autograd's saved tensors, autocast's copies, the staged runs, the LoRA
    steps' peaks, the RL steps against the parts' range, op SAC's saved bytes under tensor parallelism, DDP's
    copies of the gradients, the all-to-all's bytes on gloo, PEFT's k-bit preparation; the fused count and
    recomputation on chapter 5's stand-ins (``fused``) and Megatron-LM's SwiGLU (``swiglu``), a padded
    batch's layer (``mask``), and, for tensor parallelism, a torchtitan block's saved bytes per rank without
    recomputation (``tps``: :func:`~llmsizing.step_measurements.tp_saved_errors`) and the published
    tensor-parallel steps whose live peak was logged (``tp``: KempnerForge's, chapter 5)."""
    import pandas as pd

    from . import step_measurements
    from .layout_fits import published_measured_memory
    from .measured_traced import measured_memory_traced
    from .measurements import fused_formula_errors
    from .dist_compare import compare_all_to_all
    from .dp_prose import ddp_copy_checks
    from .finetune_base import kbit_prep_checks
    from .finetune_prose import lora_step_errors
    from .op_sac import op_sac_tp_measured
    from .rl import rl_checked
    from .stages import published_stage_checks
    from .step_measurements import (autocast_copy_errors, hf_layer_errors, masked_sdpa_errors,
                                    tp_saved_errors)

    lora = lora_step_errors()
    mm = published_measured_memory()
    tp = mm[(mm["statistic"] == "max_allocated") & mm["run"].str.contains("TP=")]
    traced = measured_memory_traced()          # (each run priced as its code runs: chapter 5)
    return dict(hfl=hf_layer_errors(), amp=autocast_copy_errors(), stages=published_stage_checks(),
                lora=lora[~lora["dropout"]], rl=rl_checked(), sac=op_sac_tp_measured(), ddp=ddp_copy_checks(),
                a2a=compare_all_to_all(), kbit=kbit_prep_checks(), fused=fused_formula_errors(),
                swiglu=pd.read_csv(step_measurements.FUSED_SWIGLU_CSV), mask=masked_sdpa_errors(),
                tps=tp_saved_errors(),
                tp=tp, tp_traced=tp["run"].map(traced.set_index("run")["traced_ratio"]))


def measured_values(m) -> dict[str, str]:
    """The figures of :func:`measured_checks`' checks, as the page prints them (the all-to-all's as chapter 18
    does)."""
    from .moe_case_prose import gloo_all_to_all_figures
    from .prose import number_word

    hfl, amp, st, lora, rl = m["hfl"], m["amp"], m["stages"], m["lora"], m["rl"]
    return {"app_hfl_n": f"{len(hfl)}", "app_hfl_exact": f"{(hfl['error'] == 0).sum()}",
            "app_hfl_err": f"{hfl['error'].abs().max():.2%}",
            "app_amp_n": f"{len(amp)}", "app_amp_end": f"{amp['forward_end_error'].abs().max():.2%}",
            "app_stage_n": number_word(len(st)), "app_stage_lo": f"{st['ratio'].min():.2f}",
            "app_stage_hi": f"{st['ratio'].max():.2f}",
            "app_lora_n": f"{len(lora)}", "app_lora_err": f"{lora['error'].abs().max():.1%}",
            "app_rl_n": f"{rl.n_rows}", "app_rl_inside": f"{rl.inside}",
            "app_rl_med": f"{rl.ratio_median:.2f}", "app_rl_lo": f"{rl.ratio_min:.2f}",
            "app_rl_hi": f"{rl.ratio_max:.2f}",
            "app_sac_n": f"{len(m['sac'])}", "app_ddp_n": f"{len(m['ddp'])}",
            **{f"app_a2a_{k[5:]}": t for k, t in gloo_all_to_all_figures(m["a2a"]).items()},
            "app_kbit_n": f"{len(m['kbit'])}", "app_kbit_base": f"{m['kbit']['base_error'].abs().max():.2%}",
            "app_kbit_copy": f"{m['kbit']['head_copy_error'].abs().max():.1%}",
            **_fused_values(m["fused"]["worst_error"].abs(), m["fused"]["configs"]),
            "app_mask_n": f"{len(m['mask'])}", "app_mask_padded": f"{m['mask']['mask_passed'].sum()}",
            "app_tp_lo": f"{-m['tps']['error'].max():.0%}", "app_tp_hi": f"{-m['tps']['error'].min():.0%}",
            "app_tp_kf": f"{m['tp']['ratio'].min():.2f} to {m['tp']['ratio'].max():.2f}",   # ch. 5's figures
            "app_tp_kf_traced": f"{m['tp_traced'].min():.2f} to {m['tp_traced'].max():.2f}"}


def _fused_values(worst, n) -> dict[str, str]:
    """The fused count without recomputation and each recomputation level, on chapter 5's stand-ins (worst
    error in size, per ``(recompute, attention)``; ``n`` the runs of each)."""
    return {"app_fused_n": f"{n['none'].sum()}", "app_fused_err": f"{worst['none'].max():.1%}",
            "app_rc_full": f"{worst['full'].max():.1%}", "app_rc_sel": f"{worst['selective', 'flash']:.1%}",
            "app_rc_eager": f"{worst['selective', 'eager']:.1%}"}


def measured_claims(m) -> dict[str, bool]:
    """What the page says in words of :func:`measured_checks`' checks."""
    hfl, amp, st, lora = m["hfl"], m["amp"], m["stages"], m["lora"]
    off = hfl[hfl["error"] != 0]
    near, skew = (m["a2a"].xs(r, level="routing") for r in ("hf-init", "skewed"))
    kb, fused, mega = m["kbit"], m["fused"]["worst_error"], m["swiglu"].query("variant == 'megatron-fused'")
    return {k: bool(v) for k, v in {
        "the Hugging Face layer count is exact but for GPT-2's bf16 layers, which it over-counts":
            len(off) < len(hfl) and (off["model_class"] == "GPT2LMHeadModel").all()
            and (off["mode"] == "bf16").all() and (off["error"] > 0).all(),
        "autocast's copies equal the largest measured, and are never below those at the forward's end":
            (amp["max_error"] == 0).all() and (amp["forward_end_error"].dropna() >= 0).all(),
        "a run in stages comes in below a published figure only at the paper's own MFUs":
            list(st.loc[st["ratio"] < 1, "check"]) == ["GPU-hours at the published MFU of each stage"],
        "the LoRA peak over-counts only without recomputation":
            ((lora["error"] > 0) == (lora["recompute"] == "none")).all(),
        "the RL step is optimistic at the median": m["rl"].ratio_median > 1,
        "op SAC's bytes are exactly what PyTorch's checkpoint kept in every measured layout":
            (m["sac"]["measured_bytes"] == m["sac"]["model_bytes"]).all(),
        "DDP's copies of the gradients are exactly the measured ones in every case":
            (m["ddp"]["measured"] == m["ddp"]["counted"]).all(),
        "the busiest rank sends more than S_a2a under either router, the skewed one's furthest":
            (near["ratio_busiest"] > 1).all() and skew["ratio_busiest"].min() > near["ratio_busiest"].max(),
        "k-bit preparation's base and head copy are never below the measured, its stream fp32 in every step":
            (kb["base_error"] >= 0).all() and (kb["head_copy_error"] >= 0).all() and kb["fp32_stream"].all(),
        "Megatron-LM's fused SwiGLU saved 3 f-wide columns, as counted, in every measured shape":
            len(mega) > 0 and (mega["saved_f_columns"] == 3).all(),
        "selective recomputation with eager attention is the stand-ins' one count low by more than 1%":
            fused["selective", "eager"] < -0.01 and (fused.drop(("selective", "eager")).abs() < 0.01).all(),
        "a padded batch's layer count is exact in every measured configuration":
            (m["mask"]["error"] == 0).all(),
        "the tensor-parallel count is low on each layout of torchtitan's block by exactly the named tensors, "
        "which stack='torchtitan' adds":
            (m["tps"]["error"] < 0).all() and (m["tps"]["untraced_bytes"] == 0).all()
            and (m["tps"]["torchtitan_bytes"] == m["tps"]["measured_bytes"]).all(),
        "KempnerForge's tensor-parallel steps all peak above the library's":
            len(m["tp"]) > 0 and m["tp"]["run"].str.startswith("KempnerForge").all()
            and (m["tp"]["ratio"] > 1).all(),
    }.items()}
