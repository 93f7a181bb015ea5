"""llama.cpp over a GGUF file: the quantized CPU engine.

Needs the ``llamacpp`` extra (llama-cpp-python, which builds llama.cpp from source at
install time; ``scripts/setup`` caches the built wheel) and no GPU. The weights stay in
their quantized GGUF form (Q4_K_M: about 4.9 bits a weight) and are memory-mapped.

One :meth:`LlamaCppEngine.generate` call decodes its prompts in batches of sequences: the
prefix common to every prompt of the call (instruction and examples) is prefilled once, each
prompt's own suffix once, and the prompt's KV cache is copied to its ``n`` sample sequences
(``llama_memory_seq_cp``: computed once, copied). Every step decodes one token of every
running sequence in one ``llama_decode``; a sequence that ends leaves the batch and frees its
cells. Each sample is constrained to the JSON schema by Outlines' index over the model's
vocabulary (the same guides as the transformers engine) and drawn from its own generator,
seeded from (run seed, prompt, sample index). Its logits do not depend on its batch either:
each sequence has a KV stream of its own, flash attention is off, and no decode is one token
long (see :meth:`LlamaCppEngine._decode`), so a sample alone equals the same sample in a batch.

Prompts are formatted and tokenized by the Hugging Face tokenizer that ``localjury models
pull`` saves beside the GGUF (converted from the GGUF's own vocabulary and chat template):
the same tokens, chat template and byte-exact vocabulary as the other engines.
"""

from __future__ import annotations

import ctypes
import gc
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

import llama_cpp
import numpy as np
import torch
from llama_cpp import _internals
from transformers.utils import logging as hf_logging

from localjury.engines._local import LocalDecoding, Span, sample, sample_generators, shared_prefix
from localjury.engines.base import Completion, GenerateCall, PromptFormatter, Sampling, Usage, load_tokenizer
from localjury.engines.constrain.masks import MaskedRows
from localjury.engines.constrain.schemas import JsonSchemaIndex, vocabulary_of_tokenizer
from localjury.engines.llamacpp.layers import LayerReader
from localjury.engines.native import cpu
from localjury.engines.native.llamacpp_kernels import announce, kernel_choice
from localjury.errors import ConfigError, EngineError
from localjury.models.registry import ModelFiles, ModelSpec

hf_logging.disable_progress_bar()
# llama.cpp logs every load to stderr through llama-cpp-python's logger; keep errors only.
logging.getLogger("llama-cpp-python").setLevel(logging.ERROR)

#: The most KV cache one batch of sequences may use; batches are cut to stay under it.
KV_BUDGET_BYTES = 2 << 30
#: Tokens one ``llama_decode`` call takes at most (prefill is split into calls this long).
DECODE_BATCH = 1024
#: The most sequences llama.cpp keeps at once (LLAMA_MAX_SEQ).
MAX_SEQUENCES = 256
#: Sequence 0 holds the prefix every prompt of a call shares, sequence 1 scratch tokens
#: (see LlamaCppEngine._decode); samples start at 2.
PREFIX, SCRATCH, FIRST_SEQUENCE = 0, 1, 2


