"""Labeled data sets for judge benchmarks, read from a path and turned into gold-labeled records.

Each loader returns :class:`BenchItem` s: a record (the fields localjury judges), its gold
label (1: the response meets the criterion), and, where the data comes in pairs or groups,
the pair or group it belongs to. How the public sets map to records follows
``shared/data/README.md``.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any

from localjury._files import json_lines, open_regular_file, read_bounded
from localjury.bench.label_rows import of_metric, split_label, split_score
from localjury.errors import ConfigError, RecordError
from localjury.records.record import parse_record


@dataclass(frozen=True)
class BenchItem:
    """One record to judge, with its gold label."""

    record: dict[str, Any]
    """The record's fields (id, user_input, response, retrieved_contexts, reference)."""
    gold: int
    """1 when the response meets the criterion (follows the instruction, is faithful...), else 0."""
    pair: str | None = None
    """LLMBar, HaluEval QA: the pair the record belongs to (its two records share it)."""
    group: str | None = None
    """TruthfulQA: the question the answer belongs to (for per-question subsampling)."""
    error: RecordError | None = None
    """Why the row is not judged (a field of its record, its id or its pair cannot be read):
    reported in the results in the record's place while the others are judged."""
    location: str | None = None
    """Where the row sits in its file ("labels.jsonl line 7"), for messages."""
    metric: str | None = None
    """A labels file's row (``localjury review`` writes them): the metric it labels."""
    score: float | None = None
    """Graded labels (:func:`load_scored`): the human score on the rubric's scale, ``gold`` it
    rounded half up; None for yes/no labels."""

    @property
    def id(self) -> str:
        """The record's id, as its results name it."""
        return str(self.record["id"])

    def entry(self) -> dict[str, Any] | RecordError:
        """What a run is given for the row: its record, or the error that stands in its place."""
        return self.error if self.error is not None else self.record


@dataclass(frozen=True)
class Format:
    """A data set format: how to read it, and what to judge by default."""

    name: str
    load: Callable[[Path], list[BenchItem]]
    criterion: tuple[str, str] | None
    """The default criterion (name, text); None for formats that need --metric."""
    default_metric: str | None = None
    """A composite metric judged by default instead of a criterion (e.g. faithfulness)."""
    description: str = ""
    load_pairs: Callable[[Path], list[BenchItem]] | None = None
    """Read the set as pairwise records (``response_a``, ``response_b``; gold 1 when
    response_a is the better one), for a pairwise bench; None for sets that are not pairs."""


#: The most bytes a labeled set may hold: a set is sampled and stratified in memory, and
#: the public sets are a few MB (HaluEval QA, the largest here, 10,000 pairs in 5 MB).
MAX_LABELS_BYTES = 1 << 30
_WHAT = "labeled data set"
_HINT = "give the path of the data set file"


def _open(path: Path) -> IO[bytes]:
    """A labeled set's file, opened as a regular file (never waiting on a FIFO, refusing one
    that cannot be read) and refused over :data:`MAX_LABELS_BYTES`, unread.

    Raises:
        ConfigError: Naming the file and the rule.
    """
    fh = open_regular_file(path, _WHAT, _HINT)
    size = os.fstat(fh.fileno()).st_size
    if size > MAX_LABELS_BYTES:
        fh.close()
        raise ConfigError(f"{_WHAT} {path} is {size:,} bytes, over the {MAX_LABELS_BYTES:,}-byte bound; it is not read")
    return fh


def _read_json(path: Path) -> Any:
    data = read_bounded(path, _WHAT, _HINT, MAX_LABELS_BYTES)
    try:
        return json.loads(data.decode("utf-8-sig"))
    except (RecursionError, ValueError) as exc:
        raise ConfigError(f"cannot read {path} as JSON: {str(exc) or type(exc).__name__}") from None


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """A text file's lines, numbered from 1, read one at a time (at most the set's bound)."""
    with _open(path) as fh, io.TextIOWrapper(fh, encoding="utf-8-sig", newline="") as text:
        try:
            yield from enumerate(text, start=1)
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read {path}: {exc}") from None


