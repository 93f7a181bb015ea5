"""Reading hidden states through vLLM's own load: the output of chosen transformer blocks at a
prompt's last token, for decision heads (:mod:`localjury.votes.heads`).

vLLM has no API for a decoder block's output, and its pooling runner would load the model a
second time and give the final, normed layer only. So :class:`LayerWatch` is mixed into vLLM's
worker (its ``worker_extension_cls``, the documented way to add worker methods) and puts a
forward hook on each wanted block; :meth:`VllmEngine.hidden_states` calls its methods by name
through ``LLM.collective_rpc`` (plain arguments, no pickled code). A block of vLLM's decoders
returns ``(hidden_states, residual)`` with the residual addition deferred to the next block's
fused norm: the block's output, as transformers gives it, is their sum.

Hooks fire only in eager mode: torch.compile and CUDA graphs run the blocks as one captured
graph, so the engine refuses a model loaded without ``enforce_eager: true``.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

#: The worker extension's import path, given to vLLM at load.
EXTENSION = f"{__name__}.LayerWatch"


def decoder_blocks(model: Any) -> Any:
    """The model's list of decoder blocks: the ``layers`` module list of its decoder (for a
    multimodal model, of its language model)."""
    inner = model.get_language_model() if hasattr(model, "get_language_model") else model
    for name, module in inner.named_modules():
        if name.endswith("layers") and module.__class__.__name__ == "ModuleList":
            return module
    raise ValueError(f"{model.__class__.__name__}: no decoder block list (a `layers` module list) found")


def _keep(kept: list[tuple[int, Any]], layer: int, _module: Any, _args: Any, output: Any) -> None:
    """Keep a block's output at the forward pass's last token (the last row of a one-prompt
    prefill is the prompt's last token)."""
    if isinstance(output, tuple):
        hidden, residual = output[0], output[1]
        last = hidden[-1] + residual[-1] if residual is not None else hidden[-1]
    else:
        last = output[-1]
    kept.append((layer, last.float().cpu()))


class LayerWatch:
    """Methods vLLM mixes into its worker class (``self`` is the worker)."""

    def localjury_watch(self, layers: list[int]) -> None:
        """Hook each of ``layers`` (any earlier hooks are taken off first)."""
        self.localjury_unwatch()
        blocks = decoder_blocks(self.get_model())  # type: ignore[attr-defined]
        kept: list[tuple[int, Any]] = []
        self._localjury_kept = kept
        self._localjury_hooks = [blocks[i].register_forward_hook(partial(_keep, kept, i)) for i in layers]

    def localjury_take(self, layers: list[int]) -> np.ndarray | None:
        """The kept outputs of the last forward pass as a (layers, hidden) array, forgetting
        them; None when no hook fired (a compiled model)."""
        kept = list(self._localjury_kept)
        self._localjury_kept.clear()
        first: dict[int, Any] = {}
        for layer, row in kept:  # the prefill's (one pass for max_tokens=1; any later one is not it)
            first.setdefault(layer, row)
        if not all(layer in first for layer in layers):
            return None
        return np.stack([first[i].numpy() for i in layers]).astype(np.float32)

    def localjury_unwatch(self) -> None:
        """Take the hooks off."""
        for hook in getattr(self, "_localjury_hooks", []):
            hook.remove()
        self._localjury_hooks = []
