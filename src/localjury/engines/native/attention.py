"""SDPA attention for decoding with grouped-query models, without copying the KV cache.

transformers 5.19's ``sdpa`` attention repeats the key/value heads of a grouped-query model
(``repeat_kv``: expand + reshape, i.e. a full copy of the KV cache) whenever a mask is given,
which on CPU is every padded batch. At each decode step that copies the whole cache once
per layer; on SmolLM2-135M (9 query heads over 3 KV heads) it was half of all generation
time. For one query token the copy is avoidable: fold the query heads of each KV group into
the query-length axis, ``(B, H, 1, D) -> (B, KVH, H/KVH, D)``, and let the mask broadcast.
Prefill (several query tokens) goes through the stock ``sdpa`` function unchanged.

The KV cache itself: transformers' ``DynamicLayer`` appends each step's token with
``torch.cat``, a copy of the layer's whole cache per layer per step. A decode loop knows how
many tokens it can still add, so :func:`reserve` gives every layer buffers with that room and
writes each new token in place.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import AttentionInterface
from transformers.cache_utils import DynamicLayer
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


class ReservedLayer(DynamicLayer):
    """A ``DynamicLayer`` whose keys and values are views of buffers with room for more tokens:
    an update writes the new tokens into the room instead of concatenating (on the 1.5B judge
    at 48 rows x 450 tokens, the concatenations copied ~0.6 GB a step, a quarter of the
    profiled CPU time). Full, it grows by half again (a copy, as cat would make)."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, room: int) -> None:
        super().__init__()
        self.dtype, self.device = keys.dtype, keys.device
        self.is_initialized = True
        self._length = keys.shape[-2]
        self._keys = self._buffer(keys, room)
        self._values = self._buffer(values, room)
        self._views()

    @staticmethod
    def _buffer(states: torch.Tensor, room: int) -> torch.Tensor:
        batch, heads, length, dim = states.shape
        buffer = states.new_empty((batch, heads, length + room, dim))
        buffer[:, :, :length] = states
        return buffer

    def _views(self) -> tuple[torch.Tensor, torch.Tensor]:
        self.keys = keys = self._keys[:, :, : self._length]
        self.values = values = self._values[:, :, : self._length]
        return keys, values

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Write the new tokens' keys and values after the cached ones; return all of them."""
        new = key_states.shape[-2]
        if self._length + new > self._keys.shape[-2]:
            room = new + self._keys.shape[-2] // 2
            keys, values = self._views()
            self._keys, self._values = self._buffer(keys, room), self._buffer(values, room)
        self._keys[:, :, self._length : self._length + new] = key_states
        self._values[:, :, self._length : self._length + new] = value_states
        self._length += new
        return self._views()

    def get_seq_length(self) -> int:
        """The number of cached tokens."""
        return self._length

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        """Keep only the ``indices`` rows, in that order. Where every row that moves comes from
        past the new end (a row that ended replaced by one from the end), only those rows are
        copied, in place; otherwise the whole cache is gathered (with its room)."""
        order = indices.tolist()
        rows = len(order)
        moves = [(to, of) for to, of in enumerate(order) if to != of]
        if all(of >= rows for _, of in moves) and len(set(order)) == rows:
            if moves:  # one gather and one write per tensor, whatever the rows moved
                to = torch.tensor([t for t, _ in moves], device=self._keys.device)
                of = torch.tensor([o for _, o in moves], device=self._keys.device)
                self._keys[to, :, : self._length] = self._keys[of, :, : self._length]
                self._values[to, :, : self._length] = self._values[of, :, : self._length]
            self._keys, self._values = self._keys[:rows], self._values[:rows]
        else:
            self._keys, self._values = self._keys[indices], self._values[indices]
        self._views()


def reserve(cache: Any, room: int) -> None:
    """Give each plain (full-attention) layer of a ``DynamicCache`` room for ``room`` more
    tokens; sliding-window and other layers are left as they are."""
    for i, layer in enumerate(cache.layers):
        keys, values = layer.keys, layer.values
        if type(layer) is DynamicLayer and keys is not None and values is not None and keys.numel():
            cache.layers[i] = ReservedLayer(keys, values, room)