def first_json_line(path: Path) -> Any:
    """The first non-blank line of a JSONL set, parsed; None where it is no JSON.

    Raises:
        ConfigError: The file cannot be read as a labeled set (see :func:`_open`).
    """
    first = next((line for _, line in _lines(path) if line.strip()), "")
    try:
        return json.loads(first)
    except (RecursionError, ValueError):
        return None  # the loader reports it, naming the line


def _jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """A JSONL set's objects with their line numbers, each line bounded and parsed (nesting
    however deep) by :func:`localjury._files.json_lines`.

    Raises:
        ConfigError: The file is over :data:`MAX_LABELS_BYTES`, or a line is not a JSON object
            (naming the file and the line).
    """
    _open(path).close()
    for n, row in json_lines(path, _WHAT, _HINT):
        if not isinstance(row, dict):
            raise ConfigError(f"{path}, line {n}: expected a JSON object")
        yield n, row


def _need(row: dict[str, Any], field: str, where: str) -> Any:
    if field not in row or row[field] in (None, ""):
        raise ConfigError(f"{where}: missing field {field!r}")
    return row[field]


def _llmbar_rows(path: Path) -> Iterator[tuple[int, str, str, str, int]]:
    """LLMBar items as (index, input, output_1, output_2, label 1 or 2)."""
    data = _read_json(path)
    if not isinstance(data, list):
        raise ConfigError(f"{path}: an LLMBar file is a JSON list of {{input, output_1, output_2, label}}")
    for i, row in enumerate(data):
        where = f"{path}, item {i}"
        if not isinstance(row, dict):
            raise ConfigError(f"{where}: expected an object")
        label = str(_need(row, "label", where)).strip()
        if label not in ("1", "2"):
            raise ConfigError(f"{where}: label must be 1 or 2, got {label!r}")
        outputs = [str(_need(row, f"output_{k}", where)) for k in (1, 2)]
        yield i, str(_need(row, "input", where)), outputs[0], outputs[1], int(label)


def load_llmbar(path: Path) -> list[BenchItem]:
    """LLMBar, pointwise: ``[{input, output_1, output_2, label}]``; each pair gives two records."""
    items: list[BenchItem] = []
    for i, instruction, *outputs, label in _llmbar_rows(path):
        for k, output in enumerate(outputs, start=1):
            items.append(
                BenchItem(
                    record={"id": f"llmbar-{i}-{k}", "user_input": instruction, "response": output},
                    gold=int(label == k),
                    pair=f"llmbar-{i}",
                )
            )
    return items


def load_llmbar_pairs(path: Path) -> list[BenchItem]:
    """LLMBar as its paper judges it: one pairwise record per item, ``output_1`` as
    ``response_a`` and ``output_2`` as ``response_b``; gold 1 when the label picks output_1."""
    return [
        BenchItem(
            record={"id": f"llmbar-{i}", "user_input": instruction, "response_a": first, "response_b": second},
            gold=int(label == 1),
        )
        for i, instruction, first, second, label in _llmbar_rows(path)
    ]


def load_halueval_general(path: Path) -> list[BenchItem]:
    """HaluEval general: ``{ID, user_query, chatgpt_response, hallucination: yes|no}``."""
    items = []
    for n, row in _jsonl(path):
        where = f"{path}, line {n}"
        label = str(_need(row, "hallucination", where)).strip().lower()
        if label not in ("yes", "no"):
            raise ConfigError(f"{where}: hallucination must be yes or no, got {label!r}")
        items.append(
            BenchItem(
                record={
                    "id": f"halueval-line{n}",  # the file's ID column has a blank and a repeat
                    "user_input": str(_need(row, "user_query", where)),
                    "response": str(_need(row, "chatgpt_response", where)),
                },
                gold=int(label == "no"),
            )
        )
    return items


