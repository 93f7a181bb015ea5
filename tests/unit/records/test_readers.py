"""Hugging Face datasets and RAGAS-shaped evaluation datasets as input: read in place, chunk by
chunk, with the same fields, aliases, ids and per-record errors as the files."""

import sys
import tracemalloc
from typing import Literal

import datasets
import pytest
from pydantic import BaseModel

from localjury import AspectCritic, evaluate
from localjury.errors import ConfigError, MissingDependencyError
from localjury.records.readers import Dataset, iter_records
from localjury.records.record import Record
from localjury.results.manifest import Manifest
from localjury.results.verify import verify
from tests.fakes import factory, judgment, spec

DATED = AspectCritic("dated", "The response must include a specific date or year.")


def judge(records, **kw):
    return evaluate(records, [DATED], [spec("A")], engine_factory=factory(lambda m, p, j: judgment(1), []), **kw)


def test_a_dataset_is_judged_with_its_ids_aliases_and_per_row_errors():
    ds = datasets.Dataset.from_list(
        [
            {"id": "wall", "question": "When did the Wall fall?", "answer": "In 1989.", "contexts": ["c1"]},
            {"id": "moon", "question": "Who walked first?", "answer": None, "contexts": []},
            {"id": "eiffel", "question": "When?", "answer": "In 1889.", "contexts": None},
        ]
    )
    result = judge(ds)
    wall, moon, eiffel = result.results
    assert (wall.record_id, wall.score, eiffel.record_id, eiffel.score) == ("wall", 1.0, "eiffel", 1.0)
    assert moon.error == "record 'moon' (row index 1), field 'response': missing (also accepted under the alias " \
        "'answer'; a pair: response_a and response_b)"  # fmt: skip
    assert result.summary.records == 3 and result.summary.record_errors == 1


def test_rows_without_an_id_get_the_content_hash_of_a_file_record(tmp_path):
    rows = [{"user_input": "q", "response": "a", "retrieved_contexts": ["c"]}]
    (tmp_path / "d.jsonl").write_text('{"user_input": "q", "response": "a", "retrieved_contexts": ["c"]}\n')
    from_file = [r.id for r in iter_records(tmp_path / "d.jsonl")]
    assert [r.id for r in Dataset(datasets.Dataset.from_list(rows)).entries()] == from_file


def test_a_formatted_dataset_is_read_as_python_values():
    ds = datasets.Dataset.from_list([{"id": 7, "response": "x", "retrieved_contexts": ["a", "b"]}]).with_format("numpy")
    (record,) = Dataset(ds).entries()
    assert record == Record(id="7", response="x", retrieved_contexts=["a", "b"])


def test_a_dataset_dict_asks_for_one_split():
    split = datasets.Dataset.from_list([{"response": "y"}])
    dd = datasets.DatasetDict({"train": split, "test": split})
    message = r"a DatasetDict holds 2 splits \(train, test\); give one of them, e.g. dataset\['train'\]"
    with pytest.raises(ConfigError, match=message):
        judge(dd)
    assert judge(dd["test"]).results[0].score == 1.0


def test_a_save_to_disk_folder_is_read_memory_mapped_and_hashed_in_the_manifest(tmp_path):
    folder = tmp_path / "saved"
    datasets.Dataset.from_list([{"id": f"r{i}", "response": f"in {1900 + i}"} for i in range(5)]).save_to_disk(folder)
    result = judge(folder, out=tmp_path / "out" / "r.jsonl", cache=tmp_path / "s.sqlite")
    assert [r.record_id for r in result.iter_results()] == [f"r{i}" for i in range(5)]
    manifest = result.manifest
    assert manifest is not None and manifest.dataset is not None
    assert manifest.dataset["path"] == str(folder.resolve()) and len(manifest.dataset["sha256"]) == 64
    checks = verify(Manifest.model_validate(manifest.model_dump()), tmp_path / "out" / "r.manifest.json")
    assert next(c for c in checks if c.what.startswith("dataset")).ok
    arrow = next(folder.glob("*.arrow"))
    arrow.write_bytes(arrow.read_bytes() + b"\0")
    checks = verify(manifest, tmp_path / "out" / "r.manifest.json")
    assert not next(c for c in checks if c.what.startswith("dataset")).ok


def test_an_output_inside_the_dataset_folder_is_refused(tmp_path):
    folder = tmp_path / "saved"
    datasets.Dataset.from_list([{"response": "x"}]).save_to_disk(folder)
    with pytest.raises(ConfigError, match="would overwrite the dataset"):
        judge(folder, out=folder / "results.jsonl")


