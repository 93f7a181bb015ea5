"""Every path a run reads or writes is refused before any model loads when it could not be
written into the manifest (a name that is not UTF-8), and the judgment store, which a run writes
in place, is refused when it is one of the run's inputs (by path, through a link, or as a hard link)."""

import json
import os
from pathlib import Path

import pytest

from localjury import AspectCritic, evaluate
from localjury.errors import ConfigError
from localjury.results.manifest import build_manifest
from localjury.run.dry import dry_run
from tests.fakes import factory, fake_registry, judgment, run_args, run_cli, spec

METRIC = AspectCritic("dated", "The response includes a year.")


def latin1_folder(tmp_path: Path) -> Path:
    """A folder named with Latin-1's ``caf\\xe9`` (not UTF-8), as Python holds it."""
    folder = os.path.join(os.fsencode(tmp_path), b"caf\xe9")
    os.mkdir(folder)
    return Path(os.fsdecode(folder))


def dataset(folder: Path, n: int = 2) -> Path:
    path = folder / "d.jsonl"
    path.write_text("".join(json.dumps({"id": f"r{i}", "response": f"in {1990 + i}"}) + "\n" for i in range(n)))
    return path


def answer(model, prompt, j):
    return judgment(1)


@pytest.mark.parametrize("where", ["dataset", "out", "summary", "cache", "linked dataset"])
def test_a_path_that_is_not_utf8_is_refused_before_any_model_loads(tmp_path, where):
    odd = latin1_folder(tmp_path)
    data = dataset(odd if where == "dataset" else tmp_path)
    if where == "linked dataset":  # a UTF-8 name whose file lies in the odd folder
        target = dataset(odd)
        data = tmp_path / "link.jsonl"
        data.unlink(missing_ok=True)
        data.symlink_to(target)
    paths = {"out": tmp_path / "r.jsonl", "summary": None, "cache": None}
    if where in paths:
        paths[where] = odd / "x.jsonl"
    log: list = []
    with pytest.raises(ConfigError, match=r"caf\\xe9.* is not valid UTF-8 .*rename the file or folder"):
        evaluate(data, [METRIC], [spec("A")], out=paths["out"], summary=paths["summary"],
                 **({"cache": paths["cache"]} if paths["cache"] else {"use_cache": False}),
                 engine_factory=factory(answer, log))  # fmt: skip
    assert log == []
    assert not any(p.name.startswith("x.") for p in odd.iterdir())


def test_the_cli_refuses_an_output_folder_that_is_not_utf8_and_writes_nothing(tmp_path, monkeypatch, capsys):
    odd = latin1_folder(tmp_path)
    registry = fake_registry(tmp_path)
    code, _, err = run_cli(monkeypatch, capsys, *run_args(dataset(tmp_path), registry, odd / "r.jsonl", "--no-cache"))
    assert code == 2 and "caf\\xe9" in err and "is not valid UTF-8" in err
    assert list(odd.iterdir()) == []


def test_the_manifest_writes_an_argument_that_is_not_utf8_escaped():
    manifest = build_manifest(command=["localjury", "run", "caf\udce9.jsonl"], dataset=None, seed=0, settings={},
                              metrics=[], models=[], cache=None)  # fmt: skip
    assert manifest.command == ["localjury", "run", "caf\\xe9.jsonl"]
    manifest.model_dump_json().encode("utf-8")


@pytest.mark.parametrize("how", ["same path", "symlink", "hard link"])
@pytest.mark.parametrize("content", ["", '{"id": "r0", "response": "in 1990"}\n'])
def test_a_judgment_store_that_is_the_dataset_is_refused_and_the_dataset_left_as_it_was(tmp_path, how, content):
    data = tmp_path / "d.jsonl"
    data.write_text(content)
    store = data
    if how != "same path":
        store = tmp_path / "store.sqlite"
        store.symlink_to(data) if how == "symlink" else os.link(data, store)
    log: list = []
    with pytest.raises(ConfigError, match=rf"the judgment store {store} would overwrite the dataset \({data}\)"):
        evaluate(data, [METRIC], [spec("A")], cache=store, out=tmp_path / "r.jsonl",
                 engine_factory=factory(answer, log))  # fmt: skip
    assert log == [] and data.read_text() == content
    with pytest.raises(ConfigError, match="would overwrite the dataset"):
        dry_run(data, [METRIC], [spec("A")], cache=store, engine_factory=factory(answer, log))
    assert data.read_text() == content and not Path(f"{store}-journal").exists()


@pytest.mark.parametrize("what", ["models.yaml", "rubrics file"])
def test_a_judgment_store_that_is_another_input_is_refused(tmp_path, what):
    registry = tmp_path / "models.yaml"
    registry.write_text("models: {}\n")
    rubrics = tmp_path / "rubrics.yaml"
    rubrics.write_text("criteria:\n  - name: year\n    version: 1\n    definition: The response includes a year.\n")
    store = registry if what == "models.yaml" else rubrics
    before = store.read_bytes()
    with pytest.raises(ConfigError, match=f"would overwrite the {what}"):
        evaluate(dataset(tmp_path), [METRIC], [spec("A")], cache=store, registry=registry, rubrics=rubrics,
                 engine_factory=factory(answer, []))  # fmt: skip
    assert store.read_bytes() == before


def test_a_bench_store_that_is_its_labels_is_refused(tmp_path):
    pytest.importorskip("sklearn")
    from localjury.bench.run import run_bench

    labels = tmp_path / "labels.jsonl"
    labels.write_text(json.dumps({"response": "x", "gold": 1}) + "\n")
    log: list = []
    with pytest.raises(ConfigError, match=r"the judgment store .* would overwrite the dataset"):
        run_bench(labels, "jsonl", [spec("A")], tmp_path / "out", metric='g="x"', cache=labels,
                  engine_factory=factory(answer, log))  # fmt: skip
    assert log == [] and labels.read_text() == json.dumps({"response": "x", "gold": 1}) + "\n"
