"""Records to judge: the model, field aliases, parsing one raw record, and the checks over a
stream of them (duplicate ids). Where records come from (files, Hugging Face datasets,
RAGAS-shaped datasets) is :mod:`localjury.records.readers`.

Parsing never raises anything but a :class:`~localjury.errors.RecordError` naming the
record, its place and the field: whatever a record holds (any bytes, nesting however deep, a
dict that contains itself, numbers or text that JSON cannot write), nothing but a
``Record`` or a ``RecordError`` comes out.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, PrivateAttr

from localjury.errors import RecordError
from localjury.records.conversation import (
    ChatMessage,
    FunctionCall,
    check_calls_unicode,
    check_unicode,
    not_unicode,
    parse_messages,
    parse_reference_calls,
)

#: Older field names (RAGAS v1 and many datasets) accepted as aliases of the current ones.
FIELD_ALIASES: dict[str, str] = {
    "question": "user_input",
    "answer": "response",
    "contexts": "retrieved_contexts",
    "ground_truth": "reference",
}
TEXT_FIELDS = ("user_input", "response", "reference", "response_a", "response_b")
#: The text fields a record may hold (besides ``id`` and ``messages``); anything else in a row
#: is left to the caller.
FIELDS = ("user_input", "response", "retrieved_contexts", "reference", "response_a", "response_b")
_TOO_DEEP = (
    "nested too deeply to read (JSON arrays and objects more than about {limit} levels deep); "
    "a record's fields are strings or a list of strings and need no deeper nesting"
)


def too_deep() -> str:
    """The message for data nested deeper than Python reads."""
    return _TOO_DEEP.format(limit=sys.getrecursionlimit())


class Record(BaseModel):
    """One LLM output to judge, with what it answered and what it was given."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    """Stable id: given in the data, or a hash of the record's content."""
    response: str | None = None
    """The output being judged (every metric but a pairwise one needs it, or a conversation
    whose last assistant turn it is)."""
    user_input: str | None = None
    """The prompt or question the response answers."""
    retrieved_contexts: list[str] | None = None
    """Passages the system retrieved, when it is a RAG system."""
    reference: str | None = None
    """A reference answer, when the dataset has one."""
    response_a: str | None = None
    """Pairwise metrics: the first of the two responses compared."""
    response_b: str | None = None
    """Pairwise metrics: the second of the two responses compared."""
    messages: list[ChatMessage] | None = None
    """A conversation, in the OpenAI chat format (see :mod:`localjury.records.conversation`): its last
    assistant turn is the response unless ``response`` is given."""
    reference_tool_calls: list[FunctionCall] | None = None
    """The tool calls an agent run is expected to make, each a name and its JSON arguments
    (what ``ToolCallAccuracy`` compares the conversation's calls with)."""

    _location: str | None = PrivateAttr(default=None)
    """Where the loader found the record ("d.jsonl line 7", "item 3"), for messages only."""

    def __eq__(self, other: object) -> bool:
        # pydantic 2 also compares private attributes: a record's place in its file is not
        # part of its value, so two copies of one record stay equal (and equal hashes).
        if isinstance(other, Record):
            return type(self) is type(other) and self.__dict__ == other.__dict__
        return NotImplemented