def test_errors_in_a_folder_name_the_folder_and_the_row_index(tmp_path):
    folder = tmp_path / "saved"
    datasets.Dataset.from_list([{"id": "a", "response": "x"}, {"id": "b", "user_input": "q"}]).save_to_disk(folder)
    _, bad = iter_records(folder)
    assert str(bad) == "record 'b' (saved row index 1), field 'response': missing (also accepted under the alias " \
        "'answer'; a pair: response_a and response_b)"  # fmt: skip


def test_a_dataset_dict_folder_with_one_split_is_read_and_with_two_asks_for_one(tmp_path):
    one = tmp_path / "one"
    datasets.DatasetDict({"test": datasets.Dataset.from_list([{"id": "a", "response": "x"}])}).save_to_disk(one)
    assert [r.id for r in iter_records(one)] == ["a"]
    two = tmp_path / "two"
    split = datasets.Dataset.from_list([{"response": "x"}])
    datasets.DatasetDict({"train": split, "test": split}).save_to_disk(two)
    message = r"holds a DatasetDict of 2 splits \(train, test\); give one split's folder, e.g. .*two/train"
    with pytest.raises(ConfigError, match=message):
        list(iter_records(two))


def test_a_folder_without_the_datasets_package_names_the_extra(tmp_path, monkeypatch):
    folder = tmp_path / "saved"
    datasets.Dataset.from_list([{"response": "x"}]).save_to_disk(folder)
    monkeypatch.setitem(sys.modules, "datasets", None)  # import datasets -> ImportError
    message = r"saved is a Hugging Face datasets folder .*pip install 'localjury\[datasets\]'"
    with pytest.raises(MissingDependencyError, match=message):
        list(iter_records(folder))


def test_any_other_folder_is_still_refused(tmp_path):
    message = r"is a folder, not a dataset file; .*or a folder that Hugging Face datasets' save_to_disk wrote"
    with pytest.raises(ConfigError, match=message):
        list(iter_records(tmp_path))


def test_a_large_dataset_is_read_a_batch_at_a_time_not_copied(tmp_path):
    """20,000 rows of 2 kB (40 MB of text once in Python) saved to disk and read back: a pass
    over the records, chunk by chunk, holds a few MB of Python objects at its peak."""
    folder = tmp_path / "big"
    text = "x" * 2000
    datasets.Dataset.from_dict({"response": [f"{i} {text}" for i in range(20_000)]}).save_to_disk(folder)
    dataset = Dataset(folder)
    tracemalloc.start()
    try:
        records = sum(len(chunk) for chunk in dataset.chunks(100))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert records == 20_000
    assert peak < 8_000_000, f"a pass held {peak / 1e6:.1f} MB: the dataset was copied into memory"


# RAGAS's own classes, as far as localjury reads them (ragas itself is not a dependency).
class SingleTurnSample(BaseModel):
    user_input: str | None = None
    retrieved_contexts: list[str] | None = None
    reference_contexts: list[str] | None = None
    response: str | None = None
    multi_responses: list[str] | None = None
    reference: str | None = None
    rubrics: dict[str, str] | None = None


class HumanMessage(BaseModel):
    content: str
    type: Literal["human"] = "human"


class MultiTurnSample(BaseModel):
    user_input: list[HumanMessage]
    reference: str | None = None


class EvaluationDataset(BaseModel):
    samples: list[SingleTurnSample | MultiTurnSample]

    def __iter__(self):  # RAGAS's dataset iterates over its samples (a pydantic model's would not)
        return iter(self.samples)


def test_a_ragas_evaluation_dataset_is_judged_and_a_multi_turn_sample_is_a_conversation():
    ragas = EvaluationDataset(
        samples=[
            SingleTurnSample(user_input="When?", response="In 1989.", retrieved_contexts=["c"], reference="1989"),
            MultiTurnSample(user_input=[HumanMessage(content="hi")]),
            SingleTurnSample(user_input="Who?"),
        ]
    )
    result = judge(ragas)
    ok, multi, missing = result.results
    expected = Record(id="x", user_input="When?", response="In 1989.", retrieved_contexts=["c"], reference="1989")
    from localjury.records.record import content_id

    assert ok.record_id == content_id(expected.model_dump()) and ok.score == 1.0
    # A conversation record (tests/unit/records/test_conversation.py): with no assistant turn, the
    # last turn the criterion judges is missing.
    assert multi.error is not None and "(sample index 1), field 'messages': metric 'dated' judges the last " \
        "assistant turn, and the conversation has no assistant turn with text" in multi.error  # fmt: skip
    assert missing.error is not None and "(sample index 2), field 'response': missing" in missing.error
    assert len(ragas.samples) == 3  # read in place, left as it was


def test_an_iterable_dataset_is_read_too():
    ds = datasets.Dataset.from_dict({"id": ["a", "b"], "response": ["x", None], "answer": [None, "y"]})
    assert [(r.id, r.response) for r in Dataset(ds.to_iterable_dataset()).entries()] == [("a", "x"), ("b", "y")]