def _pieces(total: int, cap: int) -> list[int]:
    """Sizes of the calls a decode of ``total`` tokens is cut into: at most ``cap`` each,
    and none of one token unless ``total`` is one."""
    sizes = [cap] * (total // cap) + ([total % cap] if total % cap else [])
    if len(sizes) > 1 and sizes[-1] == 1:
        sizes[-2] -= 1
        sizes[-1] = 2
    return sizes


class LlamaCppEngine(LocalDecoding):
    """Run a GGUF model with llama.cpp, constrained by Outlines.

    Args:
        spec: The models.yaml entry; its GGUF file and tokenizer must be on this machine.
        files: Its files, checked (default: checked now).

    Raises:
        ModelNotAvailableError: The GGUF file or its tokenizer is missing.
        EngineError: llama.cpp could not load the model.
    """

    name: ClassVar[str] = "llamacpp"

    def __init__(self, spec: ModelSpec, files: ModelFiles | None = None) -> None:
        self.spec = spec
        files = files or spec.require("gguf")
        gguf = files.weights
        self.gguf: Path = gguf
        try:
            self.tokenizer = load_tokenizer(files.tokenizer)
        except Exception as exc:
            raise EngineError(
                f"cannot load the tokenizer beside {gguf}: {exc}", engine=self.name, model=spec.name
            ) from exc
        self.prompts = PromptFormatter(self.tokenizer, spec)
        self.use_chat = self.prompts.use_chat
        llama_cpp.llama_backend_init()
        # Only kernels proven on this machine: a probe in a subprocess decides whether
        # llama.cpp's repacked (AMX, AVX-512, NEON) weight buffers are safe here.
        self.kernels = kernel_choice(gguf)
        if not self.kernels.usable:
            raise EngineError(
                f"llama.cpp is not safe to run on this machine: {self.kernels.reason}. Run this model on the "
                "transformers engine (--engine transformers, after `localjury models pull NAME --dequantize` for "
                "an embedded GGUF model), or rebuild llama-cpp-python for this CPU; `localjury doctor` shows the probe",
                engine=self.name,
                model=spec.name,
            )
        announce(self.kernels, spec.name)
        params = self.kernels.apply(llama_cpp.llama_model_default_params())
        params.n_gpu_layers = 0
        params.use_mmap = True
        try:
            self.model = _internals.LlamaModel(path_model=str(gguf), params=params, verbose=False)
        except Exception as exc:
            raise EngineError(f"llama.cpp cannot load {gguf}: {exc}", engine=self.name, model=spec.name) from exc
        self.vocab = llama_cpp.llama_model_get_vocab(self.model.model)
        self.n_vocab = self.model.n_vocab()
        self.eog = {t for t in range(self.n_vocab) if llama_cpp.llama_vocab_is_eog(self.vocab, t)}
        self._kv_bytes_per_token = self._kv_bytes()
        self.ctx: Any = None
        self.memory: Any = None
        self._shape = (0, 0)  # (sequences, cells per sequence) of the current context
        self.batch = _internals.LlamaBatch(n_tokens=DECODE_BATCH, embd=0, n_seq_max=1, verbose=False)
        self._vocabulary = vocabulary_of_tokenizer(self.tokenizer)
        self._indexes: dict[str, JsonSchemaIndex] = {}
        self._reader = LayerReader(DECODE_BATCH, cpu.compute_threads(), gguf, params)

    def _context(self, sequences: int, cells: int) -> None:
        """Have a context with at least ``sequences`` KV streams of ``cells`` cells each.

        One stream per sequence (``kv_unified`` off) and no flash attention: a sequence's
        attention then reads only its own cells, laid out the same whatever else runs, and
        with every decode at least two tokens long (see :meth:`_decode`) a sample's logits do
        not depend on its batch. A prompt's KV is shared with its samples by copying its
        sequence (``llama_memory_seq_cp``), computed once.
        """
        have_seqs, have_cells = self._shape
        if have_seqs >= sequences and have_cells >= cells:
            llama_cpp.llama_memory_clear(self.memory, True)
            return
        if self.ctx is not None:
            self.ctx.close()
            self.ctx = None
        cells = max(cells, have_cells)
        sequences = max(sequences, have_seqs)
        cparams = llama_cpp.llama_context_default_params()
        cparams.n_ctx = sequences * cells
        cparams.n_batch = cparams.n_ubatch = DECODE_BATCH
        cparams.n_seq_max = sequences
        cparams.kv_unified = False
        cparams.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
        cparams.n_threads = cparams.n_threads_batch = cpu.compute_threads()
        try:
            self.ctx = _internals.LlamaContext(model=self.model, params=cparams, verbose=False)
        except Exception as exc:
            raise EngineError(
                f"llama.cpp cannot create a context of {sequences} x {cells} cells: {exc}",
                engine=self.name,
                model=self.spec.name,
            ) from exc
        self.memory = llama_cpp.llama_get_memory(self.ctx.ctx)
        self._shape = (sequences, cells)

    def _kv_bytes(self) -> int:
        """KV cache bytes per token (f16 keys and values), from the GGUF's metadata."""
        meta = self.model.metadata()
        arch = meta.get("general.architecture", "llama")

        def num(key: str, default: int) -> int:
            try:
                return int(meta.get(f"{arch}.{key}", default))
            except ValueError:
                return default

        layers = num("block_count", 32)
        heads = num("attention.head_count", 32)
        kv_heads = num("attention.head_count_kv", heads)
        head_dim = num("attention.key_length", num("embedding_length", 4096) // max(heads, 1))
        return max(1, 2 * layers * kv_heads * head_dim * 2)

    # -- generation ----------------------------------------------------------------------

    def _generate(self, call: GenerateCall) -> list[list[Completion]]:
        """Draw ``n`` samples per prompt of a checked call (see :class:`~localjury.engines.base.BatchEngine`)."""
        prompts, n, sampling, quotes = call.prompts, call.n, call.sampling, call.quotes
        encoded: list[list[int]] = self.tokenizer(list(prompts), add_special_tokens=False)["input_ids"]
        results: list[list[Completion]] = [[] for _ in prompts]
        # Cells per sequence: the longest prompt and its budget, in blocks of 256 (so that
        # calls of similar shape reuse the context).
        cells = -(-(max(len(e) for e in encoded) + sampling.max_tokens + 1) // 256) * 256
        batches = self._batches(encoded, n, cells)
        try:
            self._context(FIRST_SEQUENCE + max(len(b) for b in batches) * n, cells)
            prefix = self._prefill_prefix(encoded)
            # The prefix is computed once for the call and copied to each prompt's sequence.
            self.last_usage = Usage(sum(len(e) for e in encoded), prefix * (len(prompts) - 1))
            for idx in batches:
                rngs = sample_generators(sampling.seed, [prompts[i] for i in idx], n, sampling.first_sample)
                batch_quotes = [quotes[i] for i in idx] if quotes is not None else None
                eog = sorted(self.eog)
                guides = self._rows(call.schema, len(idx), n, batch_quotes, self.n_vocab, eog, call.thinking)
                rows = self._run_batch([encoded[i] for i in idx], prefix, n, sampling, guides, rngs)
                for row, completion in enumerate(self._completions(rows, guides)):
                    results[idx[row // n]].append(completion)
                if call.progress is not None:
                    call.progress(len(idx))
        except (ConfigError, EngineError):
            raise
        except Exception as exc:
            raise EngineError(f"generation failed: {exc}", engine=self.name, model=self.spec.name) from exc
        finally:
            if self.ctx is not None:
                llama_cpp.llama_memory_clear(self.memory, True)
        return results

    def _batches(self, encoded: list[list[int]], n: int, cells: int) -> list[list[int]]:
        """Group prompts (shortest first): at most ``batch_size`` prompts, and as many
        sequences as KV_BUDGET_BYTES holds at ``cells`` cells each (one sequence per sample,
        besides the shared prefix and the scratch sequence)."""
        per_sequence = cells * self._kv_bytes_per_token
        fit = max(1, (KV_BUDGET_BYTES // per_sequence - FIRST_SEQUENCE) // n)
        size = max(1, min(self.spec.batch_size, fit, (MAX_SEQUENCES - FIRST_SEQUENCE) // n))
        order = sorted(range(len(encoded)), key=lambda i: (len(encoded[i]), i))
        return [order[i : i + size] for i in range(0, len(order), size)]

    def _decode(self, items: list[tuple[int, int, int, bool]]) -> torch.Tensor:
        """Decode (token, position, sequence, wants logits) items: the tokens of one sequence
        (a prefill) or one token of each of several sequences (a step). Return the logits of
        the items that want them, a row each, in order.

        No call is one token long: llama.cpp computes a one-token batch with other kernels
        (a matrix-vector product) than a longer one, which rounds differently and would make a
        sample depend on how many others run beside it. A lone token gets a scratch token of
        its own sequence beside it; a long prefill is cut into calls of at most DECODE_BATCH
        tokens, never leaving one token alone.
        """
        rows: list[np.ndarray] = []
        b = self.batch.batch
        start = 0
        for size in _pieces(len(items), DECODE_BATCH):
            part = items[start : start + size]
            start += size
            pad = len(part) == 1
            if pad:
                part = [*part, (0, 0, SCRATCH, False)]
            self.batch.reset()
            wanted = []
            for k, (token, pos, seq, logits) in enumerate(part):
                b.token[k] = token
                b.pos[k] = pos
                b.seq_id[k][0] = seq
                b.n_seq_id[k] = 1
                b.logits[k] = logits
                if logits:
                    wanted.append(k)
            b.n_tokens = len(part)
            status = llama_cpp.llama_decode(self.ctx.ctx, b)
            if pad:
                llama_cpp.llama_memory_seq_rm(self.memory, SCRATCH, -1, -1)
            if status != 0:
                raise EngineError(f"llama_decode returned {status}", engine=self.name, model=self.spec.name)
            for k in wanted:  # read now: the next decode overwrites them
                ptr = ctypes.cast(llama_cpp.llama_get_logits_ith(self.ctx.ctx, k), ctypes.POINTER(ctypes.c_float))
                rows.append(np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)).copy())
        return torch.from_numpy(np.stack(rows)) if rows else torch.empty((0, self.n_vocab))

    def _prefill_prefix(self, encoded: list[list[int]]) -> int:
        """Prefill the tokens every prompt starts with into sequence PREFIX. Each prompt keeps
        at least two tokens of its own: its last token (whose logits start its samples) is
        then computed beside another of its own tokens, as it is when the prompt shares less
        with the others of the call. (Attention over one query token takes other kernels
        than over several, and rounds differently: a one-token suffix would make a prompt's
        samples depend on which prompts share its call.)"""
        first = encoded[0]
        length = shared_prefix(encoded, 2)
        if length:
            self._decode([(t, p, PREFIX, False) for p, t in enumerate(first[:length])])
        return length

    def _run_batch(
        self,
        rows: list[list[int]],
        prefix: int,
        n: int,
        sampling: Sampling,
        guides: MaskedRows | None,
        rngs: list[torch.Generator],
    ) -> list[tuple[list[int], bool]]:
        """Prefill each prompt's suffix once, copy it to its n sample sequences, and sample
        them all, one token of every running sequence per decode."""
        seqs = [FIRST_SEQUENCE + r * n + j for r in range(len(rows)) for j in range(n)]
        first: list[torch.Tensor] = []
        for r, ids in enumerate(rows):
            seq = seqs[r * n]
            if prefix:
                llama_cpp.llama_memory_seq_cp(self.memory, PREFIX, seq, -1, -1)
            suffix = [(t, prefix + p, seq, prefix + p == len(ids) - 1) for p, t in enumerate(ids[prefix:])]
            first.append(self._decode(suffix)[0])
            for j in range(1, n):
                llama_cpp.llama_memory_seq_cp(self.memory, seq, seqs[r * n + j], -1, -1)
        logits = torch.stack(first).repeat_interleave(n, dim=0)
        total = len(seqs)
        out: list[list[int]] = [[] for _ in range(total)]
        done = [False] * total
        active = list(range(total))
        positions = [len(rows[r // n]) for r in range(total)]
        try:
            for _ in range(sampling.max_tokens):
                if guides is not None:
                    logits = guides.mask(logits)
                tokens = sample(logits, sampling, [rngs[a] for a in active]).tolist()
                ended = [t in self.eog for t in tokens]
                keep: list[int] = []
                for r, a in enumerate(active):
                    if ended[r]:
                        done[a] = True
                        llama_cpp.llama_memory_seq_rm(self.memory, seqs[a], -1, -1)
                    else:
                        out[a].append(tokens[r])
                        keep.append(r)
                if not keep:
                    break
                if guides is not None:
                    guides.advance(tokens, ended)
                    if len(keep) < len(active):
                        guides.select(keep)
                active = [active[r] for r in keep]
                if len(out[active[0]]) >= sampling.max_tokens:
                    break  # the budget is spent: the last tokens need no decode
                step = [(tokens[r], positions[a], seqs[a], True) for r, a in zip(keep, active, strict=True)]
                for a in active:
                    positions[a] += 1
                logits = self._decode(step)
        finally:
            for s in seqs:
                llama_cpp.llama_memory_seq_rm(self.memory, s, -1, -1)
        return [(out[r], done[r]) for r in range(total)]

    # -- hidden states -------------------------------------------------------------------

    def block_count(self) -> int:
        return int(llama_cpp.llama_model_n_layer(self.model.model))

    def _read_spans(
        self, encoded: list[list[int]], layers: Sequence[int], spans: Sequence[Sequence[Span]]
    ) -> np.ndarray:
        """Each prompt prefilled alone in a context whose eval callback reads the blocks' outputs
        (:class:`~localjury.engines.llamacpp.layers.LayerReader`); see
        :meth:`~localjury.engines._local.LocalDecoding.pooled_states`."""
        try:
            return self._reader.read(self.model, encoded, layers, _pieces, spans)
        except Exception as exc:
            raise EngineError(f"reading hidden states failed: {exc}", engine=self.name, model=self.spec.name) from exc

    def close(self) -> None:
        """Free the contexts, the model and the schema indexes."""
        self._indexes.clear()
        if hasattr(self, "_reader"):
            self._reader.close()
        for attr in ("batch", "ctx", "model"):
            obj = getattr(self, attr, None)
            if obj is not None:
                obj.close()
                delattr(self, attr)
        for attr in ("_vocabulary", "tokenizer"):
            if hasattr(self, attr):
                delattr(self, attr)
        gc.collect()
