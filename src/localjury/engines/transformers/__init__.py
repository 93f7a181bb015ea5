"""The transformers engine (:mod:`~localjury.engines.transformers.transformers`): a Hugging Face
folder run by transformers, constrained by Outlines; the CPU engine, which also runs on a single
GPU. Here, its facts alone: nothing is imported until the engine is loaded."""

from localjury.engines._facts import EngineFacts

FACTS = EngineFacts(
    name="transformers",
    cls="TransformersEngine",
    install="pip install localjury  (torch, transformers and outlines are core dependencies)",
    loads="hf",
    package="transformers",
    distributions=("transformers",),
    manifest_packages=("transformers",),
    auto=1,
    hidden_states=True,
)