def load_halueval_qa(path: Path) -> list[BenchItem]:
    """HaluEval QA: ``{knowledge, question, right_answer, hallucinated_answer}``; two records
    per row, the knowledge as retrieved context."""
    items = []
    for n, row in _jsonl(path):
        where = f"{path}, line {n}"
        for kind, gold in (("right_answer", 1), ("hallucinated_answer", 0)):
            items.append(
                BenchItem(
                    record={
                        "id": f"haluqa-{n}-{'right' if gold else 'hallucinated'}",
                        "user_input": str(_need(row, "question", where)),
                        "response": str(_need(row, kind, where)),
                        "retrieved_contexts": [str(_need(row, "knowledge", where))],
                    },
                    gold=gold,
                    pair=f"haluqa-{n}",
                )
            )
    return items


_TRUTHFUL = re.compile(r"^Q:\s*(?P<q>.*?)\nA:\s*(?P<a>.*?)\nTrue:\s*$", re.S)


def load_truthfulqa(path: Path) -> list[BenchItem]:
    """TruthfulQA: ``finetune_truth.jsonl`` rows ``{"prompt": "Q: ...\\nA: ...\\nTrue:",
    "completion": " yes"|" no"}``, or ``TruthfulQA.csv`` (each correct and incorrect answer
    of a question becomes a record)."""
    if path.suffix.lower() == ".csv":
        return _truthfulqa_csv(path)
    items = []
    for n, row in _jsonl(path):
        where = f"{path}, line {n}"
        m = _TRUTHFUL.match(str(_need(row, "prompt", where)))
        if not m:
            raise ConfigError(f"{where}: prompt is not 'Q: ...\\nA: ...\\nTrue:'")
        label = str(_need(row, "completion", where)).strip().lower()
        if label not in ("yes", "no"):
            raise ConfigError(f"{where}: completion must be yes or no, got {label!r}")
        question = m["q"].strip()
        items.append(
            BenchItem(
                record={"id": f"truthfulqa-{n}", "user_input": question, "response": m["a"].strip()},
                gold=int(label == "yes"),
                group=question,
            )
        )
    return items


def _truthfulqa_csv(path: Path) -> list[BenchItem]:
    items = []
    for n, row in enumerate(csv.DictReader(line for _, line in _lines(path)), start=2):
        where = f"{path}, line {n}"
        question = str(_need(row, "Question", where))
        for column, gold in (("Correct Answers", 1), ("Incorrect Answers", 0)):
            for j, answer in enumerate(a.strip() for a in str(row.get(column) or "").split(";")):
                if answer:
                    items.append(
                        BenchItem(
                            record={"id": f"truthfulqa-{n}-{gold}-{j}", "user_input": question, "response": answer},
                            gold=gold,
                            group=question,
                        )
                    )
    return items


def load_jsonl(path: Path) -> list[BenchItem]:
    """Generic: one record a line with a ``gold`` field (0/1) beside the record fields; an
    optional ``pair`` field groups records whose gold labels form a pair. A labels file's
    fields (:data:`~localjury.bench.label_rows.LABEL_FIELDS`) are taken out of the record, its ``metric`` kept.

    A row's ``id`` (default ``line-N``) and ``pair`` are read here, once, by the records' own
    rule (:func:`~localjury.records.record.given_id`): a row whose id or pair cannot be read
    (an empty string, a float, an object, a lone surrogate) is named ``line-N`` and carries its
    error (:attr:`BenchItem.error`) instead of being judged, so that the other rows are judged
    and written.

    Raises:
        ConfigError: A line that is not a JSON object, or a ``gold`` that is not 0 or 1
            (naming the file and the line).
    """
    items = []
    for n, row in _jsonl(path):
        gold, metric, pair, error = split_label(row, n, path)
        items.append(BenchItem(row, gold, pair=pair, error=error, location=f"{path} line {n}", metric=metric))
    return items


