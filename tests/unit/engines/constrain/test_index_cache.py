"""The compiled-index cache (engines/constrain/index_cache.py) over a hand-made vocabulary: a second
build is a hit (in the process, then from disk), the index read back constrains exactly as a
fresh one, damaged or foreign files are rebuilt and replaced, keys separate schemas and
vocabularies, and the disk cache can be turned off or be unwritable without a word."""

import json
import logging
import os
import random
import time

import pytest
from outlines_core import Index, Vocabulary
from outlines_core.json_schema import build_regex_from_schema

from localjury.engines.constrain import index_cache
from localjury.engines.constrain.index_cache import compiled_index, index_key, prune, vocabulary_key
from localjury.engines.constrain.lru import Lru

SCHEMA = {
    "type": "object",
    "properties": {"reason": {"type": "string", "maxLength": 20}, "verdict": {"enum": [0, 1]}},
    "required": ["reason", "verdict"],
}
OUTPUT = '{"reason": "ok, fine", "verdict": 1}'
MULTI = ['{"', '":', ' "', '",', "reason", "verdict", "ok"]
EOS = "</s>"


def token_ids() -> dict[str, int]:
    """Every printable ASCII character, a few multi-character pieces, then the end token."""
    tokens = [chr(c) for c in range(32, 127)] + MULTI + [EOS]
    return {token: i for i, token in enumerate(tokens)}


def vocabulary(ids: dict[str, int] | None = None, order: list[str] | None = None) -> Vocabulary:
    ids = ids or token_ids()
    keys = order or list(ids)
    return Vocabulary(ids[EOS], {t: [ids[t]] for t in keys if t != EOS})


def regex(schema: dict = SCHEMA) -> str:
    return build_regex_from_schema(json.dumps(schema), r"[ ]?")


@pytest.fixture(autouse=True)
def fresh_caches(monkeypatch):
    """Empty in-process caches for each test, and a count of the indexes actually built."""
    monkeypatch.setattr(index_cache, "INDEXES", Lru(index_cache.MEMORY_ENTRIES, index_cache.MEMORY_BUDGET))
    monkeypatch.setattr(index_cache, "VOCABULARIES", Lru(4))
    monkeypatch.delenv("LOCALJURY_INDEX_CACHE", raising=False)
    built: list[str] = []
    real = index_cache.build_index

    def counting(rx: str, vocab: Vocabulary) -> Index:
        built.append(rx)
        return real(rx, vocab)

    monkeypatch.setattr(index_cache, "build_index", counting)
    return built


def entry_path(rx: str, vocab: Vocabulary):
    return index_cache.disk_folder() / f"{index_key(rx, vocabulary_key(vocab))}.idx"


def walk(index: Index, text: str) -> list[tuple[list[int], bool]]:
    """(allowed tokens, final?) at each state along ``text``, tokenised longest match first."""
    ids = token_ids()
    state = index.get_initial_state()
    seen = []
    pos = 0
    while pos < len(text):
        piece = max((t for t in ids if t != EOS and text.startswith(t, pos)), key=len)
        seen.append((sorted(index.get_allowed_tokens(state) or []), index.is_final_state(state)))
        state = index.get_next_state(state, ids[piece])
        assert state is not None, f"the index refuses {piece!r} at {pos} of {text!r}"
        pos += len(piece)
    seen.append((sorted(index.get_allowed_tokens(state) or []), index.is_final_state(state)))
    return seen


def test_a_second_build_in_the_process_is_the_same_index(fresh_caches):
    vocab = vocabulary()
    first = compiled_index(regex(), vocab)
    second = compiled_index(regex(), vocabulary())  # an equal vocabulary, another object
    assert second is first
    assert fresh_caches == [regex()]


