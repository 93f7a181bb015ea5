"""Outlines over transformers: the CPU engine (also runs on a single GPU).

Needs only localjury's core dependencies (torch, transformers, outlines) and no GPU.
Prompts are sorted by length and run in batches of ``batch_size`` prompts. The common
prefix of all prompts is prefilled once, each prompt's suffix once, and the KV cache is
copied to the ``n`` sample rows. A decode loop of our own samples every row under
Outlines' guides (outlines-core), one mask operation per step for the whole batch, and
drops rows from the batch as they end.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import os
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

# Loading from local folders only: make the Hugging Face libraries fail instead of calling out.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

import numpy as np
import outlines
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache
from transformers.utils import logging as hf_logging

from localjury.engines._local import LocalDecoding, Sampler, Span, covering, sample_generators, shared_prefix
from localjury.engines.base import Completion, GenerateCall, PromptFormatter, Sampling, Usage
from localjury.engines.constrain.masks import MaskedRows
from localjury.engines.constrain.schemas import JsonSchemaIndex, vocabulary_of
from localjury.engines.native import attention
from localjury.errors import EngineError
from localjury.models.registry import ModelFiles, ModelSpec

# localjury shows its own progress; transformers' per-load tqdm bars would interleave with it.
hf_logging.disable_progress_bar()

#: The most KV cache one decode batch may need (rows x tokens x bytes per token); batches are
#: cut smaller than batch_size to stay under it.
KV_BUDGET_BYTES = 3 << 30

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16, "auto": "auto"}


class _Read(Exception):
    """Raised by the hidden-state hook of the deepest wanted block: the forward pass stops there."""


def _fill_holes(ended: list[bool]) -> list[int]:
    """The rows to keep, in their new order: each row that ended is replaced by a running row
    from the end of the batch, so the KV cache moves one row per row that ended (in place,
    :class:`~localjury.engines.native.attention.ReservedLayer`) instead of shifting all the rows
    after it. A row's samples do not depend on its place in the batch (its own generator)."""
    alive = [r for r, end in enumerate(ended) if not end]
    keep = list(range(len(alive)))
    holes = [r for r in keep if ended[r]]
    for hole, moved in zip(holes, alive[len(alive) - len(holes) :], strict=True):
        keep[hole] = moved
    return keep


