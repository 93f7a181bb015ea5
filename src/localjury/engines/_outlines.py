"""A batched logits processor over Outlines' own engine (outlines-core).

Outlines 1.3.3's ``OutlinesCoreLogitsProcessor`` masks the logits one row at a time through
a ``torch.compile``-d kernel; on CPU that costs more than the forward pass of a small model
(measured: constrained generation at 0.37 judgments/s against 0.89 unconstrained, same
outputs). This processor keeps Outlines' index and guides (the same regex from
``build_regex_from_schema``, the same vocabulary from ``OutlinesCoreBackend``) but writes
every row's bitmask into one tensor and applies it to the whole batch in one eager op.
"""

from __future__ import annotations

import json
from typing import Any

import torch
from outlines.backends.outlines_core import OutlinesCoreBackend
from outlines_core import Guide, Index
from outlines_core.json_schema import build_regex_from_schema

#: The only whitespace allowed between JSON tokens: bounded, so the output length is too.
WHITESPACE = r"[ ]?"


class JsonSchemaIndex:
    """The compiled index of one JSON schema over one tokenizer's vocabulary."""

    def __init__(self, outlines_model: Any, schema: dict[str, Any]) -> None:
        backend = OutlinesCoreBackend(outlines_model)
        self.regex = build_regex_from_schema(json.dumps(schema), WHITESPACE)
        self.index = Index(self.regex, backend.vocabulary)

    def processor(self) -> BatchedGuideProcessor:
        """A fresh logits processor for one ``generate`` call."""
        return BatchedGuideProcessor(self.index)


class BatchedGuideProcessor:
    """Constrain every row of a batch to the index's language; a transformers logits processor."""

    def __init__(self, index: Index) -> None:
        self.index = index
        self.guides: list[Guide] | None = None
        self.mask: torch.Tensor | None = None
        self._shifts = torch.arange(32, dtype=torch.int32)

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        batch, vocab = scores.shape
        if self.guides is None:
            self.guides = [Guide(self.index) for _ in range(batch)]
            self.mask = torch.empty((batch, (vocab + 31) // 32), dtype=torch.int32)
        else:
            for guide, token in zip(self.guides, input_ids[:, -1].tolist(), strict=True):
                # A finished guide only accepts EOS; rows that already ended are fed padding,
                # which it must not advance on (cf. outlines-core issue #227).
                if not guide.is_finished() or guide.accepts_tokens([token]):
                    guide.advance(token_id=token, return_tokens=False)
        assert self.mask is not None
        ptr, width = self.mask.data_ptr(), self.mask.shape[1]
        for row, guide in enumerate(self.guides):
            guide.write_mask_into(ptr + row * width * 4, width, 4)
        allowed = ((self.mask.unsqueeze(-1) >> self._shifts) & 1).view(batch, -1)[:, :vocab].bool()
        if allowed.device != scores.device:
            allowed = allowed.to(scores.device, non_blocking=True)
        return scores.masked_fill(~allowed, float("-inf"))
