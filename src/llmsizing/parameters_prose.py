"""Chapter 1's parameter counts in sentences: the tables it shows, every number its prose quotes (issue 38).

Each function serves one section of ``book/01_parameters.ipynb`` and returns a
:class:`~llmsizing.prose.ChapterText`: the table the section shows (``data["table"]``) and the texts its prose
quotes, keyed by name (``values``, glued as ``ch1_<name>``): the catalogue against the published counts
(:func:`published_counts_prose`), the ``12 L h^2`` shortcut (:func:`shortcut_prose`) and the mixtures of
experts (:func:`moe_counts_prose`). The prose's readings ("one recorded miss", "a few per cent at most", "the
36.7B does not round from the count") are checked against the numbers, and :class:`ProseOutOfDate` names the
one that no longer holds. Nothing here computes a new quantity: the sentences only format and compare what the
library's functions return.
"""

from __future__ import annotations

import json
import math

import pandas as pd

from .catalog import DATA_DIR
from .flops import matmul_params
from .model import Model, approx_params_12lh2
from .model_catalog import get_model, list_models, model_entry
from .mtp import mtp_param_counts
from .prose import ChapterText, ProseOutOfDate
from .prose import prose_check as _prose_check
from .units import fmt_count

__all__ = ["ProseOutOfDate", "published_counts_prose", "shortcut_prose", "moe_counts_prose", "non_embedding",
           "DS_ACTIVE_PUBLISHED", "DS_MTP_PUBLISHED", "DS_MTP_ACTIVE_PUBLISHED"]

#: DeepSeek-V3's README_WEIGHTS.md (deepseek-ai/DeepSeek-V3, as released): main model "Activation parameters:
#: 36.7B (including 0.9B for Embedding and 0.9B for the output Head)"; MTP module "11.5B unique parameters"
#: (without the shared embedding and head) and "Activation parameters: 2.4B" (with both).
#: tests/test_config_families.py derives each from the config by hand.
DS_ACTIVE_PUBLISHED, DS_MTP_PUBLISHED, DS_MTP_ACTIVE_PUBLISHED = 36.7e9, 11.5e9, 2.4e9
_MODEL_TABLE = "images/model_table.png"       # the source column of the Megatron-LM table's rows


def _says(holds, what: str) -> None:
    _prose_check(holds, what, "chapter 1's prose")


def _rounds(n: int, e) -> bool:
    """Whether ``n`` parameters round to catalogue entry ``e``'s published count at its precision."""
    return round(n / e.published_rounded_to) * e.published_rounded_to == e.published_params


def published_counts_prose() -> ChapterText:
    """Every catalogue model's computed count against its published one (the table the chapter shows) and the
    texts of its prose: the one recorded miss (the Megatron-LM table's 1.7B row) and its table's other rows,
    the exact and rounded agreements, Qi et al.'s vocabulary range and GPT-3's position table. Raises
    :class:`ProseOutOfDate` if another count disagrees or the same table's other rows stop agreeing."""
    rows = []
    for name in list_models():
        e = model_entry(name)
        n = e.model.n_params
        rows.append({"model": name, "computed": f"{n:,}", "reference": f"{e.published_params:,}",
                     "difference": f"{n - e.published_params:+,}",
                     "agrees": ("exactly" if e.published_rounded_to == 1 else
                                f"after rounding to {fmt_count(e.published_rounded_to, 0)}")
                     if _rounds(n, e) else "NO"})
    check = pd.DataFrame(rows).set_index("model")
    # one recorded miss (tests/test_catalog.py, a strict xfail): the Megatron-LM table's 1.7B row
    misses = check.index[check["agrees"] == "NO"]
    _says(list(misses) == ["mcore-gpt-1.7b"], f"only mcore-gpt-1.7b disagrees, not {list(misses)}")
    miss = model_entry(misses[0])
    t = {"miss_name": misses[0], "miss_printed": fmt_count(miss.published_params, 1),
         "miss_computed": fmt_count(miss.model.n_params, 4),
         "miss_over": fmt_count(miss.model.n_params - miss.published_params - miss.published_rounded_to / 2,
                                1),
         "miss_no_table": fmt_count(miss.model.with_(learned_pos=False).n_params, 4)}
    # the other rows from the same table (same source): how many round to their figure with and without it
    same = [model_entry(n) for n in check.index if n != misses[0] and _MODEL_TABLE in model_entry(n).source]
    _says(_MODEL_TABLE in miss.source and same, "the miss's table has other rows")
    _says(all(_rounds(e.model.n_params, e) and _rounds(e.model.with_(learned_pos=False).n_params, e)
              for e in same), "the table's other rows agree with the position table and without it")
    with_table = sum(_rounds(e.model.n_params, e) for e in same)
    without = sum(_rounds(e.model.with_(learned_pos=False).n_params, e) for e in same)
    t.update(miss_others=f"{len(same)}", miss_others_with=f"{with_table}", miss_others_without=f"{without}",
             n_exact=f"{(check['agrees'] == 'exactly').sum()}", n_models=f"{len(check)}",
             n_rounded=f"{(check['agrees'].str.startswith('after')).sum()}")
    # exact references that are transformers' own module built on the meta device (the row's source says so)
    n_meta = sum(model_entry(n).published_rounded_to == 1 and "meta device" in model_entry(n).source
                 and "safetensors" not in model_entry(n).source for n in check.index)  # not a checkpoint's
    t["n_meta"] = f"{n_meta}"
    t.update(_zb_texts([n for n in check.index if n.startswith("zb-gpt-")]))
    gpt3 = get_model("gpt3-175b")
    pos = gpt3.param_breakdown()["position"]
    t.update(gpt3_n=f"{gpt3.n_params:,}", gpt3_pos=f"{pos:,}", gpt3_pos_share=f"{pos / gpt3.n_params:.3%}")
    return ChapterText(t, data={"table": check})


