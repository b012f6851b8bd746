"""Training compute per token, including recomputation (used by chapter 4; the FLOPs/MFU chapter builds on it).

Source: Kaplan et al. 2020 and Hoffmann et al. 2022 for C = 6N per token (forward 2N, backward 4N);
Korthikanti et al. 2022, Sec. 5 (and Narayanan et al. 2021, Eq. 3) for the attention term and for full
recomputation adding one more forward pass (8N instead of 6N).
"""

from __future__ import annotations

from ._validate import check_choice, check_int
from .catalog import resolve_model
from .model import Model

RECOMPUTE = ("none", "selective", "full")


def forward_flops_per_token(model: Model | str, *, seq: int) -> float:
    """Forward FLOPs per token: 2 per weight of the matrix multiplies (embedding lookup excluded, LM head
    included) plus attention's ``QK^T`` and ``attn @ V``: ``4 * seq * heads * head_dim`` per layer
    (no causal-mask saving, as in Narayanan et al. 2021)."""
    model = resolve_model(model)
    seq = check_int("seq", seq)
    parts = model.param_breakdown()
    # the input embedding is a lookup, not a matmul; with tied embeddings the same matrix IS the LM head
    matmul_params = model.n_params - parts["position"] - (0 if model.tied_embeddings else parts["embedding"])
    attention = 4 * seq * model.heads * model.head_dim * model.layers
    return 2 * matmul_params + attention


def training_flops_per_token(model: Model | str, *, seq: int, recompute: str = "none") -> float:
    """Training FLOPs per token: forward x 3 (backward costs two forwards), plus the recomputed part:
    ``"full"`` one more forward (about 8N instead of 6N), ``"selective"`` the attention core again."""
    model = resolve_model(model)
    check_choice("recompute", recompute, RECOMPUTE)
    fwd = forward_flops_per_token(model, seq=seq)
    extra = {"none": 0.0,
             "selective": 4 * seq * model.heads * model.head_dim * model.layers,
             "full": fwd}[recompute]
    return 3 * fwd + extra
