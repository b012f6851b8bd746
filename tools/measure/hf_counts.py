"""Sub-command ``hf-counts``: the exact parameter count of every Hugging Face family ``Model.from_hf_config``
reads, from transformers' own modules built on the meta device (issue 24).

For each family it builds ``<Family>ForCausalLM`` (the text model; Llama 4's ``Llama4ForCausalLM``, Gemma 3's
``Gemma3ForCausalLM``) from a config object, under ``torch.device("meta")``: random weights, nothing allocated,
nothing downloaded. Two kinds of config per family:

* ``small``: a few layers of tiny widths that switch on the family's odd parts (dense layers among MoE layers,
  ``mlp_only_layers``, interleaved MoE layers, ``q_lora_rank: null``, multi-query Falcon, biases, ...);
* ``published``: the shapes of released models, written here by hand from their ``config.json`` on the
  Hugging Face Hub as the model cards publish them (no hub access from this tool). ``published_params`` is the
  total the model card, paper or blog states (``published_rounded_to``: its rounding; 1 = exact), with
  ``published_source``. Where the meta-device count equals an exact published total (Mixtral-8x7B,
  DeepSeek-V3 without its MTP module, BLOOM), the shape written here is confirmed.

It writes data/hf_meta_param_counts.csv, one row per config::

  family, config_name, kind      model_type, the released model (or "small-..."), small/published
  model_class                    the transformers class built
  config_json                    every config field passed to the config class, as JSON (sorted keys)
  n_params                       sum(p.numel() for p in model.parameters()) (shared tensors once; buffers,
                                 such as DeepSeek-V3's e_score_correction_bias, are not parameters)
  routed_params, active_params   parameters of the routed experts (modules whose class name ends in
                                 ``Experts``: Mixtral's ``MixtralExperts``, JetMoE's ``JetMoeParallelExperts``
                                 of attention and MLP) and ``n_params`` less all but top-k / E of them
  n_persistent_buffers, persistent_buffers   numbers in the buffers saved in the state dict (the checkpoint)
                                 and their names with layer indices as ``*``: DeepSeek-V3's
                                 ``e_score_correction_bias`` (a router bias updated by a rule, not by gradients)
  published_params, published_rounded_to, published_active, published_source
  transformers_version, torch_version, measured_on

A few seconds for all rows (the 671B DeepSeek-V3 is the slowest: 61 layers of 256 experts' meta tensors).
"""

from __future__ import annotations

import json
import re

import torch

from .core import date_today, write_csv

_SMALL = dict(hidden_size=64, num_attention_heads=4, vocab_size=100, max_position_embeddings=64)