def _zb_texts(zb_names) -> dict:
    """Qi et al. 2023 (arXiv:2401.10241) Table 3 prints the four sizes but not the vocabulary. The reference
    script (data/models.csv, source column) ties a SentencePiece vocabulary; GPT-2's padded 50,304 would miss
    the printed figures, by more than a check to the billion sees."""
    t = {}
    for key, name in (("a", "zb-gpt-14.6b"), ("b", "zb-gpt-28.3b")):
        zb, printed = get_model(name), model_entry(name).published_params
        t[f"zb_{key}"] = fmt_count(zb.n_params)
        t[f"zb_{key}_printed"] = fmt_count(printed, 1)
        t[f"zb_{key}_gpt2"] = fmt_count(zb.with_(vocab=50_304).n_params)
        t[f"zb_{key}_gap"] = f"{zb.with_(vocab=50_304).n_params / printed - 1:.1%}"
    t["zb_vocab"] = f"{zb.vocab:,}"
    t["zb_precision"] = f"{model_entry(name).published_rounded_to / 1e9:g}B"
    # the tied vocabularies V with which every shape rounds to its printed size (the count is linear in V)
    v_lo, v_hi = [], []
    for name in zb_names:
        e = model_entry(name)
        per_token = e.model.with_(vocab=2).n_params - e.model.with_(vocab=1).n_params     # h: tied
        rest = e.model.n_params - e.model.vocab * per_token
        v_lo.append(math.ceil((e.published_params - e.published_rounded_to / 2 - rest) / per_token))
        v_hi.append(math.floor((e.published_params + e.published_rounded_to / 2 - rest) / per_token))
    t["zb_v_lo"], t["zb_v_hi"] = f"{max(v_lo):,}", f"{min(v_hi):,}"
    # how far a count could move if the vocabulary were anywhere else in that range (the smallest model most)
    move = max(max(min(v_hi) - m.vocab, m.vocab - max(v_lo)) * m.hidden / m.n_params
               for m in map(get_model, zb_names))
    t["zb_v_move"] = f"{move:.1%}"
    return t


def non_embedding(m: Model) -> int:
    """Kaplan et al.'s N: every parameter but the token and position embeddings (and an untied LM head)."""
    parts = m.param_breakdown()
    return m.n_params - parts["embedding"] - parts["position"] - parts["lm_head"]