def test_a_long_build_is_announced_with_its_estimate_once(fresh_caches, monkeypatch, capsys):
    vocab = vocabulary()
    monkeypatch.setattr(index_cache, "BUILD_SECONDS_PER_TOKEN", 0.1)  # 10 s for this vocabulary's ~100 tokens
    compiled_index(regex(), vocab)
    err = capsys.readouterr().err
    assert f"building the output constraint over {len(vocab)} tokens (about {len(vocab) * 0.1:.0f} s" in err
    assert str(index_cache.disk_folder()) in err
    index_cache.INDEXES.clear()
    compiled_index(regex(), vocab)  # read from disk: nothing to announce
    monkeypatch.setattr(index_cache, "BUILD_SECONDS_PER_TOKEN", 0.001)
    compiled_index(regex({**SCHEMA, "required": ["verdict"]}), vocab)  # a short build: unsaid
    assert capsys.readouterr().err == ""


def test_the_disk_entry_is_read_in_a_new_process_and_constrains_as_a_fresh_index(fresh_caches):
    vocab = vocabulary()
    compiled_index(regex(), vocab)
    assert entry_path(regex(), vocab).is_file()
    index_cache.INDEXES.clear()  # what a new process starts with

    loaded = compiled_index(regex(), vocab)

    assert fresh_caches == [regex()]  # read back, not built again
    fresh = Index(regex(), vocab)
    assert loaded == fresh
    steps = walk(loaded, OUTPUT)
    assert steps == walk(fresh, OUTPUT)
    assert steps[-1] == ([token_ids()[EOS]], True)  # the output is whole: only the end may follow
    assert not any(final for _, final in steps[:-1])


def corrupt_payload(data: bytes) -> bytes:
    return data[:-10] + bytes(b ^ 0xFF for b in data[-10:])


