"""Reading a GGUF model's hidden states with llama.cpp: the output of chosen transformer blocks
at a prompt's last token, or averaged over a span of its tokens, for decision heads
(:mod:`localjury.votes.heads`).

llama.cpp names the output of block ``i`` ``l_out-i`` in its compute graph (the tensors its
``llama-eval-callback`` and control-vector tools read). A context built with the scheduler's
eval callback (``cb_eval``) is asked, tensor by tensor, whether the callback wants it; for the
wanted ones it is called again once the tensor is computed, and copies out the rows of the
span's tokens (a block's output has a row for each token of the micro-batch; the last block
keeps only the rows that produce logits, so a prefill asks logits of the span's tokens). Every
block is reachable, not only the final one that llama.cpp's embedding output gives. Once the
deepest wanted block is read, the callback answers false, and the scheduler computes no more of
the graph: the blocks above it (and the output layer) are skipped, their cache rows never read
by this context.

Stopping the graph is not all of it: a context of the whole model still keeps (and copies, for
each prompt's copy of the shared prefix) cache rows for every block, and its deepest wanted block
runs its feed-forward part for every token. A read that stops below the last block therefore runs
on a copy of the GGUF cut after that block (:mod:`~localjury.engines.llamacpp.trimmed`: the same
tensors, bytes as they are, without the blocks above; written once under
``$LOCALJURY_HOME/trimmed/``), where the wanted block is the last one and llama.cpp keeps only the
rows asked for before its feed-forward part.
The states are the same within float rounding; decision mode on Qwen2.5-Coder-1.5B (block 10 of
28, TruthfulQA prompts of about 400 tokens) went from 1.31 to 1.50 judgments a second on an AMD
EPYC Zen 3 (``benchmarks/performance/decision_speed.py``). Where no copy can be had, the whole
model is read.
"""

from __future__ import annotations

import ctypes
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import llama_cpp
import numpy as np
from llama_cpp import _internals

from localjury.engines._local import Span, covering, shared_prefix

log = logging.getLogger(__name__)

#: ggml's type id of 32-bit floats (``GGML_TYPE_F32``): a block's output is one.
GGML_F32 = 0


class _TensorHead(ctypes.Structure):
    """The first fields of ``struct ggml_tensor`` (ggml.h): its type and its shape."""

    _fields_ = [
        ("type", ctypes.c_int),
        ("buffer", ctypes.c_void_p),
        ("ne", ctypes.c_int64 * 4),
    ]


def _ggml() -> ctypes.CDLL:
    """ggml's base library, shipped beside llama.cpp's in llama-cpp-python's wheel."""
    lib = ctypes.CDLL(str(Path(llama_cpp.__file__).parent / "lib" / "libggml-base.so"))
    lib.ggml_get_name.restype = ctypes.c_char_p
    lib.ggml_get_name.argtypes = [ctypes.c_void_p]
    lib.ggml_backend_tensor_get.restype = None
    lib.ggml_backend_tensor_get.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t]
    return lib


