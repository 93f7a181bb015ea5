"""A GGUF file's tokenizer as Hugging Face tokenizer files: what the llamacpp engine's prompt
rendering and the neutraliser read (a pulled model gets them at pull time, a bare ``.gguf``
path on first use)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from localjury.errors import EngineError


def save_gguf_tokenizer(gguf: Path, dest: Path) -> None:
    """Convert a GGUF file's vocabulary and chat template into Hugging Face tokenizer files
    in ``dest`` (written beside it and renamed, so ``dest`` is whole or absent).

    Raises:
        EngineError: transformers cannot read the GGUF's tokenizer.
    """
    from transformers import AutoTokenizer

    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=f".{dest.name}-") as tmp:
        out = Path(tmp) / "tokenizer"
        try:
            AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name).save_pretrained(out)
        except Exception as exc:
            raise EngineError(
                f"cannot read the tokenizer of {gguf}: {exc}", engine="llamacpp", model=gguf.name
            ) from exc
        if dest.exists():
            shutil.rmtree(dest)
        out.rename(dest)