def content_id(fields: Mapping[str, Any]) -> str:
    """Return the stable id of a record without an ``id``: a hash of its judged fields."""
    canon = {k: fields.get(k) for k in ("user_input", "response", "retrieved_contexts", "reference")}
    # The pair's fields only where present, so the ids of records without them stay as they were.
    canon.update({k: fields[k] for k in ("response_a", "response_b") if fields.get(k) is not None})
    if fields.get("messages") is not None:
        canon["messages"] = [
            m.model_dump(exclude_none=True) if isinstance(m, ChatMessage) else m for m in fields["messages"]
        ]
    if fields.get("reference_tool_calls") is not None:
        canon["reference_tool_calls"] = [
            c.model_dump() if isinstance(c, FunctionCall) else c for c in fields["reference_tool_calls"]
        ]
    blob = json.dumps(canon, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    # surrogatepass: valid text encodes as UTF-8 does, and no text can make the hash raise.
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def raw_id(raw: Any, location: str | None = None) -> str:
    """Return the id of a row that has none of its own: a hash of its content; never raises."""
    try:
        blob = raw if isinstance(raw, str) else json.dumps(raw, sort_keys=True, default=str)
    except Exception:
        # Nested too deeply, a cycle, keys of mixed types, an int too long for str(), or an
        # object whose str() fails: the content cannot be hashed, so its place stands in.
        blob = f"unreadable {type(raw).__name__} at {location}"
    return "raw-" + hashlib.sha256(blob.encode("utf-8", "replace")).hexdigest()[:12]


def parse_record(raw: Any, *, location: str | None = None, csv_cells: bool = False) -> Record:
    """Validate one raw row (a mapping) into a :class:`Record`.

    Args:
        raw: The decoded row, e.g. a JSON object.
        location: Where the row sits in its file, for error messages ("line 7").
        csv_cells: The row comes from a CSV file: every cell is a string, an empty cell
            means "absent", and ``retrieved_contexts`` and ``messages`` are JSON-encoded lists.

    Returns:
        The validated record.

    Raises:
        RecordError: The row is not an object, a field is missing or of the wrong type or
            not valid Unicode, a field and its alias disagree, or the row cannot be read
            at all (nested too deeply to compare, say).
    """
    try:
        record = _parse_record(raw, location, csv_cells)
    except RecordError:
        raise
    except Exception as exc:
        # Records given in Python may hold anything (a mapping whose methods raise, values
        # that cannot be compared); a bad record must not end the run.
        reason = too_deep() if isinstance(exc, RecursionError) else f"cannot be read ({type(exc).__name__}: {exc})"
        raise RecordError(reason, record_id=raw_id(raw, location), location=location) from None
    if location is not None:
        record._location = location
    return record


#: Builds a record's error from its field and the reason.
_Fail = Callable[[str | None, str], RecordError]


def _parse_record(raw: Any, location: str | None, csv_cells: bool) -> Record:
    if not isinstance(raw, Mapping):
        raise RecordError(
            f"expected a JSON object, got {type(raw).__name__}",
            record_id=raw_id(raw, location),
            location=location,
        )
    record_id = _given_id(raw, location)
    fail = _failure(raw, record_id, location)
    fields = _known_fields(raw, csv_cells, fail)
    if csv_cells:
        _decode_csv_cells(fields, fail)
    _parse_structured(fields, fail)
    _check_response(fields, fail)
    _check_texts(fields, fail)
    return Record(id=record_id if record_id is not None else content_id(fields), **fields)


def _failure(raw: Mapping[str, Any], record_id: str | None, location: str | None) -> _Fail:
    """Return what builds a record's errors: named by its usable given id, or else by a hash
    of the row, made only when an error needs it (valid rows without an id are named by
    content_id())."""

    def fail(field: str | None, reason: str) -> RecordError:
        named = record_id if record_id is not None else raw_id(dict(raw), location)
        return RecordError(reason, record_id=named, field=field, location=location)

    return fail


def given_id(value: Any) -> str | None:
    """The id a row gives, as a string (an integer written in decimal); None where it gives none.
    The one rule for ids, the records' and the labels' alike.

    Raises:
        ValueError: The id is unusable (not a string or an integer, empty, a lone surrogate,
            an integer too long to write); the message says why.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"must be a string or an integer, got {type(value).__name__}")
    if isinstance(value, int):
        try:
            return str(value)
        except ValueError:  # Python refuses to write ints longer than sys.get_int_max_str_digits()
            raise ValueError(
                f"an integer of more than {sys.get_int_max_str_digits()} digits; give the id as a string"
            ) from None
    if (why := not_unicode(value)) is not None:
        raise ValueError(why)
    if not value.strip():
        raise ValueError("must not be empty")
    return value


def _given_id(raw: Mapping[str, Any], location: str | None) -> str | None:
    """Return the row's own id as a string, None where it gives none; raise where it is unusable."""
    try:
        return given_id(raw.get("id"))
    except ValueError as exc:
        raise _failure(raw, None, location)("id", str(exc)) from None


def _known_fields(raw: Mapping[str, Any], csv_cells: bool, fail: _Fail) -> dict[str, Any]:
    """Return the row's record fields under their current names, absent ones left out; raise
    where a field and its alias disagree."""
    fields: dict[str, Any] = {}
    for key, value in raw.items():
        if csv_cells and value == "":
            value = None
        if value is None or key == "id":
            continue
        name = FIELD_ALIASES.get(key, key)
        if name not in FIELDS and name not in ("messages", "reference_tool_calls"):
            continue  # extra columns (labels, metadata) are the caller's business
        if name in fields:
            try:
                differ = fields[name] != value
            except RecursionError:
                raise fail(name, too_deep()) from None
            if differ:
                raise fail(name, f"given both as {name!r} and as its alias {key!r} with different values")
        fields[name] = value
    return fields


def _decode_csv_cells(fields: dict[str, Any], fail: _Fail) -> None:
    """Decode, in place, the list fields a CSV row holds as JSON text."""
    for name, example in (
        ("retrieved_contexts", '["passage one"]'),
        ("messages", '[{"role": "user", "content": "hi"}]'),
        ("reference_tool_calls", '[{"name": "search", "arguments": {"q": "x"}}]'),
    ):
        if not isinstance(fields.get(name), str):
            continue
        cell = fields[name]
        try:
            fields[name] = json.loads(cell)
        except RecursionError:
            raise fail(name, "CSV cell " + too_deep()) from None
        except ValueError as exc:  # JSONDecodeError, or a number longer than Python writes
            detail = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
            what = {"retrieved_contexts": "a JSON list of strings", "messages": "a JSON list of messages"}.get(
                name, "a JSON list of calls"
            )
            raise fail(name, f"CSV cell must hold {what}, e.g. {example}; got {cell[:60]!r} ({detail})") from None


def _parse_structured(fields: dict[str, Any], fail: _Fail) -> None:
    """Parse, in place, the conversation and the reference tool calls into their models."""
    for name, parse in (("messages", parse_messages), ("reference_tool_calls", parse_reference_calls)):
        if name in fields:
            try:
                fields[name] = parse(fields[name])
            except ValueError as exc:  # its message starts with the field's path: "messages[2].role: ..."
                field, _, reason = str(exc).partition(": ")
                raise fail(field, reason) from None


def _check_response(fields: Mapping[str, Any], fail: _Fail) -> None:
    """Raise unless the record has something to judge: a response, a pair, or a conversation."""
    pair = [name for name in ("response_a", "response_b") if name in fields]
    if "response" not in fields and not pair and "messages" not in fields:
        raise fail("response", "missing (also accepted under the alias 'answer'; a pair: response_a and response_b)")
    if len(pair) == 1:
        other = "response_b" if pair == ["response_a"] else "response_a"
        raise fail(other, f"missing: a pair needs both response_a and response_b, got only {pair[0]}")


def _check_texts(fields: Mapping[str, Any], fail: _Fail) -> None:
    """Raise unless every text field is a valid Unicode string, and ``retrieved_contexts`` a list of them."""
    for name in TEXT_FIELDS:
        if name in fields and not isinstance(fields[name], str):
            raise fail(name, f"must be a string, got {type(fields[name]).__name__}")
        if name in fields and (why := not_unicode(fields[name])) is not None:
            raise fail(name, why)
    contexts = fields.get("retrieved_contexts")
    if contexts is not None:
        if not isinstance(contexts, list):
            raise fail("retrieved_contexts", f"must be a list of strings, got {type(contexts).__name__}")
        for i, item in enumerate(contexts):
            if not isinstance(item, str):
                raise fail(
                    "retrieved_contexts",
                    f"item {i} must be a string, got {type(item).__name__}",
                )
            if (why := not_unicode(item)) is not None:
                raise fail("retrieved_contexts", f"item {i} is {why}")


def coerce_records(items: Iterable[Record | Mapping[str, Any] | RecordError]) -> Iterator[Record | RecordError]:
    """Turn records given in Python (``Record`` objects or dicts) into records or errors; a
    ``RecordError`` given in a record's place (a caller that read the row and refused it, such
    as a labels file's line) is that record's error as it is.

    The n-th item's place in messages is "item n".
    """
    for i, item in enumerate(items, start=1):
        location = f"item {i}"
        if isinstance(item, RecordError):
            yield item
            continue
        if isinstance(item, Record):
            # A copy: the caller's object is left as it was (it may be given twice).
            record = item.model_copy()
            record._location = location
            yield _checked(record)
            continue
        try:
            yield parse_record(item, location=location)
        except RecordError as exc:
            yield exc


def _checked(record: Record) -> Record | RecordError:
    """A record built in Python, or its error where a text of it is not valid Unicode (pydantic
    takes any ``str``; :func:`parse_record` checks what a row holds)."""
    if (why := not_unicode(record.id)) is not None:
        return RecordError(why, record_id=raw_id(record.model_dump()), field="id", location=record._location)
    fail = _failure({}, record.id, record._location)
    try:
        _check_texts(record.model_dump(include=set(TEXT_FIELDS) | {"retrieved_contexts"}, exclude_none=True), fail)
        check_unicode(record.messages or [])
        check_calls_unicode(record.reference_tool_calls or [])
    except RecordError as exc:
        return exc
    except ValueError as exc:  # its message starts with the field's path: "messages[2].content: ..."
        field, _, reason = str(exc).partition(": ")
        return fail(field, reason)
    return record


def dedupe(entries: Iterable[Record | RecordError]) -> Iterator[Record | RecordError]:
    """Turn every record whose id was already seen into a RecordError (ids key the results).

    The error names the duplicate's place and the place of the first record with its id,
    for records that come from :func:`iter_records` or :func:`coerce_records`.
    """
    first_at: dict[str, str | None] = {}
    for entry in entries:
        if isinstance(entry, Record):
            if entry.id in first_at:
                first = first_at[entry.id]
                same = f"the same id as {first}" if first else "an earlier record has the same id"
                yield RecordError(
                    f"duplicate id: {same} (or, without ids, the same content); "
                    "give each record its own id, or remove the repeat",
                    record_id=entry.id,
                    field="id",
                    location=entry._location,
                )
                continue
            first_at[entry.id] = entry._location
        yield entry