def shortcut_prose() -> ChapterText:
    """``12 L h^2`` against every dense model's exact count (the table the chapter shows) and the texts of
    its prose. Raises :class:`ProseOutOfDate` where a reading fails: the GPT-style giants within a few per
    cent, the one large over-count a GQA block with an ungated MLP of width 4h, one ungated GQA model
    under-counted, GPT-2, Llama-3-8B and Qwen2-7B under-counted against Kaplan's N too, Llama-3.1-405B close
    by luck."""
    rows = []
    for name in list_models(moe=False):    # mixtures of experts: their own section
        m = get_model(name)
        approx, outside = approx_params_12lh2(m), m.n_params - m.layers * m.params_per_layer
        rows.append({"model": name, "exact N": fmt_count(m.n_params), "12 L h^2": fmt_count(approx),
                     "error (%)": round(100 * (approx - m.n_params) / m.n_params, 1),
                     "one block / h^2": round(m.params_per_layer / m.hidden**2, 2),
                     "outside blocks (%)": round(100 * outside / m.n_params, 1),
                     "vs non-embedding N (%)": round(100 * (approx - non_embedding(m)) / non_embedding(m),
                                                     1)})
    shortcut = pd.DataFrame(rows).set_index("model")
    err = shortcut["error (%)"]
    t = {f"err_{key}": f"{abs(err[name]):.1f}%"
         for key, name in (("gpt2", "gpt2"), ("gpt3", "gpt3-175b"), ("l3_8b", "llama-3-8b"),
                           ("qwen", "qwen2-7b"))}
    l405 = get_model("llama-3.1-405b")
    t["err_405"] = f"{abs(approx_params_12lh2(l405) - l405.n_params) / l405.n_params:.3%}"
    big = err[[n for n in err.index if get_model(n).n_params >= 10e9]].abs()
    odd = err[["gpt2", "llama-3-8b", "qwen2-7b"]].abs()  # small, with a large vocabulary or a wide MLP
    t["err_big"] = f"{big.max():.1f}%"   # err is already rounded to 0.1%
    # the GPT-style giants: plain (ungated) MLP, one KV head per query head, 100B and up
    models = {n: get_model(n) for n in err.index}
    giants = [n for n, m in models.items()
              if not m.gated_mlp and m.kv_heads == m.heads and m.n_params >= 100e9]
    _says("gpt3-175b" in giants and err[giants].abs().max() < 2.5,
          "the GPT-style giants miss by a few per cent at most")
    t.update(n_giants=f"{len(giants)}", err_giants=f"{err[giants].abs().max():.1f}%")
    over = err.idxmax()                   # the largest over-count
    m_over = models[over]
    _says(err[over] > 10 and not m_over.gated_mlp and m_over.kv_heads < m_over.heads
          and m_over.ffn_hidden == 4 * m_over.hidden and (err[err.index != over] < 1).all(),
          "GQA and an ungated MLP of width 4h make the one large over-count's block smaller than 12 h^2")
    t.update(over_name=over, over_err=f"{err[over]:.1f}%", over_kv=f"{m_over.kv_heads}",
             over_block=f"{shortcut.loc[over, 'one block / h^2']:.1f}")
    # ... but the same kind of block under a large vocabulary still ends under: the one such model named
    ungated_gqa = [n for n, m in models.items() if not m.gated_mlp and m.kv_heads < m.heads]
    under_gqa = [n for n in ungated_gqa if err[n] < 0]
    _says(over in ungated_gqa and len(under_gqa) == 1 and shortcut.loc[under_gqa[0], "one block / h^2"] < 12,
          "one ungated GQA model is under-counted")
    under = under_gqa[0]
    t.update(under_name=under, under_err=f"{abs(err[under]):.1f}%",
             under_block=f"{shortcut.loc[under, 'one block / h^2']:.1f}",
             under_vocab=f"{models[under].vocab // 1000}K",
             under_outside=f"{shortcut.loc[under, 'outside blocks (%)']:.0f}%",
             err_odd=f"{odd.min():.0f}–{odd.max():.0f}%",
             qwen_block=f"{shortcut.loc['qwen2-7b', 'one block / h^2']:.1f}",
             qwen_outside=f"{shortcut.loc['qwen2-7b', 'outside blocks (%)']:.0f}%",
             n_under=f"{(err < 0).sum()}", n_dense=f"{len(err)}")
    ne = shortcut["vs non-embedding N (%)"]
    _says((ne[["gpt2", "llama-3-8b", "qwen2-7b"]] < 0).all(),
          "against Kaplan's N the shortcut still under-counts GPT-2, Llama-3-8B and Qwen2-7B")
    for key, name in (("gpt2", "gpt2"), ("l3_8b", "llama-3-8b"), ("qwen", "qwen2-7b")):
        t[f"ne_{key}"] = f"{abs(ne[name]):.1f}%"
    _says(shortcut.loc["llama-3.1-405b", "one block / h^2"] < 12 and abs(err["llama-3.1-405b"]) < 0.1,
          "Llama-3.1-405B's blocks are smaller than 12 h^2, yet its total lands close")
    return ChapterText(t, data={"table": shortcut})