def truncate(data: bytes) -> bytes:
    return data[: len(data) // 2]


def other_version(data: bytes) -> bytes:
    magic, header, payload = data.split(b"\n", 2)
    fields = json.loads(header)
    fields["outlines_core"] = "0.0.1"  # payload and digest intact: only the version differs
    return magic + b"\n" + json.dumps(fields).encode() + b"\n" + payload


def other_layout(data: bytes) -> bytes:
    return b"localjury-index-cache 0\n" + data.split(b"\n", 1)[1]


def garbage(data: bytes) -> bytes:
    return b"\x00\xff" * 100


def empty(data: bytes) -> bytes:
    return b""


@pytest.mark.parametrize(
    "damage", [corrupt_payload, truncate, other_version, other_layout, garbage, empty], ids=lambda f: f.__name__
)
def test_a_damaged_or_foreign_entry_is_rebuilt_and_replaced(fresh_caches, damage):
    vocab = vocabulary()
    compiled_index(regex(), vocab)
    path = entry_path(regex(), vocab)
    good = path.read_bytes()
    path.write_bytes(damage(good))
    index_cache.INDEXES.clear()

    index = compiled_index(regex(), vocab)

    assert fresh_caches == [regex(), regex()]
    assert index == Index(regex(), vocab)
    assert path.read_bytes() == good
    index_cache.INDEXES.clear()
    compiled_index(regex(), vocab)
    assert fresh_caches == [regex(), regex()]  # the replaced entry is read back


def test_an_entry_under_another_key_is_not_trusted(fresh_caches):
    vocab = vocabulary()
    other = regex({**SCHEMA, "properties": {**SCHEMA["properties"], "verdict": {"enum": [1]}}})
    compiled_index(regex(), vocab)
    # A file copied under another entry's name: intact, but its header names another key.
    entry_path(other, vocab).write_bytes(entry_path(regex(), vocab).read_bytes())
    index_cache.INDEXES.clear()

    index = compiled_index(other, vocab)

    assert fresh_caches == [regex(), other]
    assert index == Index(other, vocab)


def test_keys_differ_by_schema_and_by_vocabulary_content():
    vocab = vocabulary()
    assert vocabulary_key(vocab) == vocabulary_key(vocabulary())
    more = {**token_ids(), "fine": 200}
    assert vocabulary_key(vocabulary(more)) != vocabulary_key(vocab)
    other_ids = {t: (i + 1) % len(token_ids()) for t, i in token_ids().items()}
    assert vocabulary_key(vocabulary(other_ids)) != vocabulary_key(vocab)
    assert vocabulary_key(Vocabulary(500, {t: [i] for t, i in token_ids().items() if t != EOS})) != vocabulary_key(
        vocab
    )
    strict = regex({**SCHEMA, "properties": {**SCHEMA["properties"], "verdict": {"enum": [1]}}})
    assert index_key(strict, vocabulary_key(vocab)) != index_key(regex(), vocabulary_key(vocab))
    assert index_key(regex(), vocabulary_key(vocabulary(more))) != index_key(regex(), vocabulary_key(vocab))


def test_other_outlines_core_versions_use_other_entries(monkeypatch):
    key = index_key(regex(), vocabulary_key(vocabulary()))
    monkeypatch.setattr(index_cache, "outlines_core_version", lambda: "9.9.9")
    assert index_key(regex(), vocabulary_key(vocabulary())) != key


@pytest.mark.parametrize("off", ["0", "false", "OFF"])
def test_the_disk_cache_can_be_turned_off(fresh_caches, monkeypatch, off):
    monkeypatch.setenv("LOCALJURY_INDEX_CACHE", off)
    vocab = vocabulary()
    compiled_index(regex(), vocab)
    compiled_index(regex(), vocab)
    index_cache.INDEXES.clear()
    compiled_index(regex(), vocab)

    assert fresh_caches == [regex(), regex()]  # the process cache still works; no disk
    assert not (index_cache.localjury_home() / "index-cache").exists()


def test_an_unwritable_cache_folder_only_costs_the_rebuild(fresh_caches, monkeypatch, tmp_path, caplog):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("LOCALJURY_HOME", str(blocker / "home"))  # below a file: mkdir fails
    caplog.set_level(logging.DEBUG, logger=index_cache.__name__)
    vocab = vocabulary()

    assert compiled_index(regex(), vocab) == Index(regex(), vocab)
    index_cache.INDEXES.clear()
    compiled_index(regex(), vocab)

    assert fresh_caches == [regex(), regex()]
    assert [r.levelno for r in caplog.records] and all(r.levelno == logging.DEBUG for r in caplog.records)
    assert "cannot write" in caplog.text


def test_writing_leaves_no_temporary_file(fresh_caches):
    vocab = vocabulary()
    compiled_index(regex(), vocab)
    assert [p.name for p in index_cache.disk_folder().iterdir()] == [entry_path(regex(), vocab).name]


def test_the_process_cache_is_bounded_by_count_and_weight():
    lru: Lru[str, int] = Lru(entries=2, budget=10)
    lru.put("a", 1, 4)
    lru.put("b", 2, 4)
    assert lru.get("a") == 1  # now b is the least recently used
    lru.put("c", 3, 4)  # 12 > 10: b goes
    assert (lru.get("a"), lru.get("b"), lru.get("c")) == (1, None, 3)
    lru.put("d", 4, 1)  # 3 entries > 2: a goes
    assert (lru.get("a"), lru.get("c"), lru.get("d")) == (None, 3, 4)
    lru.put("huge", 5, 11)  # heavier than the whole budget: not kept, nothing else dropped
    assert (lru.get("huge"), len(lru)) == (None, 2)


def test_the_process_cache_drops_indexes_beyond_its_budget(fresh_caches, monkeypatch):
    monkeypatch.setattr(index_cache, "INDEXES", Lru(entries=1))
    monkeypatch.setenv("LOCALJURY_INDEX_CACHE", "0")
    strict = regex({**SCHEMA, "properties": {**SCHEMA["properties"], "verdict": {"enum": [1]}}})
    vocab = vocabulary()
    compiled_index(regex(), vocab)
    compiled_index(strict, vocab)
    compiled_index(regex(), vocab)
    assert fresh_caches == [regex(), strict, regex()]


def test_pruning_removes_the_least_recently_used_and_dead_writers_files(tmp_path):
    now = time.time()
    for age, name in enumerate(["new.idx", "mid.idx", "old.idx", "kept.idx"]):
        (tmp_path / name).write_bytes(b"x" * 100)
        os.utime(tmp_path / name, (now - 10 * age, now - 10 * age))
    (tmp_path / ".dead.tmp").write_bytes(b"x")
    os.utime(tmp_path / ".dead.tmp", (now - 2 * index_cache.STALE_TMP_S,) * 2)
    (tmp_path / ".live.tmp").write_bytes(b"x")

    prune(tmp_path, budget=250, keep="kept.idx")

    assert sorted(p.name for p in tmp_path.iterdir()) == [".live.tmp", "kept.idx", "new.idx"]


def test_reading_back_refreshes_an_entry_for_the_pruning(fresh_caches):
    vocab = vocabulary()
    compiled_index(regex(), vocab)
    path = entry_path(regex(), vocab)
    os.utime(path, (1, 1))
    index_cache.INDEXES.clear()
    compiled_index(regex(), vocab)
    assert path.stat().st_mtime > 1


class FakeBackend:
    def __init__(self, ids: dict[str, int]) -> None:
        self.ids = ids

    def to_str(self) -> str:
        return json.dumps({"model": {"vocab": self.ids}}, sort_keys=True)


class FakeTokenizer:
    """What Outlines' TransformerTokenizer and the cache read of a Hugging Face fast tokenizer;
    ``get_vocab`` answers in a shuffled order, as a fast tokenizer's does."""

    eos_token = EOS
    pad_token = None
    pad_token_id = None

    def __init__(self, ids: dict[str, int], seed: int = 0) -> None:
        self.ids = ids
        self.eos_token_id = ids[EOS]
        self.all_special_tokens = [EOS]
        self.backend_tokenizer = FakeBackend(ids)
        self.seed = seed

    def get_vocab(self) -> dict[str, int]:
        items = list(self.ids.items())
        random.Random(self.seed).shuffle(items)
        return dict(items)

    def convert_tokens_to_string(self, tokens: list[str]) -> str:
        return "".join(tokens)


@pytest.fixture
def outlines_module(monkeypatch):
    """engines/constrain/schemas.py, its vocabularies counted as they are built."""
    from localjury.engines.constrain import schemas

    built: list[int] = []
    real = schemas._build_vocabulary

    def counting(tok):
        built.append(id(tok))
        return real(tok)

    monkeypatch.setattr(schemas, "_build_vocabulary", counting)
    monkeypatch.setattr(schemas, "VOCABULARIES", Lru(4))
    return schemas, built


def test_a_tokenizer_vocabulary_is_built_once_per_content_in_the_process(outlines_module):
    schemas, built = outlines_module
    first = schemas.vocabulary_of_tokenizer(FakeTokenizer(token_ids(), seed=1))
    again = schemas.vocabulary_of_tokenizer(FakeTokenizer(token_ids(), seed=2))  # reloaded
    other = schemas.vocabulary_of_tokenizer(FakeTokenizer({**token_ids(), "fine": 200}))
    assert again is first
    assert other is not first
    assert len(built) == 2


def test_a_tokenizer_vocabulary_encodes_the_same_whatever_order_get_vocab_gives(outlines_module):
    schemas, _ = outlines_module
    keys = {vocabulary_key(schemas._build_vocabulary(FakeTokenizer(token_ids(), seed=s))) for s in range(5)}
    assert len(keys) == 1


def test_engines_loaded_again_share_the_index_and_the_decision_tokens(fresh_caches, outlines_module, monkeypatch):
    schemas, _ = outlines_module
    from localjury.engines import _local

    monkeypatch.setattr(_local, "_DECISION_TOKENS", Lru(8))
    classified: list[object] = []
    monkeypatch.setattr(
        _local, "VerdictTokens", lambda tok, decision: classified.append(tok) or schemas.VerdictTokens(tok, decision)
    )

    def load(seed: int) -> _local.LocalDecoding:
        engine = _local.LocalDecoding()
        engine.tokenizer = FakeTokenizer(token_ids(), seed=seed)
        engine._vocabulary = schemas.vocabulary_of_tokenizer(engine.tokenizer)
        engine._indexes = {}
        return engine

    first, second = load(1)._index(SCHEMA), load(2)._index(SCHEMA)

    assert second.index is first.index
    assert second.verdicts is first.verdicts
    assert len(fresh_caches) == 1 and len(classified) == 1
    assert first.verdicts is not None and first.verdicts.writes_verdict(token_ids()["1"])
