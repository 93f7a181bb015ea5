"""Index-cache entries are trusted only for what they are: a regular file (no link, FIFO,
device or folder in an entry's place) whose header holds the key material of the index asked
for (regex, vocabulary, outlines-core version), compared field by field, not a digest of it
that can be recomputed. Anything else is refused with a warning, rebuilt and replaced."""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable

import pytest
from outlines_core import Index

from localjury.engines.constrain import index_cache
from localjury.engines.constrain.index_cache import compiled_index, index_key, vocabulary_key
from tests.unit.engines.constrain.test_index_cache import SCHEMA, entry_path, fresh_caches, regex, vocabulary  # noqa: F401

OTHER = regex({**SCHEMA, "properties": {**SCHEMA["properties"], "verdict": {"enum": [1]}}})


@pytest.fixture
def warnings_seen(caplog):
    caplog.set_level(logging.WARNING, logger=index_cache.__name__)
    return caplog


def relabel(data: bytes, edit: Callable[[dict], None]) -> bytes:
    """An entry with its header edited as a forger would: the digest recomputed to fit."""
    magic, header, payload = data.split(b"\n", 2)
    fields = json.loads(header)
    edit(fields)
    return magic + b"\n" + json.dumps(fields).encode() + b"\n" + payload


def test_another_schema_s_index_relabelled_for_this_key_is_rebuilt(fresh_caches, warnings_seen):  # noqa: F811
    vocab = vocabulary()
    compiled_index(regex(), vocab)
    other_key = index_key(OTHER, vocabulary_key(vocab))

    def for_other(fields: dict) -> None:
        if "key" in fields:  # a layout whose header named its key by a digest
            fields["key"] = other_key

    entry_path(OTHER, vocab).write_bytes(relabel(entry_path(regex(), vocab).read_bytes(), for_other))
    index_cache.INDEXES.clear()

    index = compiled_index(OTHER, vocab)

    assert index == Index(OTHER, vocab) and index != Index(regex(), vocab)
    assert fresh_caches == [regex(), OTHER]
    assert f"{entry_path(OTHER, vocab)} was written for another regex" in warnings_seen.text


@pytest.mark.parametrize("field", ["regex", "vocabulary", "outlines_core", "layout"])
def test_an_entry_whose_header_claims_other_key_material_is_rebuilt(fresh_caches, warnings_seen, field):  # noqa: F811
    vocab = vocabulary()
    compiled_index(regex(), vocab)
    path = entry_path(regex(), vocab)
    good = path.read_bytes()
    path.write_bytes(relabel(good, lambda fields: fields.__setitem__(field, "something else")))
    index_cache.INDEXES.clear()

    assert compiled_index(regex(), vocab) == Index(regex(), vocab)

    assert fresh_caches == [regex(), regex()]
    assert path.read_bytes() == good
    assert f"{path} was written for another {field}" in warnings_seen.text


def release_when_stuck(path, thread: threading.Thread) -> bool:
    """Whether ``thread`` had to be released from opening the FIFO at ``path`` (old code)."""
    thread.join(60)
    if not thread.is_alive():
        return False
    fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)  # a writer: the blocked open returns
    os.close(fd)
    thread.join(60)
    return True


def test_a_fifo_in_an_entry_s_place_is_refused_without_waiting(fresh_caches, warnings_seen):  # noqa: F811
    vocab = vocabulary()
    path = entry_path(regex(), vocab)
    path.parent.mkdir(parents=True)
    os.mkfifo(path)
    got: list[Index] = []
    thread = threading.Thread(target=lambda: got.append(compiled_index(regex(), vocab)), daemon=True)
    thread.start()

    assert not release_when_stuck(path, thread), "opening the cache entry waited for a writer"
    assert got == [Index(regex(), vocab)] and fresh_caches == [regex()]
    assert path.is_file() and not path.is_fifo()  # replaced by the rebuilt entry
    assert f"{path} is not a regular file" in warnings_seen.text


def test_a_link_in_an_entry_s_place_is_refused_even_to_a_good_entry(fresh_caches, warnings_seen, tmp_path):  # noqa: F811
    vocab = vocabulary()
    compiled_index(regex(), vocab)
    path = entry_path(regex(), vocab)
    elsewhere = tmp_path / "elsewhere.idx"
    elsewhere.write_bytes(path.read_bytes())
    path.unlink()
    path.symlink_to(elsewhere)
    index_cache.INDEXES.clear()

    assert compiled_index(regex(), vocab) == Index(regex(), vocab)

    assert fresh_caches == [regex(), regex()]
    assert not path.is_symlink() and path.is_file()  # the link was replaced, its target left alone
    assert elsewhere.read_bytes() == path.read_bytes()
    assert f"{path} is a symbolic link, not a regular file" in warnings_seen.text


def test_a_folder_in_an_entry_s_place_only_costs_the_rebuild(fresh_caches, warnings_seen):  # noqa: F811
    vocab = vocabulary()
    path = entry_path(regex(), vocab)
    path.mkdir(parents=True)

    assert compiled_index(regex(), vocab) == Index(regex(), vocab)
    assert f"{path} is not a regular file" in warnings_seen.text


def test_a_header_nested_past_python_s_stack_is_refused(fresh_caches, warnings_seen):  # noqa: F811
    vocab = vocabulary()
    compiled_index(regex(), vocab)
    path = entry_path(regex(), vocab)
    magic = path.read_bytes().split(b"\n", 1)[0]
    path.write_bytes(magic + b"\n" + b"[" * 4000 + b"\n")
    index_cache.INDEXES.clear()

    assert compiled_index(regex(), vocab) == Index(regex(), vocab)
    assert fresh_caches == [regex(), regex()]


def test_an_entry_whose_header_lies_about_its_size_is_refused_unread(fresh_caches, warnings_seen):  # noqa: F811
    vocab = vocabulary()
    compiled_index(regex(), vocab)
    path = entry_path(regex(), vocab)
    path.write_bytes(relabel(path.read_bytes(), lambda fields: fields.__setitem__("size", 10**15)))
    index_cache.INDEXES.clear()

    assert compiled_index(regex(), vocab) == Index(regex(), vocab)
    assert f"{path} holds " in warnings_seen.text and "where its header says 1000000000000000" in warnings_seen.text
