"""A model's tokenizer files: made from a GGUF file's own vocabulary (what the llamacpp engine's
prompt rendering reads; a pulled model gets them at pull time, a bare ``.gguf`` path on first
use), and the markers read from them (what a judge's neutraliser breaks in record text,
:mod:`localjury.metrics.neutralise`), without loading the tokenizer."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from localjury._files import parse_json, read_bounded
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


_TEMPLATE_LITERALS = re.compile(r"<\|[^|<>\s]{1,64}\|>|<[a-z_]{2,32}>|\[/?[A-Z_]{2,32}\]|<</?SYS>>")


#: The largest tokenizer file read for its markers (a large vocabulary's tokenizer.json is tens of MB).
MAX_TOKENIZER_BYTES = 512 << 20


def tokenizer_markers(folder: Path) -> list[str]:
    """The added tokens and chat-template literals of the tokenizer in a model folder: the
    candidates a :class:`~localjury.metrics.neutralise.Neutraliser` keeps the markers of.

    Reads ``tokenizer.json`` (its added tokens, special or not), ``tokenizer_config.json`` and
    ``special_tokens_map.json`` (bos/eos/pad/unk and additional special tokens), and the
    chat template (``chat_template.jinja``/``.json`` or the config's ``chat_template``) for
    the literal markers it writes. A file that is missing or not JSON contributes nothing.

    Raises:
        ConfigError: One of these files is there but is not a regular file (a FIFO, a device),
            cannot be read, or is over :data:`MAX_TOKENIZER_BYTES`.
    """
    found: set[str] = set()

    def text(name: str) -> str | None:
        path = folder / name
        if not os.path.lexists(path):
            return None
        data = read_bounded(path, "tokenizer file", "give the model's folder", MAX_TOKENIZER_BYTES)
        return data.decode("utf-8", "replace")

    def load(name: str) -> object:
        try:
            return parse_json(text(name) or "")
        except ValueError:
            return None

    def add(value: object) -> None:
        if isinstance(value, str):
            found.add(value)
        elif isinstance(value, dict) and isinstance(value.get("content"), str):
            found.add(value["content"])
        elif isinstance(value, list):
            for v in value:
                add(v)

    # Every added token, special or not: a vocabulary's added tokens are matched whole before
    # the model's own splitting, and some that mean structure are not flagged special (Qwen2.5's
    # <tool_call> and </tool_call>, Gemma 3's <start_of_image>). Added tokens that are no markers
    # (Gemma's runs of newlines and spaces) are left out below.
    tok = load("tokenizer.json")
    if isinstance(tok, dict):
        add([t for t in tok.get("added_tokens") or [] if isinstance(t, dict)])
    templates: list[str] = []
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        cfg = load(name)
        if not isinstance(cfg, dict):
            continue
        for key, value in cfg.items():
            if key.endswith("_token") or key == "additional_special_tokens":
                add(value)
        decoder = cfg.get("added_tokens_decoder")
        if isinstance(decoder, dict):
            add([v for v in decoder.values() if isinstance(v, dict)])
        template = cfg.get("chat_template")
        if isinstance(template, str):
            templates.append(template)
        elif isinstance(template, list):
            templates += [t["template"] for t in template if isinstance(t, dict) and isinstance(t.get("template"), str)]
    if (jinja := text("chat_template.jinja")) is not None:
        templates.append(jinja)
    data = load("chat_template.json")
    if isinstance(data, dict) and isinstance(data.get("chat_template"), str):
        templates.append(data["chat_template"])
    for template in templates:
        found.update(_TEMPLATE_LITERALS.findall(template))
    return sorted(found)
