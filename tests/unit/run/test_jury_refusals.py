"""What the jury refuses before any model loads, where a load (30-50 s) would only lead to the
same refusal or to an error on every record: a thinking budget that leaves a prompt no room in
the model's context, and a decision head whose weights or layer do not fit its model's shape,
read from the model's config.json or its GGUF metadata without loading it."""

from __future__ import annotations

import json
import struct

import pytest

from localjury import AspectCritic, evaluate
from localjury.engines import model_identity
from localjury.errors import ConfigError
from localjury.metrics.profile import JudgeProfile
from localjury.models._shape import ModelShape, config_shape, gguf_shape
from localjury.run.jury import MIN_PROMPT_TOKENS
from localjury.votes.heads import DecisionHead, HeadBinding
from tests.fakes import factory, judgment, spec

DATED = AspectCritic("dated", "The response must include a specific date or year.")
RECORDS = [{"id": "r", "user_input": "When?", "response": "In 1989."}]
CRITERION = "The answer is right."


def run(models, log, **settings):
    return evaluate(RECORDS, [DATED], models, use_cache=False, engine_factory=factory(lambda *_: judgment(1), log),
                    **settings)  # fmt: skip


# -- a thinking budget against the context ------------------------------------------------------


def test_a_thinking_budget_past_the_context_is_refused_before_any_model_loads():
    log: list = []
    with pytest.raises(
        ConfigError,
        match=r"model 'A': a thinking budget of 1,000,000,000 tokens, with max_tokens 512 and 32 for the close, "
        r"takes 1,000,000,544 of its context_length 4,096 and leaves fewer than 64 tokens for a prompt: lower "
        r"the thinking budget \(--thinking, or thinking in models.yaml\)",
    ):
        run([spec("A")], log, thinking=10**9)
    assert log == []  # nothing loaded


def test_the_budget_counts_the_runs_max_tokens_and_the_models_own_thinking():
    log: list = []
    with pytest.raises(ConfigError, match=r"model 'B': a thinking budget of 3,000 tokens, with max_tokens 1,001"):
        run([spec("A"), spec("B", thinking=3000)], log, max_tokens=1001)
    assert log == []
    # 512 + 3,000 + 32 leaves 552 tokens: enough for a prompt
    assert run([spec("B", thinking=3000)], log).results[0].models[0].verdict == 1
    room = 4096 - 512 - 32 - MIN_PROMPT_TOKENS
    run([spec("C", thinking=room)], log)
    with pytest.raises(ConfigError, match=f"a thinking budget of {room + 1:,} tokens"):
        run([spec("C", thinking=room + 1)], log)


def test_thinking_off_or_unset_is_never_refused():
    log: list = []
    assert run([spec("A", context_length=300)], log, thinking=0).results[0].models[0].error is not None
    assert run([spec("A", thinking=0)], log).results[0].models[0].verdict == 1


# -- a decision head against its model's shape ---------------------------------------------------


def folder(tmp_path, config: dict, name: str = "model"):
    path = tmp_path / name
    path.mkdir()
    (path / "config.json").write_text(json.dumps(config))
    return path


def head(model_spec, weights: int, layer: int = 1) -> DecisionHead:
    binding = HeadBinding(model=model_spec.name, weights_sha256=model_identity(model_spec),
                          engine=model_spec.engine, prompt_format="auto", criterion=CRITERION)  # fmt: skip
    return DecisionHead(layer=layer, weights=[0.5] * weights, bias=0.0, c=1.0, binding=binding, labels=8)


def profile_file(tmp_path, *heads: DecisionHead):
    data = {"criterion": {"name": "right", "definition": CRITERION}, "heads": [h.model_dump() for h in heads]}
    path = tmp_path / "judge.yaml"
    path.write_text(JudgeProfile.model_validate(data).dump_yaml())
    return path