#: (family, config class, model class, config name, kind, kwargs, published_params, rounded_to, published_active,
#: source). Published shapes: the config.json of the named Hugging Face repository (values as released).
SPECS = [
    # ---------------------------------------------------------------- mixtures of experts
    ("mixtral", "MixtralConfig", "MixtralForCausalLM", "small-mixtral", "small",
     dict(_SMALL, num_hidden_layers=2, intermediate_size=96, num_key_value_heads=2, num_local_experts=4,
          num_experts_per_tok=2), None, None, None, ""),
    ("mixtral", "MixtralConfig", "MixtralForCausalLM", "Mixtral-8x7B-v0.1", "published",
     dict(vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
          num_key_value_heads=8, num_local_experts=8, num_experts_per_tok=2, max_position_embeddings=32768,
          sliding_window=None, tie_word_embeddings=False),
     46_702_792_704, 1, "12.9B", "mistralai/Mixtral-8x7B-v0.1 config.json; 46,702,792,704 = the issue's exact "
     "total (safetensors index), 12.9B active: Mistral AI, 'Mixtral of experts' blog (2023-12-11)"),
    ("mixtral", "MixtralConfig", "MixtralForCausalLM", "Mixtral-8x22B-v0.1", "published",
     dict(vocab_size=32768, hidden_size=6144, intermediate_size=16384, num_hidden_layers=56, num_attention_heads=48,
          num_key_value_heads=8, num_local_experts=8, num_experts_per_tok=2, max_position_embeddings=65536,
          tie_word_embeddings=False),
     141_000_000_000, 1_000_000_000, "39B", "mistralai/Mixtral-8x22B-v0.1 config.json; 141B total, 39B active: "
     "Mistral AI, 'Cheaper, Better, Faster, Stronger' blog (2024-04-17)"),
    ("jetmoe", "JetMoeConfig", "JetMoeForCausalLM", "small-jetmoe", "small",
     dict(vocab_size=100, hidden_size=64, num_hidden_layers=2, intermediate_size=96, num_key_value_heads=2,
          kv_channels=24, num_local_experts=4, num_experts_per_tok=2, max_position_embeddings=64,
          tie_word_embeddings=False), None, None, None, ""),
    ("jetmoe", "JetMoeConfig", "JetMoeForCausalLM", "JetMoE-8B", "published",
     dict(vocab_size=32000, hidden_size=2048, num_hidden_layers=24, intermediate_size=5632, num_key_value_heads=16,
          kv_channels=128, num_local_experts=8, num_experts_per_tok=2, max_position_embeddings=4096,
          activation_function="silu", tie_word_embeddings=True),
     8_500_000_000, 100_000_000, "2.2B", "jetmoe/jetmoe-8b config.json; 8.5B total, 2.2B active: Shen et al. 2024, "
     "arXiv:2404.07413, abstract and Table 1"),
    ("qwen2_moe", "Qwen2MoeConfig", "Qwen2MoeForCausalLM", "small-qwen2_moe", "small",
     dict(_SMALL, num_hidden_layers=4, intermediate_size=96, moe_intermediate_size=32,
          shared_expert_intermediate_size=48, num_key_value_heads=2, num_experts=4, num_experts_per_tok=2,
          decoder_sparse_step=2, mlp_only_layers=[3]), None, None, None, ""),
    ("qwen2_moe", "Qwen2MoeConfig", "Qwen2MoeForCausalLM", "Qwen1.5-MoE-A2.7B", "published",
     dict(vocab_size=151936, hidden_size=2048, intermediate_size=5632, moe_intermediate_size=1408,
          shared_expert_intermediate_size=5632, num_hidden_layers=24, num_attention_heads=16, num_key_value_heads=16,
          num_experts=60, num_experts_per_tok=4, decoder_sparse_step=1, max_position_embeddings=8192,
          tie_word_embeddings=False),
     14_300_000_000, 100_000_000, "2.7B", "Qwen/Qwen1.5-MoE-A2.7B config.json; 14.3B total, 2.7B activated: Qwen "
     "blog 'Qwen1.5-MoE' (2024-03-28)"),
    ("qwen3_moe", "Qwen3MoeConfig", "Qwen3MoeForCausalLM", "small-qwen3_moe", "small",
     dict(_SMALL, num_hidden_layers=3, intermediate_size=96, moe_intermediate_size=32, num_key_value_heads=2,
          head_dim=24, num_experts=4, num_experts_per_tok=2, mlp_only_layers=[0]), None, None, None, ""),
    ("qwen3_moe", "Qwen3MoeConfig", "Qwen3MoeForCausalLM", "Qwen3-30B-A3B", "published",
     dict(vocab_size=151936, hidden_size=2048, intermediate_size=6144, moe_intermediate_size=768,
          num_hidden_layers=48, num_attention_heads=32, num_key_value_heads=4, head_dim=128, num_experts=128,
          num_experts_per_tok=8, decoder_sparse_step=1, mlp_only_layers=[], max_position_embeddings=40960,
          tie_word_embeddings=False),
     30_500_000_000, 100_000_000, "3.3B", "Qwen/Qwen3-30B-A3B config.json; 30.5B total, 3.3B activated: its model "
     "card (2025-04-29)"),
    ("qwen3_moe", "Qwen3MoeConfig", "Qwen3MoeForCausalLM", "Qwen3-235B-A22B", "published",
     dict(vocab_size=151936, hidden_size=4096, intermediate_size=12288, moe_intermediate_size=1536,
          num_hidden_layers=94, num_attention_heads=64, num_key_value_heads=4, head_dim=128, num_experts=128,
          num_experts_per_tok=8, decoder_sparse_step=1, mlp_only_layers=[], max_position_embeddings=40960,
          tie_word_embeddings=False),
     235_000_000_000, 1_000_000_000, "22B", "Qwen/Qwen3-235B-A22B config.json; 235B total, 22B activated: its model "
     "card (2025-04-29)"),
    ("deepseek_v3", "DeepseekV3Config", "DeepseekV3ForCausalLM", "small-deepseek_v3", "small",
     dict(_SMALL, num_hidden_layers=3, first_k_dense_replace=1, intermediate_size=96, moe_intermediate_size=32,
          num_key_value_heads=4, n_routed_experts=4, n_shared_experts=2, n_group=1, topk_group=1,
          num_experts_per_tok=2, q_lora_rank=24, kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=16,
          v_head_dim=12), None, None, None, ""),
    ("deepseek_v3", "DeepseekV3Config", "DeepseekV3ForCausalLM", "DeepSeek-V3", "published",
     dict(vocab_size=129280, hidden_size=7168, intermediate_size=18432, moe_intermediate_size=2048,
          num_hidden_layers=61, num_attention_heads=128, num_key_value_heads=128, n_shared_experts=1,
          n_routed_experts=256, num_experts_per_tok=8, first_k_dense_replace=3, n_group=8, topk_group=4,
          q_lora_rank=1536, kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128,
          max_position_embeddings=163840, tie_word_embeddings=False),
     671_026_419_200, 1, "37B", "deepseek-ai/DeepSeek-V3 config.json (num_nextn_predict_layers=1: the MTP module "
     "is not built by transformers); 671,026,419,200 without MTP = the issue's exact total; 37B activated: "
     "DeepSeek-AI 2024, arXiv:2412.19437, Sec. 4.2"),
    ("deepseek_v2", "DeepseekV2Config", "DeepseekV2ForCausalLM", "small-deepseek_v2-lite", "small",
     dict(_SMALL, num_hidden_layers=3, first_k_dense_replace=1, intermediate_size=96, moe_intermediate_size=32,
          n_routed_experts=4, n_shared_experts=2, num_experts_per_tok=2, q_lora_rank=None, kv_lora_rank=16,
          qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=12), None, None, None, ""),
    ("deepseek_v2", "DeepseekV2Config", "DeepseekV2ForCausalLM", "DeepSeek-V2", "published",
     dict(vocab_size=102400, hidden_size=5120, intermediate_size=12288, moe_intermediate_size=1536,
          num_hidden_layers=60, num_attention_heads=128, num_key_value_heads=128, n_shared_experts=2,
          n_routed_experts=160, num_experts_per_tok=6, first_k_dense_replace=1, q_lora_rank=1536, kv_lora_rank=512,
          qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128, max_position_embeddings=163840,
          tie_word_embeddings=False),
     236_000_000_000, 1_000_000_000, "21B", "deepseek-ai/DeepSeek-V2 config.json; 236B total, 21B activated: "
     "DeepSeek-AI 2024, arXiv:2405.04434, abstract"),
    ("deepseek_v2", "DeepseekV2Config", "DeepseekV2ForCausalLM", "DeepSeek-V2-Lite", "published",
     dict(vocab_size=102400, hidden_size=2048, intermediate_size=10944, moe_intermediate_size=1408,
          num_hidden_layers=27, num_attention_heads=16, num_key_value_heads=16, n_shared_experts=2,
          n_routed_experts=64, num_experts_per_tok=6, first_k_dense_replace=1, q_lora_rank=None, kv_lora_rank=512,
          qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128, max_position_embeddings=163840,
          tie_word_embeddings=False),
     15_700_000_000, 100_000_000, "2.4B", "deepseek-ai/DeepSeek-V2-Lite config.json; 15.7B total, 2.4B activated: "
     "its model card / arXiv:2405.04434 App. B"),
    ("gpt_oss", "GptOssConfig", "GptOssForCausalLM", "small-gpt_oss", "small",
     dict(_SMALL, num_hidden_layers=3, intermediate_size=96, num_key_value_heads=2, head_dim=24,
          num_local_experts=4, num_experts_per_tok=2, sliding_window=16), None, None, None, ""),
    ("gpt_oss", "GptOssConfig", "GptOssForCausalLM", "gpt-oss-120b", "published",
     dict(vocab_size=201088, hidden_size=2880, intermediate_size=2880, num_hidden_layers=36, num_attention_heads=64,
          num_key_value_heads=8, head_dim=64, num_local_experts=128, num_experts_per_tok=4, sliding_window=128,
          max_position_embeddings=131072, tie_word_embeddings=False),
     116_830_000_000, 10_000_000, "5.13B", "openai/gpt-oss-120b config.json; 116.83B total, 5.13B active: OpenAI, "
     "'gpt-oss-120b & gpt-oss-20b Model Card' (2025-08-05), Table 1"),
    ("gpt_oss", "GptOssConfig", "GptOssForCausalLM", "gpt-oss-20b", "published",
     dict(vocab_size=201088, hidden_size=2880, intermediate_size=2880, num_hidden_layers=24, num_attention_heads=64,
          num_key_value_heads=8, head_dim=64, num_local_experts=32, num_experts_per_tok=4, sliding_window=128,
          max_position_embeddings=131072, tie_word_embeddings=False),
     20_910_000_000, 10_000_000, "3.61B", "openai/gpt-oss-20b config.json; 20.91B total, 3.61B active: the same "
     "model card, Table 1"),
    ("llama4_text", "Llama4TextConfig", "Llama4ForCausalLM", "small-llama4-interleaved", "small",
     dict(_SMALL, num_hidden_layers=4, intermediate_size=96, intermediate_size_mlp=128, num_key_value_heads=2,
          head_dim=16, num_local_experts=4, num_experts_per_tok=1, interleave_moe_layer_step=2), None, None, None, ""),
    ("llama4_text", "Llama4TextConfig", "Llama4ForCausalLM", "Llama-4-Scout-17B-16E (text)", "published",
     dict(vocab_size=202048, hidden_size=5120, intermediate_size=8192, intermediate_size_mlp=16384,
          num_hidden_layers=48, num_attention_heads=40, num_key_value_heads=8, head_dim=128, num_local_experts=16,
          num_experts_per_tok=1, interleave_moe_layer_step=1, max_position_embeddings=10485760,
          attention_chunk_size=8192, tie_word_embeddings=False),
     109_000_000_000, 1_000_000_000, "17B", "meta-llama/Llama-4-Scout-17B-16E config.json (text_config); 109B total "
     "WITH the vision encoder, 17B active: Meta, 'The Llama 4 herd' (2025-04-05)"),
    ("llama4_text", "Llama4TextConfig", "Llama4ForCausalLM", "Llama-4-Maverick-17B-128E (text)", "published",
     dict(vocab_size=202048, hidden_size=5120, intermediate_size=8192, intermediate_size_mlp=16384,
          num_hidden_layers=48, num_attention_heads=40, num_key_value_heads=8, head_dim=128, num_local_experts=128,
          num_experts_per_tok=1, interleave_moe_layer_step=2, max_position_embeddings=1048576,
          attention_chunk_size=8192, tie_word_embeddings=False),
     400_000_000_000, 1_000_000_000, "17B", "meta-llama/Llama-4-Maverick-17B-128E config.json (text_config); 400B "
     "total WITH the vision encoder, 17B active: Meta, 'The Llama 4 herd' (2025-04-05)"),
    # ---------------------------------------------------------------- dense
    ("qwen3", "Qwen3Config", "Qwen3ForCausalLM", "small-qwen3-bias", "small",
     dict(_SMALL, num_hidden_layers=2, intermediate_size=96, num_key_value_heads=2, head_dim=24,
          attention_bias=True, tie_word_embeddings=True), None, None, None, ""),
    ("qwen3", "Qwen3Config", "Qwen3ForCausalLM", "Qwen3-8B", "published",
     dict(vocab_size=151936, hidden_size=4096, intermediate_size=12288, num_hidden_layers=36, num_attention_heads=32,
          num_key_value_heads=8, head_dim=128, max_position_embeddings=40960, tie_word_embeddings=False),
     8_200_000_000, 100_000_000, "", "Qwen/Qwen3-8B config.json; 8.2B: its model card"),
    ("qwen3", "Qwen3Config", "Qwen3ForCausalLM", "Qwen3-0.6B", "published",
     dict(vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
          num_key_value_heads=8, head_dim=128, max_position_embeddings=40960, tie_word_embeddings=True),
     600_000_000, 100_000_000, "", "Qwen/Qwen3-0.6B config.json; 0.6B: its model card"),
    ("gemma", "GemmaConfig", "GemmaForCausalLM", "small-gemma", "small",
     dict(_SMALL, num_hidden_layers=2, intermediate_size=96, num_key_value_heads=1, head_dim=32), None, None, None, ""),
    ("gemma", "GemmaConfig", "GemmaForCausalLM", "gemma-7b", "published",
     dict(vocab_size=256000, hidden_size=3072, intermediate_size=24576, num_hidden_layers=28, num_attention_heads=16,
          num_key_value_heads=16, head_dim=256, max_position_embeddings=8192),
     8_540_000_000, 10_000_000, "", "google/gemma-7b config.json; 8.54B: Gemma Team 2024, arXiv:2403.08295, Table 2 "
     "(7,751M non-embedding + 787M embedding)"),
    ("gemma2", "Gemma2Config", "Gemma2ForCausalLM", "small-gemma2", "small",
     dict(_SMALL, num_hidden_layers=3, intermediate_size=96, num_key_value_heads=2, head_dim=16, sliding_window=16),
     None, None, None, ""),
    ("gemma2", "Gemma2Config", "Gemma2ForCausalLM", "gemma-2-9b", "published",
     dict(vocab_size=256000, hidden_size=3584, intermediate_size=14336, num_hidden_layers=42, num_attention_heads=16,
          num_key_value_heads=8, head_dim=256, sliding_window=4096, query_pre_attn_scalar=256,
          attn_logit_softcapping=50.0, final_logit_softcapping=30.0, max_position_embeddings=8192),
     9_240_000_000, 10_000_000, "", "google/gemma-2-9b config.json; 9.24B: Gemma Team 2024, arXiv:2408.00118, "
     "Table 2 (8,324M non-embedding + 918M embedding)"),
    ("gemma3_text", "Gemma3TextConfig", "Gemma3ForCausalLM", "small-gemma3", "small",
     dict(_SMALL, num_hidden_layers=7, intermediate_size=96, num_key_value_heads=2, head_dim=16, sliding_window=16),
     None, None, None, ""),
    ("gemma3_text", "Gemma3TextConfig", "Gemma3ForCausalLM", "gemma-3-1b", "published",
     dict(vocab_size=262144, hidden_size=1152, intermediate_size=6912, num_hidden_layers=26, num_attention_heads=4,
          num_key_value_heads=1, head_dim=256, sliding_window=512, max_position_embeddings=32768),
     1_000_000_000, 100_000_000, "", "google/gemma-3-1b-pt config.json; '1B': Gemma Team 2025, arXiv:2503.19786, "
     "Table 1 (698M non-embedding + 302M embedding)"),
    ("gemma3_text", "Gemma3TextConfig", "Gemma3ForCausalLM", "gemma-3-27b (text)", "published",
     dict(vocab_size=262208, hidden_size=5376, intermediate_size=21504, num_hidden_layers=62, num_attention_heads=32,
          num_key_value_heads=16, head_dim=128, sliding_window=1024, query_pre_attn_scalar=168,
          max_position_embeddings=131072),
     27_000_000_000, 1_000_000_000, "", "google/gemma-3-27b-pt config.json (text_config); '27B' with the 417M vision "
     "encoder: arXiv:2503.19786, Table 1 (25,600M non-embedding + 1,416M embedding)"),
    ("phi3", "Phi3Config", "Phi3ForCausalLM", "small-phi3", "small",
     dict(_SMALL, num_hidden_layers=2, intermediate_size=96, num_key_value_heads=2, pad_token_id=0),
     None, None, None, ""),
    ("phi3", "Phi3Config", "Phi3ForCausalLM", "Phi-3-mini-4k", "published",
     dict(vocab_size=32064, hidden_size=3072, intermediate_size=8192, num_hidden_layers=32, num_attention_heads=32,
          num_key_value_heads=32, max_position_embeddings=4096, sliding_window=2047, tie_word_embeddings=False,
          pad_token_id=32000),
     3_800_000_000, 100_000_000, "", "microsoft/Phi-3-mini-4k-instruct config.json; 3.8B: Abdin et al. 2024, "
     "arXiv:2404.14219"),
    ("olmo2", "Olmo2Config", "Olmo2ForCausalLM", "small-olmo2", "small",
     dict(_SMALL, num_hidden_layers=2, intermediate_size=96, num_key_value_heads=2, pad_token_id=0),
     None, None, None, ""),
    ("olmo2", "Olmo2Config", "Olmo2ForCausalLM", "OLMo-2-1124-7B", "published",
     dict(vocab_size=100352, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
          num_key_value_heads=32, max_position_embeddings=4096, tie_word_embeddings=False, pad_token_id=100277),
     7_300_000_000, 100_000_000, "", "allenai/OLMo-2-1124-7B config.json; 7.3B: OLMo Team 2024, arXiv:2501.00656"),
    ("nemotron", "NemotronConfig", "NemotronForCausalLM", "small-nemotron", "small",
     dict(_SMALL, num_hidden_layers=2, intermediate_size=96, num_key_value_heads=2, head_dim=24, mlp_bias=True),
     None, None, None, ""),
    ("nemotron", "NemotronConfig", "NemotronForCausalLM", "Minitron-8B", "published",
     dict(vocab_size=256000, hidden_size=4096, intermediate_size=16384, num_hidden_layers=32, num_attention_heads=48,
          num_key_value_heads=8, head_dim=128, max_position_embeddings=4096, partial_rotary_factor=0.5,
          tie_word_embeddings=False),
     8_000_000_000, 1_000_000_000, "", "nvidia/Minitron-8B-Base config.json; '8B': Muralidharan et al. 2024, "
     "arXiv:2407.14679"),
    ("gpt_neox", "GPTNeoXConfig", "GPTNeoXForCausalLM", "small-gpt_neox-nobias", "small",
     dict(_SMALL, num_hidden_layers=2, intermediate_size=96, attention_bias=False, use_parallel_residual=False),
     None, None, None, ""),
    ("gpt_neox", "GPTNeoXConfig", "GPTNeoXForCausalLM", "pythia-1.4b", "published",
     dict(vocab_size=50304, hidden_size=2048, intermediate_size=8192, num_hidden_layers=24, num_attention_heads=16,
          max_position_embeddings=2048, rotary_pct=0.25, tie_word_embeddings=False),
     1_414_647_808, 1, "", "EleutherAI/pythia-1.4b config.json; 1,414,647,808: Biderman et al. 2023, "
     "arXiv:2304.01373, Table 1 (total params)"),
    ("gpt_neox", "GPTNeoXConfig", "GPTNeoXForCausalLM", "gpt-neox-20b", "published",
     dict(vocab_size=50432, hidden_size=6144, intermediate_size=24576, num_hidden_layers=44, num_attention_heads=64,
          max_position_embeddings=2048, rotary_pct=0.25, tie_word_embeddings=False),
     20_000_000_000, 1_000_000_000, "", "EleutherAI/gpt-neox-20b config.json; '20B': Black et al. 2022, "
     "arXiv:2204.06745"),
    ("falcon", "FalconConfig", "FalconForCausalLM", "small-falcon-mq", "small",
     dict(_SMALL, num_hidden_layers=2, multi_query=True, parallel_attn=True, bias=True), None, None, None, ""),
    ("falcon", "FalconConfig", "FalconForCausalLM", "small-falcon-serial", "small",
     dict(_SMALL, num_hidden_layers=2, multi_query=False, parallel_attn=False, alibi=True, ffn_hidden_size=96),
     None, None, None, ""),
    ("falcon", "FalconConfig", "FalconForCausalLM", "falcon-7b", "published",
     dict(vocab_size=65024, hidden_size=4544, num_hidden_layers=32, num_attention_heads=71, multi_query=True,
          parallel_attn=True, new_decoder_architecture=False, bias=False, alibi=False),
     7_000_000_000, 1_000_000_000, "", "tiiuae/falcon-7b config.json; '7B': its model card (Almazrouei et al. 2023, "
     "arXiv:2311.16867)"),
    ("falcon", "FalconConfig", "FalconForCausalLM", "falcon-40b", "published",
     dict(vocab_size=65024, hidden_size=8192, num_hidden_layers=60, num_attention_heads=128, num_kv_heads=8,
          new_decoder_architecture=True, parallel_attn=True, bias=False, alibi=False),
     40_000_000_000, 1_000_000_000, "", "tiiuae/falcon-40b config.json; '40B': its model card"),
    ("opt", "OPTConfig", "OPTForCausalLM", "small-opt", "small",
     dict(_SMALL, num_hidden_layers=2, ffn_dim=96, word_embed_proj_dim=64), None, None, None, ""),
    ("opt", "OPTConfig", "OPTForCausalLM", "opt-1.3b", "published",
     dict(vocab_size=50272, hidden_size=2048, ffn_dim=8192, num_hidden_layers=24, num_attention_heads=32,
          max_position_embeddings=2048, word_embed_proj_dim=2048, do_layer_norm_before=True),
     1_300_000_000, 100_000_000, "", "facebook/opt-1.3b config.json; '1.3B': Zhang et al. 2022, arXiv:2205.01068, "
     "Table 1"),
    ("bloom", "BloomConfig", "BloomForCausalLM", "small-bloom", "small",
     dict(n_layer=2, hidden_size=64, n_head=4, vocab_size=100), None, None, None, ""),
    ("bloom", "BloomConfig", "BloomForCausalLM", "bloom-560m", "published",
     dict(n_layer=24, hidden_size=1024, n_head=16, vocab_size=250880),
     559_214_592, 1, "", "bigscience/bloom-560m config.json; 559,214,592: its model card ('Model Architecture')"),
    ("bloom", "BloomConfig", "BloomForCausalLM", "bloom (176B)", "published",
     dict(n_layer=70, hidden_size=14336, n_head=112, vocab_size=250880),
     176_247_271_424, 1, "", "bigscience/bloom config.json; 176,247,271,424: its model card ('Model Architecture')"),
]