def load_scored(path: str | Path, levels: int, metric: str | None = None) -> list[BenchItem]:
    """Graded labels: one record a line with a ``score`` on a rubric's scale 1..``levels``
    (:func:`~localjury.bench.label_rows.split_score`) beside the record's fields, read and checked as
    :func:`load_jsonl` and :func:`load` read yes/no labels (``metric``: as there).

    Raises:
        ConfigError: As :func:`load`, or a ``score`` off the scale (naming the file and the line).
    """
    path, items = Path(path), []
    for n, row in _jsonl(path):
        score, labels, pair, error = split_score(row, n, path, levels)
        where = f"{path} line {n}"
        items.append(BenchItem(row, int(score + 0.5), pair, None, error, where, labels, score))
    if not items:
        raise ConfigError(f"{path}: no records in it")
    return of_metric([_checked(it, path) for it in items], metric, path)


FORMATS: dict[str, Format] = {
    "llmbar": Format(
        "llmbar",
        load_llmbar,
        ("follows_instruction", "The response precisely follows the instruction."),
        description="LLMBar: which of two outputs follows the instruction (pairs)",
        load_pairs=load_llmbar_pairs,
    ),
    "halueval-general": Format(
        "halueval-general",
        load_halueval_general,
        ("no_hallucination", "The response contains no hallucinated or unverifiable claims."),
        description="HaluEval general: hallucination in chat answers (human label)",
    ),
    "halueval-qa": Format(
        "halueval-qa",
        load_halueval_qa,
        None,
        default_metric="faithfulness",
        description="HaluEval QA: is the answer grounded in the given knowledge (pairs)",
    ),
    "truthfulqa": Format(
        "truthfulqa",
        load_truthfulqa,
        ("truthful", 'The response is truthful. (Under TruthfulQA\'s rules, "I have no comment" is truthful.)'),
        description="TruthfulQA: truthfulness of answers (human label)",
    ),
    "jsonl": Format("jsonl", load_jsonl, None, description="records with a gold field (0/1)"),
}


def load(path: str | Path, fmt: str, *, pairwise: bool = False, metric: str | None = None) -> list[BenchItem]:
    """Read a data set in one of :data:`FORMATS`; ``pairwise``: as pairwise records (a
    format with pairs, or ``jsonl`` records that hold ``response_a`` and ``response_b``);
    ``metric``: of a labels file that labels several metrics, the rows of this one (rows that
    name no metric are read for any).

    Raises:
        ConfigError: Unknown format, unreadable file, a row that does not fit the format
            (naming the file, the line and the field), ``pairwise`` for a set of no pairs, or
            labels of several metrics and none of them ``metric``.
    """
    if fmt not in FORMATS:
        raise ConfigError(f"unknown bench format {fmt!r}; expected one of: {', '.join(FORMATS)}")
    path = Path(path)
    fmt_ = FORMATS[fmt]
    loader = fmt_.load
    if pairwise and fmt_.load_pairs is not None:
        loader = fmt_.load_pairs
    elif pairwise and fmt != "jsonl":
        raise ConfigError(f"format {fmt!r} holds no pairs to judge pairwise; use mode 'pointwise'")
    items = of_metric([_checked(it, path) for it in loader(path)], metric, path)
    if pairwise and fmt == "jsonl":
        unpaired = next((it for it in items if not {"response_a", "response_b"} <= it.record.keys()), None)
        if unpaired is not None:
            raise ConfigError(
                f"{path}: record {unpaired.record.get('id')!r} has no response_a and response_b to judge pairwise "
                "(gold 1: response_a is the better one); use mode 'pointwise'"
            )
    if not items:
        raise ConfigError(f"{path}: no records in it")
    return items


def _checked(item: BenchItem, path: Path) -> BenchItem:
    """The item, with the error of its record where the records' parser refuses it (a field
    missing, of the wrong type, not valid Unicode): every record is read once, here, so that
    nothing after the judging meets a record it cannot read."""
    if item.error is not None:
        return item
    try:
        parse_record(item.record, location=item.location or str(path))
    except RecordError as exc:
        return replace(item, error=exc)
    return item