def judge_with(tmp_path, model_spec, fitted: DecisionHead, log: list):
    return evaluate(RECORDS, [], profile=profile_file(tmp_path, fitted), models=[model_spec], use_cache=False,
                    engine_factory=factory(lambda *_: judgment(1), log))  # fmt: skip


def test_a_head_with_another_count_of_weights_than_the_hidden_size_is_refused_unloaded(tmp_path):
    a = spec("A", engine="transformers").model_copy(update={"path": str(folder(tmp_path, {"hidden_size": 4}))})
    log: list = []
    with pytest.raises(
        ConfigError,
        match=r"the decision head of 'A' in judge profile .*judge\.yaml has 3 weights, but model 'A' has a hidden "
        r"size of 4 \(its .*config\.json\): it was fitted on another model's hidden states: run `localjury align`",
    ):
        judge_with(tmp_path, a, head(a, 3), log)
    assert log == []


def test_a_head_on_a_layer_the_model_lacks_is_refused_unloaded(tmp_path):
    config = {"text_config": {"hidden_size": 3, "num_hidden_layers": 2}, "vision_config": {"hidden_size": 9}}
    a = spec("A", engine="transformers").model_copy(update={"path": str(folder(tmp_path, config))})
    log: list = []
    with pytest.raises(ConfigError, match=r"reads layer 2, but model 'A' has 2 blocks, 0 to 1 \(its .*config\.json\)"):
        judge_with(tmp_path, a, head(a, 3, layer=2), log)
    assert log == []


def test_a_head_that_fits_its_model_passes_the_check(tmp_path):
    from tests.unit.bench.test_heads import Hidden

    a = spec("A", engine="transformers").model_copy(
        update={"path": str(folder(tmp_path, {"hidden_size": 3, "num_hidden_layers": 4}))}
    )
    log: list = []
    result = evaluate(RECORDS, [], profile=profile_file(tmp_path, head(a, 3)), models=[a], use_cache=False,
                      engine_factory=lambda s: Hidden(s, log))  # fmt: skip
    assert result.results[0].models[0].head is not None and ("hidden", 1, [1]) in log


# -- the shape read from a GGUF file's metadata ---------------------------------------------------


def gguf_bytes(meta: list[tuple[str, int, bytes]], version: int = 3) -> bytes:
    """A GGUF header with these (key, type, packed value) entries and no tensors."""

    def text(s: str) -> bytes:
        return struct.pack("<Q", len(s.encode())) + s.encode()

    body = b"".join(text(k) + struct.pack("<I", kind) + value for k, kind, value in meta)
    return b"GGUF" + struct.pack("<IQQ", version, 0, len(meta)) + body


def string(s: str) -> bytes:
    return struct.pack("<Q", len(s.encode())) + s.encode()


LLAMA = [
    ("general.architecture", 8, string("llama")),
    ("general.tags", 9, struct.pack("<IQ", 8, 2) + string("a") + string("bc")),  # an array of strings, skipped
    ("llama.context_length", 4, struct.pack("<I", 2048)),
    ("llama.rope.freq_base", 6, struct.pack("<f", 1e4)),
    ("llama.embedding_length", 4, struct.pack("<I", 5)),
    ("llama.block_count", 10, struct.pack("<Q", 3)),
]


def test_a_gguf_files_hidden_size_and_blocks_are_read_from_its_metadata(tmp_path):
    path = tmp_path / "m.gguf"
    path.write_bytes(gguf_bytes(LLAMA) + b"\x00" * 64)
    assert gguf_shape(path) == ModelShape(5, 3, f"the metadata of {path}")