def _moe_counts(cfg) -> tuple[int, int]:
    """The config object's routed expert count and top-k (0, 0 for a dense model)."""
    for key in ("num_local_experts", "num_experts", "n_routed_experts"):
        e = getattr(cfg, key, None)
        if isinstance(e, int) and e:
            return e, int(cfg.num_experts_per_tok)
    return 0, 0


def cmd_hf_counts(args):
    """Sub-command ``hf-counts``: build every family's ForCausalLM on the meta device and count its parameters."""
    import transformers
    transformers.logging.set_verbosity_error()
    today = date_today()
    rows = []
    specs = [s for s in SPECS if s[4] == "small"] if args.quick else SPECS
    for family, cfg_cls, model_cls, cname, kind, kw, pub, rounded, active, source in specs:
        cfg = getattr(transformers, cfg_cls)(**kw)
        with torch.device("meta"):
            model = getattr(transformers, model_cls)(cfg)
        n = sum(p.numel() for p in model.parameters())
        # the routed experts' weights: the parameters of modules whose class is an experts container
        # (...Experts, ...ParallelExperts), and the top-k share of them a token uses, per container
        e, k = _moe_counts(cfg)
        routed = sum(p.numel() for mod in model.modules() if type(mod).__name__.endswith("Experts")
                     for p in mod.parameters(recurse=False))
        n_active = n - routed + routed * k // e if e else n
        persistent = set(model.state_dict())        # buffers saved with the weights (not rotary caches)
        bufs = [(name, b.numel()) for name, b in model.named_buffers() if name in persistent]
        kinds = sorted({re.sub(r"\.\d+\.", ".*.", name) for name, _ in bufs})
        rows.append({"family": family, "config_name": cname, "kind": kind, "model_class": model_cls,
                     "config_json": json.dumps({"model_type": family, **kw}, sort_keys=True), "n_params": n,
                     "n_persistent_buffers": sum(b for _, b in bufs), "persistent_buffers": ";".join(kinds),
                     "routed_params": routed, "active_params": n_active,
                     "published_params": "" if pub is None else pub,
                     "published_rounded_to": "" if rounded is None else rounded,
                     "published_active": active or "", "published_source": source,
                     "transformers_version": transformers.__version__, "torch_version": torch.__version__,
                     "measured_on": today})
        note = ""
        if pub is not None:
            stored = n + sum(k for _, k in bufs)
            note = "published ok" if pub in (round(n / rounded) * rounded, round(stored / rounded) * rounded) \
                else f"published {pub:,} (rounded {rounded:,})"
        print(f"{family:12s} {cname:34s} {n:>18,} +{sum(k for _, k in bufs):>7,} buffers  {note}", flush=True)
        del model
    write_csv(args.out, rows)
    print(f"wrote {len(rows)} rows to {args.out}")
