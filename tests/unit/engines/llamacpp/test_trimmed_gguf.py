"""A GGUF cut after a block (what a read of shallow states runs on): its metadata and the tensors
it keeps byte for byte, read back by gguf's own reader."""

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
pytest.importorskip("llama_cpp", reason="the llamacpp extra (scripts/test installs it)")

from localjury.engines.llamacpp.trimmed import trimmed_gguf  # noqa: E402

TOKENS = ["<s>", "</s>", "a", "b", "\u00e9t\u00e9", ""]


def write_model(path, blocks=4, alignment=None, nested=False):
    """A small GGUF with llama.cpp's names: embeddings, ``blocks`` blocks of two tensors of
    different types and sizes, an output norm; metadata of every kind (strings, arrays of
    strings and numbers, a float, a bool)."""
    rng = np.random.default_rng(0)
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_block_count(blocks)
    writer.add_name("tiny")
    writer.add_context_length(128)
    writer.add_rope_freq_base(10000.0)
    writer.add_bool("tiny.flag", True)
    writer.add_token_list(TOKENS)
    writer.add_token_scores([0.5 * i for i in range(len(TOKENS))])
    writer.add_array("tiny.sizes", [1, 2, 3])
    if alignment:
        writer.add_custom_alignment(alignment)
    if nested:
        writer.add_array("tiny.nested", [[1, 2], [3]])
    writer.add_tensor("token_embd.weight", rng.standard_normal((6, 8), dtype=np.float32))
    for i in range(blocks):
        writer.add_tensor(f"blk.{i}.attn_q.weight", rng.standard_normal((8, 8), dtype=np.float32))
        writer.add_tensor(f"blk.{i}.ffn_up.weight", rng.standard_normal((3 + i, 8)).astype(np.float16))
    writer.add_tensor("output_norm.weight", rng.standard_normal(8, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def fields(reader):
    return {
        name: field.contents()
        for name, field in reader.fields.items()
        if not name.startswith("GGUF.") and name != "llama.block_count"
    }


@pytest.mark.parametrize("alignment", [None, 64])
def test_a_copy_cut_after_a_block_keeps_the_metadata_and_the_tensors_up_to_it(tmp_path, alignment):
    source = write_model(tmp_path / "model.gguf", alignment=alignment)
    copy = trimmed_gguf(source, 1, tmp_path / "trimmed")
    original, cut = gguf.GGUFReader(source), gguf.GGUFReader(copy)
    assert cut.fields["llama.block_count"].contents() == 2
    assert fields(cut) == fields(original)
    assert fields(cut)["tokenizer.ggml.tokens"] == TOKENS
    kept = [t for t in original.tensors if not t.name.startswith(("blk.2.", "blk.3."))]
    assert [t.name for t in cut.tensors] == [t.name for t in kept]
    for want, got in zip(kept, cut.tensors, strict=True):
        assert got.tensor_type == want.tensor_type and list(got.shape) == list(want.shape)
        assert got.data_offset % cut.alignment == 0
        np.testing.assert_array_equal(got.data, want.data)


def test_a_copy_is_written_once_named_after_its_source_and_blocks(tmp_path, capsys):
    source = write_model(tmp_path / "model.gguf")
    copy = trimmed_gguf(source, 2, tmp_path / "trimmed")
    assert copy.name.endswith("-blocks3.gguf") and "writing blocks 0-2 of model.gguf" in capsys.readouterr().err
    written = copy.stat().st_mtime_ns
    assert trimmed_gguf(source, 2, tmp_path / "trimmed") == copy and copy.stat().st_mtime_ns == written
    assert capsys.readouterr().err == ""
    assert [p.name for p in (tmp_path / "trimmed").iterdir()] == [copy.name]  # no temporary file left
    other = trimmed_gguf(source, 0, tmp_path / "trimmed")
    assert other != copy and gguf.GGUFReader(other).fields["llama.block_count"].contents() == 1


@pytest.mark.parametrize("top", [3, 4, -1])
def test_no_copy_of_the_last_block_or_beyond(tmp_path, top):
    source = write_model(tmp_path / "model.gguf")
    with pytest.raises(ValueError, match=f"has no block {top} below its last"):
        trimmed_gguf(source, top, tmp_path / "trimmed")
    assert not (tmp_path / "trimmed").exists()


def test_a_file_that_is_not_gguf_is_refused(tmp_path):
    bad = tmp_path / "model.gguf"
    bad.write_bytes(b"GGML" + bytes(60))
    with pytest.raises(ValueError, match="not a little-endian GGUF"):
        trimmed_gguf(bad, 0, tmp_path / "trimmed")


def test_a_copy_that_differs_from_its_source_is_written_again(tmp_path, caplog):
    source = write_model(tmp_path / "model.gguf")
    copy = trimmed_gguf(source, 1, tmp_path / "trimmed")
    good = copy.read_bytes()
    damaged = bytearray(good)
    damaged[-5] ^= 0xFF  # one byte of the last tensor kept
    copy.write_bytes(bytes(damaged))
    with caplog.at_level("WARNING"):
        assert trimmed_gguf(source, 1, tmp_path / "trimmed") == copy
    assert copy.read_bytes() == good and "differs from a copy of" in caplog.text
    copy.write_bytes(good[:-64])  # cut short
    trimmed_gguf(source, 1, tmp_path / "trimmed")
    assert copy.read_bytes() == good


def test_a_link_in_a_copys_place_is_replaced_never_followed(tmp_path):
    source = write_model(tmp_path / "model.gguf")
    elsewhere = tmp_path / "elsewhere.gguf"
    copy = trimmed_gguf(source, 1, tmp_path / "trimmed")
    elsewhere.write_bytes(copy.read_bytes())  # even a link to the right bytes
    copy.unlink()
    copy.symlink_to(elsewhere)
    assert trimmed_gguf(source, 1, tmp_path / "trimmed") == copy
    assert not copy.is_symlink() and copy.read_bytes() == elsewhere.read_bytes()


def test_a_gguf_with_arrays_of_arrays_is_refused_as_its_shape_is(tmp_path):
    """The header is read as the model's shape is (``models/_shape.GgufHeader``), which reads no
    array of arrays: the whole model is then read instead."""
    source = write_model(tmp_path / "model.gguf", nested=True)
    with pytest.raises(ValueError, match="a value of GGUF type 9"):
        trimmed_gguf(source, 1, tmp_path / "trimmed")