def test_the_gguf_packages_own_writer_is_read_alike(tmp_path):
    gguf = pytest.importorskip("gguf")
    path = tmp_path / "w.gguf"
    writer = gguf.GGUFWriter(str(path), "qwen2")
    writer.add_block_count(24)
    writer.add_embedding_length(896)
    writer.add_context_length(32768)
    writer.add_token_list([b"a", b"b", b"<|im_end|>"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    assert gguf_shape(path) == ModelShape(896, 24, f"the metadata of {path}")


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"NOPE" + b"\x00" * 40,  # not a GGUF file
        gguf_bytes(LLAMA, version=1),  # GGUF 1: not read
        gguf_bytes(LLAMA)[:60],  # ends inside its metadata
        gguf_bytes([("general.architecture", 8, struct.pack("<Q", 1 << 40) + b"x")]),  # a string past the file
        gguf_bytes([("x", 99, b"")]),  # a value of no known type
        gguf_bytes([("x", 9, struct.pack("<IQ", 9, 1) + struct.pack("<IQ", 4, 1) + b"\0" * 4)]),  # arrays of arrays
        gguf_bytes([("x", 9, struct.pack("<IQ", 12, 1 << 62))]),  # an array that ends past the file
    ],
)
def test_a_file_that_is_no_readable_gguf_has_no_shape(tmp_path, data):
    path = tmp_path / "bad.gguf"
    path.write_bytes(data)
    assert gguf_shape(path) is None


def test_a_gguf_without_the_keys_has_an_unknown_shape(tmp_path):
    path = tmp_path / "m.gguf"
    path.write_bytes(gguf_bytes([("general.architecture", 8, string("llama"))]))
    assert gguf_shape(path) == ModelShape(None, None, f"the metadata of {path}")


def test_a_gguf_models_head_is_refused_unloaded(tmp_path):
    path = tmp_path / "judge.gguf"
    path.write_bytes(gguf_bytes(LLAMA))
    a = spec("A", engine="llamacpp").model_copy(update={"path": str(path)})
    log: list = []
    with pytest.raises(ConfigError, match=r"has 3 weights, but model 'A' has a hidden size of 5 \(the metadata of "):
        judge_with(tmp_path, a, head(a, 3), log)
    assert log == []


@pytest.mark.parametrize(
    ("config", "shape"),
    [
        ({"hidden_size": 896, "num_hidden_layers": 24}, (896, 24)),
        ({"n_embd": 768, "n_layer": 12}, (768, 12)),
        ({"text_config": {"hidden_size": 640, "num_hidden_layers": 18}, "hidden_size": 1}, (640, 18)),
        ({"hidden_size": "896", "num_hidden_layers": True}, (None, None)),  # not whole numbers: unknown
        ({}, (None, None)),
    ],
)
def test_a_config_json_gives_the_text_models_shape(tmp_path, config, shape):
    path = folder(tmp_path, config) / "config.json"
    assert config_shape(path) == ModelShape(*shape, f"its {path}")


def test_a_config_json_that_is_not_json_has_no_shape(tmp_path):
    path = tmp_path / "config.json"
    path.write_text("{not json")
    assert config_shape(path) is None


def test_both_refusals_come_before_an_engine_is_chosen(tmp_path, monkeypatch):
    """``engine: auto`` may time each engine on the model (a load each, minutes, once): the
    refusals do not wait for it. With ``auto``, a head's model is read as the engine it was
    fitted on loads it."""
    import localjury.run.jury

    def chosen(spec, override=None):
        raise AssertionError("an engine was chosen")

    monkeypatch.setattr(localjury.run.jury, "resolve_engine", chosen)
    with pytest.raises(ConfigError, match="a thinking budget of 1,000,000,000 tokens"):
        run([spec("A")], [], thinking=10**9)
    path = tmp_path / "judge.gguf"
    path.write_bytes(gguf_bytes(LLAMA))
    a = spec("A").model_copy(update={"path": str(path)})  # engine: auto
    fitted = head(a.model_copy(update={"engine": "llamacpp"}), 4)
    with pytest.raises(ConfigError, match=r"has 4 weights, but model 'A' has a hidden size of 5 \(the metadata of "):
        judge_with(tmp_path, a, fitted, [])