def moe_counts_prose() -> ChapterText:
    """Every mixture of experts' total and active counts (the table the chapter shows) and the texts of its
    prose: Mixtral's and DeepSeek-V3's shares, DeepSeek's published active and MTP counts against the
    library's, and the config reader against transformers' modules built on the meta device
    (``data/hf_meta_param_counts.csv``). Raises :class:`ProseOutOfDate` where a reading fails."""
    rows = []
    for name in list_models(moe=True):
        m = get_model(name)
        rows.append({"model": name, "experts (top-k)": f"{m.experts} ({m.experts_per_token})",
                     "shared": m.shared_experts, "MoE layers": f"{m.n_moe_layers} of {m.layers}",
                     "total": f"{m.n_params:,}", "active": fmt_count(m.active_params),
                     "active without input embedding": fmt_count(matmul_params(m)),
                     "active share (%)": round(100 * m.active_params / m.n_params, 1)})
    moe = pd.DataFrame(rows).set_index("model")
    mx, ds = get_model("mixtral-8x7b"), get_model("deepseek-v3")
    mx_moe = mx.moe_breakdown()
    t = {"mx_total": f"{mx.n_params:,}", "mx_active": f"{mx.active_params:,}",
         "mx_share": f"{mx.active_params / mx.n_params:.0%}",
         "mx_expert": f"{mx_moe['routed_experts'] // (mx.n_moe_layers * mx.experts):,}",
         "mx_routed": f"{mx_moe['routed_experts'] / mx.n_params:.0%}", "ds_total": f"{ds.n_params:,}",
         "ds_total_short": fmt_count(ds.n_params, 0), "ds_active": fmt_count(ds.active_params),
         "ds_share": f"{ds.active_params / ds.n_params:.1%}",
         "ds_routed": f"{ds.moe_breakdown()['routed_experts'] / ds.n_params:.0%}",
         "oss_noemb": fmt_count(matmul_params(get_model("gpt-oss-120b"))),
         "q3_active": fmt_count(get_model("qwen3-30b-a3b").active_params),
         "q3_noemb": fmt_count(matmul_params(get_model("qwen3-30b-a3b")))}
    ds_parts, ds_mtp = ds.param_breakdown(), mtp_param_counts(ds)
    ds_vocab = ds_parts["embedding"]                                  # one vocabulary matrix (= the head's)
    _says(ds_parts["lm_head"] == ds_vocab and matmul_params(ds) == ds.active_params - ds_vocab,
          "DeepSeek-V3's head is one more vocabulary matrix")
    ds_mtp_active = ds_mtp["block_active"] + 2 * ds_vocab             # with the shared embedding and head
    _says(round(ds_mtp["block"], -8) == DS_MTP_PUBLISHED
          and round(ds_mtp_active, -8) == DS_MTP_ACTIVE_PUBLISHED
          and round(ds.active_params, -8) != DS_ACTIVE_PUBLISHED,
          "the MTP figures round from the count without the projection, the 36.7B does not")
    gap = ds.active_params - DS_ACTIVE_PUBLISHED
    t.update(ds_emb_head=fmt_count(ds_parts["embedding"] + ds_parts["lm_head"]), ds_gap=f"{gap / 1e9:.2f}B",
             ds_gap_pct=f"{ds.active_params / DS_ACTIVE_PUBLISHED - 1:.1%}",
             ds_vocab=f"{ds_vocab / 1e9:.2f}B",
             ds_gap_share=f"{gap / ds_vocab:.0%}", ds_one=fmt_count(matmul_params(ds)),
             ds_one_pct=f"{DS_ACTIVE_PUBLISHED / matmul_params(ds) - 1:.1%}",
             mtp_block=fmt_count(ds_mtp["block"]),
             mtp_active=fmt_count(ds_mtp_active), mtp_proj=f"{ds_mtp['projection'] / 1e9:.2f}B",
             ds_attn=fmt_count(ds_parts["attention"]),
             ds_mlp_active=fmt_count(ds.active_params - ds_parts["attention"] - ds_parts["norms"]
                                     - ds_parts["embedding"] - ds_parts["lm_head"]))
    # every family the config reader takes, against transformers' own modules built on the meta device
    meta = pd.read_csv(DATA_DIR / "hf_meta_param_counts.csv")
    _says(all(Model.from_hf_config(json.loads(c)).n_params == n + b
              for c, n, b in zip(meta["config_json"], meta["n_params"], meta["n_persistent_buffers"])),
          "the config reader counts every family as transformers' own modules do")
    t.update(meta_rows=f"{len(meta)}", meta_families=f"{meta['family'].nunique()}",
             meta_hf=", ".join(sorted(meta["transformers_version"].unique())),
             meta_torch=", ".join(sorted(meta["torch_version"].unique())),    # what it ran with
             meta_on=", ".join(sorted(meta["measured_on"].unique())))
    return ChapterText(t, data={"table": moe})