class LayerReader:
    """A context of its own (made at the first read, grown for longer prompts) whose eval
    callback keeps the wanted blocks' outputs at the tokens of each prefill's span (the tokens
    its poolings cover); a read that stops below the last block runs on a copy of the model cut
    after it (:mod:`~localjury.engines.llamacpp.trimmed`), loaded at the first such read and kept
    while reads stop there.

    Args:
        batch: Tokens one ``llama_decode`` takes at most.
        threads: Compute threads.
        source: The model's GGUF, which copies are cut from (None: every read runs on the model).
        params: The ``llama_model_params`` a copy is loaded with (the model's own).
    """

    def __init__(self, batch: int, threads: int, source: Path | None = None, params: Any = None) -> None:
        self._lib = _ggml()
        self._names: dict[str, int] = {}
        #: The deepest block wanted: the graph stops once it is computed.
        self._top = -1
        #: Each wanted block's rows of the span read so far.
        self.kept: dict[int, list[np.ndarray]] = {}
        self._last_block = -1
        #: The positions of the micro-batch being decoded: of a block's rows, of the last block's
        #: (the tokens asked for logits), and the span wanted.
        self._rows: Sequence[int] = ()
        self._outputs: Sequence[int] = ()
        self._span = (0, 0)
        self._batch_size, self._threads = batch, threads
        self._ctx: Any = None
        self._ctx_model: Any = None
        self._cells = 0
        self._source, self._params = source, params
        #: The copy reads run on, and the block it was cut after.
        self._trimmed: tuple[int, Any] | None = None
        #: The blocks no copy could be had for (each said once; reads stopping there run on the model).
        self._refused: set[int] = set()
        self._batch: Any = None
        # Kept on the object: the C side holds only a pointer to it.
        self.callback = llama_cpp.ggml_backend_sched_eval_callback(self._on_tensor)

    def read(
        self,
        model: Any,
        encoded: list[list[int]],
        layers: Sequence[int],
        pieces: Callable[[int, int], list[int]],
        spans: Sequence[Sequence[Span]],
    ) -> np.ndarray:
        """(spans a prompt, prompts, layers, hidden size): each prompt's states averaged over each
        of its tokens' spans ``spans[p]`` (``[start, end)``; the last token alone: ``[n - 1, n)``),
        all read in one prefill of the tokens they cover. The prefix every prompt shares, up to the
        first span, is prefilled once (sequence 0), then each prompt's own tokens on a copy of it
        (sequence 1), cut by ``pieces(length, batch)``, logits asked of the covered tokens only.
        Each prefill stops after the deepest of ``layers`` (the shared prefix's too: no later read
        needs its upper blocks), on a copy of the model cut there where one can be had."""
        model = self._model_for(model, max(layers))
        self._have_context(model, -(-max(len(e) for e in encoded) // 256) * 256)
        ctx = self._ctx.ctx
        memory = llama_cpp.llama_get_memory(ctx)
        llama_cpp.llama_memory_clear(memory, True)
        first, cover = encoded[0], [covering(own) for own in spans]
        prefix = min(shared_prefix(encoded, 2), *(start for start, _ in cover))
        self._top, self._last_block = max(layers), llama_cpp.llama_model_n_layer(model.model) - 1
        self._names = {f"l_out-{self._top}": self._top}  # read and dropped: it stops the prefix's graph there
        self._decode(ctx, first[:prefix], 0, 0, (0, 0), pieces)
        ways = len(spans[0]) if spans else 0
        out = np.zeros((ways, len(encoded), len(layers), model.n_embd()), np.float32)
        for p, ids in enumerate(encoded):
            self._names = {f"l_out-{i}": i for i in layers}
            self.kept = {}
            llama_cpp.llama_memory_seq_rm(memory, 1, -1, -1)
            if prefix:
                llama_cpp.llama_memory_seq_cp(memory, 0, 1, -1, -1)
            self._decode(ctx, ids[prefix:], prefix, 1, cover[p], pieces)
            width = cover[p][1] - cover[p][0]
            short = [i for i in layers if len(self.kept.get(i, ())) != width]
            if short:
                raise RuntimeError(f"llama.cpp computed {len(self.kept.get(short[0], ()))} of the {width} rows wanted "
                                   f"of block {short[0]}")  # fmt: skip
            rows = {i: np.asarray(self.kept[i]) for i in layers}
            for w, (start, end) in enumerate(spans[p]):
                own = slice(start - cover[p][0], end - cover[p][0])
                out[w, p] = [rows[i][own].mean(axis=0) for i in layers]
        return out

    def _decode(
        self,
        ctx: Any,
        tokens: list[int],
        start: int,
        seq: int,
        span: tuple[int, int],
        pieces: Callable[[int, int], list[int]],
    ) -> None:
        """Decode ``tokens`` at positions from ``start`` into sequence ``seq``, logits asked at
        the positions of ``span`` only."""
        done = 0
        for size in pieces(len(tokens), self._batch_size) if tokens else ():
            self._batch.reset()
            b = self._batch.batch
            for k in range(size):
                pos = start + done + k
                b.token[k], b.pos[k], b.seq_id[k][0], b.n_seq_id[k] = tokens[done + k], pos, seq, 1
                b.logits[k] = span[0] <= pos < span[1]
            b.n_tokens = size
            # The positions of this micro-batch's rows in a block's output, and in the last block's.
            self._rows = range(start + done, start + done + size)
            self._outputs = [pos for pos in self._rows if span[0] <= pos < span[1]]
            self._span = span
            done += size
            status = llama_cpp.llama_decode(ctx, b)
            if status != 0:
                raise RuntimeError(f"llama_decode returned {status}")

    def _model_for(self, model: Any, top: int) -> Any:
        """What a read stopping after block ``top`` runs on: the copy of ``model`` cut there
        (:mod:`~localjury.engines.llamacpp.trimmed`), or ``model`` where ``top`` is its last block or
        no copy can be had (said once a block, as a warning)."""
        if self._source is None or top >= llama_cpp.llama_model_n_layer(model.model) - 1 or top in self._refused:
            return model
        if self._trimmed is not None and self._trimmed[0] == top:
            return self._trimmed[1]
        # Imported here: only a read below the last block needs it (a run without heads never loads it).
        from localjury.engines.llamacpp.trimmed import trimmed_gguf

        try:
            trimmed = _internals.LlamaModel(path_model=str(trimmed_gguf(self._source, top)), params=self._params,
                                            verbose=False)  # fmt: skip
        except Exception as exc:
            log.warning("reading block %d of %s on the whole model: no copy cut there (%s)", top, self._source, exc)
            self._refused.add(top)
            return model
        self.close()
        self._trimmed = (top, trimmed)
        return trimmed

    def _have_context(self, model: Any, cells: int) -> None:
        """A context of ``model`` of at least ``cells`` cells, one sequence, the callback set,
        flash attention off (as the engine's generation context)."""
        if self._ctx is not None and self._ctx_model is model and self._cells >= cells:
            return
        self._free_context()
        cparams = llama_cpp.llama_context_default_params()
        cparams.n_ctx = 2 * cells  # the shared prefix's sequence and the prompt's
        cparams.n_seq_max = 2
        cparams.kv_unified = False
        cparams.n_batch = cparams.n_ubatch = self._batch_size
        cparams.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
        cparams.n_threads = cparams.n_threads_batch = self._threads
        cparams.cb_eval = self.callback
        self._ctx = _internals.LlamaContext(model=model, params=cparams, verbose=False)
        self._batch = _internals.LlamaBatch(n_tokens=self._batch_size, embd=0, n_seq_max=1, verbose=False)
        self._ctx_model, self._cells = model, cells

    def _free_context(self) -> None:
        for obj in (self._ctx, self._batch):
            if obj is not None:
                obj.close()
        self._ctx = self._batch = self._ctx_model = None
        self._cells = 0

    def close(self) -> None:
        """Free the context, and the copy of the model it read."""
        self._free_context()
        if self._trimmed is not None:
            self._trimmed[1].close()
            self._trimmed = None

    def _on_tensor(self, tensor: int, ask: bool, _user_data: int) -> bool:
        try:
            layer = self._names.get(self._lib.ggml_get_name(tensor).decode(errors="replace"))
            if ask or layer is None:
                return layer is not None if ask else True
            head = ctypes.cast(tensor, ctypes.POINTER(_TensorHead)).contents
            width, rows = int(head.ne[0]), int(head.ne[1])
            positions = self._outputs if layer == self._last_block else self._rows
            wanted = [r for r, pos in enumerate(positions) if self._span[0] <= pos < self._span[1]]
            # A micro-batch with no wanted row keeps none; rows of another layout than expected are
            # left unread too (the read then finds them short, and says so).
            if head.type == GGML_F32 and rows == len(positions) and wanted:
                block = np.empty((len(wanted), width), np.float32)  # the span's rows are consecutive
                self._lib.ggml_backend_tensor_get(tensor, block.ctypes.data, wanted[0] * width * 4, block.nbytes)
                self.kept.setdefault(layer, []).extend(block)
        except Exception:  # an exception cannot cross into C: the block is left unread
            return True
        return layer != self._top  # false: compute no more of this graph