class TransformersEngine(LocalDecoding):
    """Run a local Hugging Face model with transformers, constrained by Outlines.

    Args:
        spec: The models.yaml entry; its folder must hold config.json and safetensors.

    Raises:
        ModelNotAvailableError: The weights folder is missing.
        EngineError: transformers could not load the model.
    """

    name: ClassVar[str] = "transformers"

    def __init__(self, spec: ModelSpec, files: ModelFiles | None = None) -> None:
        self.spec = spec
        folder = (files or spec.require("hf")).weights
        self.folder: Path = folder
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(
                folder, trust_remote_code=spec.trust_remote_code, local_files_only=True
            )
            self.model = AutoModelForCausalLM.from_pretrained(
                folder,
                dtype=_DTYPES[spec.dtype],
                trust_remote_code=spec.trust_remote_code,
                local_files_only=True,
                use_safetensors=True,
            )
        except Exception as exc:
            raise EngineError(f"cannot load the model from {folder}: {exc}", engine=self.name, model=spec.name) from exc
        self.model.eval()
        if self.model.config._attn_implementation == "sdpa":
            self.model.set_attn_implementation(attention.register())
        tok = self.tokenizer
        tok.padding_side = "left"
        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token
        gen_eos = self.model.generation_config.eos_token_id
        eos_ids = set(gen_eos if isinstance(gen_eos, list) else [gen_eos] if gen_eos is not None else [])
        if tok.eos_token_id is not None:
            eos_ids.add(tok.eos_token_id)
        self.eos_ids = sorted(eos_ids)
        self.prompts = PromptFormatter(tok, spec)
        cfg = self.model.config.get_text_config()
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        kv_heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
        self._kv_bytes_per_token = 2 * cfg.num_hidden_layers * kv_heads * head_dim * self.model.dtype.itemsize
        self.use_chat = self.prompts.use_chat
        self._outlines_model = outlines.from_transformers(self.model, self.tokenizer)  # type: ignore[arg-type]
        self._vocabulary = vocabulary_of(self._outlines_model)
        self._indexes: dict[str, JsonSchemaIndex] = {}

    # -- generation ----------------------------------------------------------------------

    def _generate(self, call: GenerateCall) -> list[list[Completion]]:
        """Draw ``n`` samples per prompt of a checked call (see :class:`~localjury.engines.base.BatchEngine`)."""
        prompts, n, sampling, quotes = call.prompts, call.n, call.sampling, call.quotes
        encoded = self.tokenizer(list(prompts), add_special_tokens=False)["input_ids"]
        order = sorted(range(len(prompts)), key=lambda i: (len(encoded[i]), i))
        vocab = self.model.config.get_text_config().vocab_size
        prefix_len, prefix_cache = self._prefill_prefix(encoded)
        # The prefix is computed once for the call, not once per prompt.
        self.last_usage = Usage(sum(len(e) for e in encoded), prefix_len * (len(prompts) - 1))
        results: list[list[Completion]] = [[] for _ in prompts]
        batches: list[list[int]] = []
        for i in order:  # prompts sorted by length: a batch's longest prompt is its last
            if (
                batches
                and len(batches[-1]) < self.spec.batch_size
                and self._fits(len(batches[-1]) + 1, n, len(encoded[i]), sampling.max_tokens)
            ):
                batches[-1].append(i)
            else:
                batches.append([i])
        for idx in batches:
            # One generator per sample, seeded from (run seed, prompt, sample index): a sample
            # does not depend on which other prompts share its batch or call, so chunking,
            # resuming and caching cannot change it (up to float rounding across batch shapes).
            rngs = sample_generators(sampling.seed, [prompts[i] for i in idx], n, sampling.first_sample)
            try:
                with torch.inference_mode():
                    ids, mask, cache = self._prefill_batch([encoded[i] for i in idx], prefix_len, prefix_cache, n)
                    batch_quotes = [quotes[i] for i in idx] if quotes is not None else None
                    guides = self._rows(call.schema, len(idx), n, batch_quotes, vocab, self.eos_ids, call.thinking)
                    rows = self._decode(ids, mask, cache, sampling, guides, rngs)
            except Exception as exc:
                raise EngineError(f"generation failed: {exc}", engine=self.name, model=self.spec.name) from exc
            for row, completion in enumerate(self._completions(rows, guides)):
                results[idx[row // n]].append(completion)
            if call.progress is not None:
                call.progress(len(idx))
        return results

    def _fits(self, prompts: int, n: int, longest: int, max_tokens: int) -> bool:
        """Whether a batch's KV cache stays within KV_BUDGET_BYTES at its longest (every row
        at the longest prompt plus max_tokens): long faithfulness verifications on a model
        with a large KV per token get smaller batches instead of exhausting memory."""
        return prompts * n * (longest + max_tokens) * self._kv_bytes_per_token <= KV_BUDGET_BYTES

    def _decode(
        self,
        ids: torch.Tensor,
        mask: torch.Tensor,
        cache: Any,
        sampling: Sampling,
        guides: MaskedRows | None,
        rngs: list[torch.Generator],
    ) -> list[tuple[list[int], bool]]:
        """Sample until every row has ended or used max_tokens; rows that end leave the batch.

        transformers' ``generate`` keeps computing rows that have finished until the longest
        one ends; judgments vary a lot in length, so dropping them saves most of the tail.
        """
        total = ids.shape[0]
        out: list[list[int]] = [[] for _ in range(total)]
        done = [False] * total
        active = list(range(total))  # original row of each row still in the batch
        current = ids[:, -1:]
        positions = mask.sum(-1, keepdim=True) - 1
        eos = torch.tensor(self.eos_ids)
        attention.reserve(cache, sampling.max_tokens)  # each step's token written in place, not concatenated
        sample = Sampler()
        for _ in range(sampling.max_tokens):
            logits = (
                self.model(
                    input_ids=current,
                    attention_mask=mask,
                    position_ids=positions,
                    past_key_values=cache,
                    use_cache=True,
                    logits_to_keep=1,
                )
                .logits[:, -1, :]
                .float()
            )
            if guides is not None:
                logits = guides.mask(logits)
            tokens = sample(logits, sampling, [rngs[orig] for orig in active])
            ended = torch.isin(tokens, eos).tolist()
            token_list = tokens.tolist()
            for r, orig in enumerate(active):
                if ended[r]:
                    done[orig] = True
                else:
                    out[orig].append(token_list[r])
            keep = _fill_holes(ended)
            if not keep:
                break
            if guides is not None:
                guides.advance(token_list, ended)
            if len(keep) < len(active):
                sel = torch.tensor(keep)
                cache.batch_select_indices(sel.to(mask.device))
                mask, positions, tokens = mask[sel], positions[sel], tokens[sel]
                active = [active[r] for r in keep]
                if guides is not None:
                    guides.select(keep)
            current = tokens[:, None].to(mask.device)
            mask = torch.cat([mask, mask.new_ones((mask.shape[0], 1))], dim=1)
            positions = positions + 1
        return [(out[r], done[r]) for r in range(total)]

    # KV sharing. Every prompt of a call starts with the same instruction and examples, and
    # each prompt's n samples share all of it: prefill the common prefix once, each prompt's
    # own suffix once, then copy the cache n times for sampling. Rows are laid out as
    # [prefix | padding | suffix], so the padding sits in the middle; position ids follow the
    # attention mask (cumsum), which keeps every real token at its true position.

    def _prefill_prefix(self, encoded: list[list[int]], most: int | None = None) -> tuple[int, Any]:
        """The KV cache of the prefix the prompts share (at most ``most`` tokens), and its length."""
        first = encoded[0]
        prefix_len = min(shared_prefix(encoded, 1), most if most is not None else len(first))
        if prefix_len == 0:
            return 0, None
        with torch.inference_mode():
            ids = torch.tensor([first[:prefix_len]], device=self.model.device)
            # logits_to_keep=1: only the cache is wanted, not (tokens x vocab) logits.
            out = self.model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=True, logits_to_keep=1)
        return prefix_len, out.past_key_values

    def _prefill_batch(
        self, rows: list[list[int]], prefix_len: int, prefix_cache: Any, n: int
    ) -> tuple[torch.Tensor, torch.Tensor, Any]:
        device = self.model.device
        width = max(len(r) for r in rows) - prefix_len
        pad = self.tokenizer.pad_token_id
        ids = torch.full((len(rows), prefix_len + width), pad, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for r, row in enumerate(rows):
            ids[r, :prefix_len] = torch.tensor(row[:prefix_len])
            mask[r, :prefix_len] = 1
            suffix = row[prefix_len:]
            ids[r, prefix_len + width - len(suffix) :] = torch.tensor(suffix)
            mask[r, prefix_len + width - len(suffix) :] = 1
        ids, mask = ids.to(device), mask.to(device)
        if prefix_cache is not None:
            cache = copy.deepcopy(prefix_cache)
            cache.batch_repeat_interleave(len(rows))
        else:
            cache = DynamicCache(config=self.model.config)
        if width > 1:  # prefill every suffix token but the last; _decode() feeds that one
            upto = prefix_len + width - 1
            positions = (mask[:, :upto].cumsum(-1) - 1).clamp(min=0)[:, prefix_len:]
            out = self.model(
                input_ids=ids[:, prefix_len:upto],
                attention_mask=mask[:, :upto],
                position_ids=positions,
                past_key_values=cache,
                use_cache=True,
                logits_to_keep=1,
            )
            cache = out.past_key_values
        if n > 1:
            cache.batch_repeat_interleave(n)
            ids, mask = ids.repeat_interleave(n, dim=0), mask.repeat_interleave(n, dim=0)
        return ids, mask, cache

    # -- hidden states -------------------------------------------------------------------

    def block_count(self) -> int:
        return int(self.model.config.get_text_config().num_hidden_layers)

    def _read_spans(
        self, encoded: list[list[int]], layers: Sequence[int], spans: Sequence[Sequence[Span]]
    ) -> np.ndarray:
        """Each prompt alone (no padding) after the prefix they share, with a forward hook on each
        of ``layers``' decoder blocks keeping its output at the tokens the prompt's spans cover,
        the forward pass stopped once the deepest of them has run (the blocks above and the output
        layer are skipped); see :meth:`~localjury.engines._local.LocalDecoding.pooled_states`."""
        blocks = self.model.get_decoder().layers
        kept: dict[int, torch.Tensor] = {}
        top = max(layers)
        cover = [covering(own) for own in spans]
        # The prefix every prompt shares (the instruction and its examples, up to the first span)
        # is computed once, its KV cache copied to each prompt, whose own tokens then run alone.
        prefix_len, prefix_cache = self._prefill_prefix(encoded, min(start for start, _ in cover))
        rows = slice(0, 0)

        def keep(layer: int, _module: Any, _args: Any, output: Any) -> None:
            hidden = output[0] if isinstance(output, tuple) else output
            kept[layer] = hidden[0, rows].float().cpu()
            if layer == top:
                raise _Read

        ways = len(spans[0]) if spans else 0
        out = np.zeros((ways, len(encoded), len(layers), self.model.config.get_text_config().hidden_size), np.float32)
        hooks = [blocks[i].register_forward_hook(partial(keep, i)) for i in layers]
        try:
            with torch.inference_mode():
                for p, ids in enumerate(encoded):
                    rows = slice(cover[p][0] - prefix_len, cover[p][1] - prefix_len)
                    tokens = torch.tensor([ids[prefix_len:]], device=self.model.device)
                    mask = torch.ones((1, len(ids)), dtype=torch.long, device=self.model.device)
                    cache = copy.deepcopy(prefix_cache) if prefix_cache is not None else None
                    with contextlib.suppress(_Read):
                        self.model(input_ids=tokens, attention_mask=mask, past_key_values=cache,
                                   use_cache=cache is not None, logits_to_keep=1)  # fmt: skip
                    for w, (start, end) in enumerate(spans[p]):
                        own = slice(start - cover[p][0], end - cover[p][0])
                        for j, layer in enumerate(layers):
                            out[w, p, j] = kept[layer][own].mean(dim=0).numpy()
        except Exception as exc:
            raise EngineError(f"reading hidden states failed: {exc}", engine=self.name, model=self.spec.name) from exc
        finally:
            for hook in hooks:
                hook.remove()
        return out

    def close(self) -> None:
        """Drop the model, tokenizer and schema indexes, and collect their memory."""
        self._indexes.clear()
        for attr in ("_outlines_model", "_vocabulary", "model", "tokenizer"):
            if hasattr(self, attr):
                delattr(self, attr)
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
