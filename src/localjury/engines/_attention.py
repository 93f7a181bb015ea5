"""SDPA attention for decoding with grouped-query models, without copying the KV cache.

transformers 5.19's ``sdpa`` attention repeats the key/value heads of a grouped-query model
(``repeat_kv``: expand + reshape, i.e. a full copy of the KV cache) whenever a mask is given,
which on CPU is every padded batch. At each decode step that copies the whole cache once
per layer; on SmolLM2-135M (9 query heads over 3 KV heads) it was half of all generation
time. For one query token the copy is avoidable: fold the query heads of each KV group into
the query-length axis, ``(B, H, 1, D) -> (B, KVH, H/KVH, D)``, and let the mask broadcast.
Prefill (several query tokens) goes through the stock ``sdpa`` function unchanged.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

NAME = "localjury_grouped_sdpa"


def grouped_sdpa_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """Drop-in for transformers' sdpa attention; same arguments and output layout."""
    batch, heads, q_len, dim = query.shape
    kv_heads = key.shape[1]
    if q_len != 1 or heads == kv_heads or kwargs.get("position_bias") is not None or kwargs.get("cache") is not None:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, is_causal=is_causal, **kwargs
        )
    # repeat_kv orders heads as kv_head * n_rep + r, so a view groups them the same way.
    grouped = query.view(batch, kv_heads, heads // kv_heads, dim)
    mask = attention_mask
    if mask is not None:
        mask = mask[:, :, -1:, : key.shape[-2]]  # (B, 1, 1, S): broadcasts over the folded heads
    out = torch.nn.functional.scaled_dot_product_attention(
        grouped, key, value, attn_mask=mask, dropout_p=dropout, scale=scaling
    )
    return out.reshape(batch, heads, 1, dim).transpose(1, 2).contiguous(), None


def register() -> str:
    """Register the attention (and its mask builder) with transformers; return its name."""
    AttentionInterface.register(NAME, grouped_sdpa_attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(NAME, sdpa_mask)
    return NAME
