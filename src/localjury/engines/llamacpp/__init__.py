"""The llama.cpp engine (:mod:`~localjury.engines.llamacpp.llamacpp`): a GGUF file run by
llama.cpp, quantized, on CPU. Here, its facts alone: nothing is imported until the engine is
loaded."""

from localjury.engines._facts import EngineFacts

FACTS = EngineFacts(
    name="llamacpp",
    cls="LlamaCppEngine",
    install=(
        "pip install 'localjury[llamacpp]' (llama-cpp-python builds llama.cpp from source; scripts/setup "
        "caches the wheel it builds)"
    ),
    loads="gguf",
    package="llama_cpp",
    distributions=("llama-cpp-python",),
    optional=True,
    auto=2,
    hidden_states=True,
)
