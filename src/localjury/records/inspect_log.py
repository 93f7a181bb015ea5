"""inspect_ai eval logs as records: one record a sample (and epoch), its conversation the
record's ``messages``, read through inspect_ai's own log reader (the ``inspect`` extra).

A sample's messages (inspect's ``ChatMessageSystem``/``User``/``Assistant``/``Tool``) become
OpenAI-format messages (:func:`openai_messages`): each message's text parts (images, audio and
reasoning are left out), an assistant turn's tool calls with their arguments as JSON, a tool
result's call id, function name and error. The sample's target is the record's ``reference``.
The record's id is the sample's id, or ``<id>-epoch<N>`` in a log of several epochs.

inspect_ai is imported only when a log is read: ``import localjury`` never imports it.
"""

from __future__ import annotations

import json
import re
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localjury._files import open_regular_file
from localjury.errors import ConfigError, MissingDependencyError, RecordError
from localjury.records.record import Record, parse_record

#: The suffixes of inspect_ai's two log formats (a ``.json`` file is a log when it holds an object).
LOG_SUFFIXES = (".eval", ".json")
#: Said of a ``.json`` file read as a log: a dataset of records in a ``.json`` file is a list.
_JSON_NOTE = " (it holds a JSON object; a .json dataset of records holds a list)"
#: Sample fields a record does not need, left unread in an ``.eval`` log (the events are most of a sample).
_UNUSED_FIELDS = {"events", "events_data", "timelines", "store"}
#: The largest part of a log read (a sample's entry, the header, a ``.json`` log), as a JSONL
#: dataset's line (:data:`localjury.records.readers.MAX_LINE_BYTES`): a sample over it is its
#: error, a header or a ``.json`` log over it the log's.
MAX_SAMPLE_BYTES = 1 << 30
#: A sample's entry in an ``.eval`` log (inspect_ai 0.3: ``samples/<id>_epoch_<n>.json``).
_SAMPLE_ENTRY = re.compile(r"samples/(.+)_epoch_(\d+)\.json")
#: The entries inspect reads for a log's header.
_HEADERS = ("header.json", "_journal/start.json")


def _text(message: Any) -> str:
    """A message's text: its string content, or its text parts joined by newlines."""
    content = message.content
    if isinstance(content, str):
        return content
    return "\n".join(part.text for part in content if getattr(part, "type", None) == "text")


def _tool_call(call: Any) -> dict[str, Any]:
    arguments = call.arguments if call.arguments is not None else {}
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.function, "arguments": json.dumps(arguments, ensure_ascii=False, default=str)},
    }


def openai_messages(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """Turn inspect_ai chat messages into OpenAI-format messages (what ``Record.messages`` takes).

    Each message keeps its role and text; an assistant turn its ``tool_calls`` (the arguments
    as a JSON string; content None when it has no text); a tool result its ``tool_call_id``,
    the function's ``name``, and its error after its text (``error (timeout): ...``).
    """
    out: list[dict[str, Any]] = []
    for message in messages:
        text = _text(message)
        item: dict[str, Any] = {"role": message.role, "content": text}
        if message.role == "assistant" and getattr(message, "tool_calls", None):
            item["tool_calls"] = [_tool_call(call) for call in message.tool_calls]
            item["content"] = text or None
        elif message.role == "tool":
            if message.tool_call_id is not None:
                item["tool_call_id"] = message.tool_call_id
            if message.function is not None:
                item["name"] = message.function
            if message.error is not None:
                error = f"error ({message.error.type}): {message.error.message}"
                item["content"] = f"{text}\n{error}" if text else error
        out.append(item)
    return out


def _reference(target: str | Sequence[str]) -> str | None:
    text = target if isinstance(target, str) else "\n".join(target)
    return text or None


def state_record(
    record_id: str,
    messages: Sequence[Any],
    completion: str,
    target: str | Sequence[str],
    *,
    location: str | None = None,
) -> Record:
    """The record of one inspect sample: its ``messages`` (the judged response is the last
    assistant turn with text), the model's final ``completion`` as the ``response`` only when
    no assistant turn has text, and the ``target`` as the ``reference``.

    Raises:
        RecordError: Naming the sample: nothing to judge (no assistant text, no output), or
            a message that is not a valid chat message.
    """
    raw: dict[str, Any] = {"id": record_id, "reference": _reference(target)}
    if messages:
        raw["messages"] = openai_messages(messages)
    if completion and not any(m["role"] == "assistant" and m["content"] for m in raw.get("messages", ())):
        raw["response"] = completion
    if "messages" not in raw and "response" not in raw:
        raise RecordError("the sample has no messages and no output to judge", record_id=record_id, location=location)
    return parse_record(raw, location=location)


def _sample_record(sample: Any, *, epochs: int, name: str) -> Record:
    record_id = str(sample.id) if epochs <= 1 else f"{sample.id}-epoch{sample.epoch}"
    location = f"{name} sample {sample.id!r}" + (f" epoch {sample.epoch}" if epochs > 1 else "")
    if sample.error is not None:
        raise RecordError(
            f"the sample ended in an error in inspect_ai ({sample.error.message.strip()[:200]}); "
            "its run is incomplete, so it is not judged",
            record_id=record_id,
            location=location,
        )
    try:
        return state_record(record_id, sample.messages, sample.output.completion, sample.target, location=location)
    except RecordError:
        raise
    except Exception as exc:  # an inspect message shaped otherwise than this module expects
        raise RecordError(
            f"cannot be read as a record ({type(exc).__name__}: {exc})", record_id=record_id, location=location
        ) from None


def _oversized(sample: _Oversized, epochs: int, name: str) -> RecordError:
    """The error of a sample over :data:`MAX_SAMPLE_BYTES`."""
    return RecordError(
        f"the sample's entry in the log is {sample.size:,} bytes, over the {MAX_SAMPLE_BYTES:,}-byte bound on a "
        "sample; it is skipped unread (no judge could read a record this long)",
        record_id=sample.id if epochs <= 1 else f"{sample.id}-epoch{sample.epoch}",
        location=f"{name} sample {sample.id!r}" + (f" epoch {sample.epoch}" if epochs > 1 else ""),
    )


def _in_order(log: Any) -> Iterator[Any]:
    """A whole log's samples in the order an ``.eval`` log streams them: the dataset's, each
    sample's epochs in turn (a ``.json`` log keeps them as they finished)."""
    place = {sid: i for i, sid in enumerate(log.eval.dataset.sample_ids or ())}
    return iter(sorted(log.samples or (), key=lambda s: (place.get(s.id, len(place)), s.epoch)))


def _entries(path: Path) -> list[tuple[str, int, int]]:
    """The samples an ``.eval`` log holds, as (id as its entry names it, epoch, declared
    size): read from the zip's directory, so that they, not the header's ``sample_ids`` and
    ``epochs``, bound the work.

    Raises:
        ConfigError: The header is over :data:`MAX_SAMPLE_BYTES`.
    """
    with zipfile.ZipFile(path) as archive:
        infos = archive.infolist()
    for info in infos:
        if info.filename in _HEADERS and info.file_size > MAX_SAMPLE_BYTES:
            raise ConfigError(
                f"cannot read {path} as an inspect_ai eval log: its {info.filename} is {info.file_size:,} bytes, "
                f"over the {MAX_SAMPLE_BYTES:,}-byte bound on a log's part"
            )
    found = ((_SAMPLE_ENTRY.fullmatch(info.filename), info.file_size) for info in infos)
    return [(m[1], int(m[2]), size) for m, size in found if m is not None]


def _eval_samples(path: Path, header: Any, entries: list[tuple[str, int, int]]) -> Iterator[Any]:
    """The samples of an ``.eval`` log (its ``entries``) in the dataset's order (then any the
    header does not list), each sample's epochs in turn: one read per sample in the log; a
    sample over :data:`MAX_SAMPLE_BYTES` as an :class:`_Oversized`, unread."""
    from inspect_ai.log import read_eval_log_sample

    place = {str(sid): i for i, sid in enumerate(header.eval.dataset.sample_ids or ())}
    for sid, epoch, size in sorted(entries, key=lambda e: (place.get(e[0], len(place)), e[0], e[1])):
        if size > MAX_SAMPLE_BYTES:
            yield _Oversized(sid, epoch, size)
            continue
        yield read_eval_log_sample(
            str(path), id=sid, epoch=epoch, resolve_attachments=True, format="eval", exclude_fields=_UNUSED_FIELDS
        )


@dataclass(frozen=True)
class _Oversized:
    """A sample whose entry in the log is over :data:`MAX_SAMPLE_BYTES`, left unread."""

    id: str
    epoch: int
    size: int


def _read(path: Path) -> tuple[int, Iterator[Any]]:
    """The log's epochs and its samples, streamed one at a time from an ``.eval`` log."""
    try:
        from inspect_ai.log import read_eval_log
    except ImportError:
        raise MissingDependencyError(
            f"{path} is read as an inspect_ai eval log{_JSON_NOTE if path.suffix.lower() == '.json' else ''}, "
            "which needs the inspect_ai package: pip install 'localjury[inspect]'"
        ) from None
    if path.suffix.lower() == ".json":
        size = path.stat().st_size
        if size > MAX_SAMPLE_BYTES:  # inspect reads a .json log whole
            raise ConfigError(
                f"cannot read {path} as an inspect_ai eval log{_JSON_NOTE}: it is {size:,} bytes, over the "
                f"{MAX_SAMPLE_BYTES:,}-byte bound on a .json log, which is read whole; convert it to the .eval "
                "format, read a sample at a time: inspect log convert --to eval"
            )
        log = read_eval_log(str(path), resolve_attachments=True, format="json")
        return log.eval.config.epochs or 1, _in_order(log)
    entries = _entries(path)  # before inspect reads the header: its size is checked
    header = read_eval_log(str(path), header_only=True, format="eval")
    # Several epochs (ids of the form <id>-epoch<N>) when the header says so, or a sample says so.
    epochs = max([header.eval.config.epochs or 1, *(epoch for _, epoch, _ in entries)])
    if header.eval.dataset.sample_ids is None:  # an older log: read whole
        log = read_eval_log(str(path), resolve_attachments=True, format="eval")
        return epochs, _in_order(log)
    return epochs, _eval_samples(path, header, entries)


def iter_inspect_log(path: str | Path) -> Iterator[Record | RecordError]:
    """Read an inspect_ai eval log (``.eval`` or ``.json``): a record per sample, or in its
    place the error that says why that sample is not judged (it ended in an error, or has
    nothing to judge). A sample's place in messages: ``"run.eval sample 'q1' epoch 2"``.

    Raises:
        ConfigError: The file does not exist, is not a regular file, or cannot be read as an
            inspect_ai log (the message names the file and inspect's reason).
        MissingDependencyError: inspect_ai is not installed (the ``inspect`` extra).
    """
    path = Path(path)
    # Opened (and closed) to check that it reads: inspect_ai's own errors would not name the file.
    open_regular_file(path, "inspect_ai eval log", "give the path of a .eval or .json log file").close()
    try:
        epochs, samples = _read(path)
        for sample in samples:
            if isinstance(sample, _Oversized):
                yield _oversized(sample, epochs, path.name)
                continue
            try:
                yield _sample_record(sample, epochs=epochs, name=path.name)
            except RecordError as exc:
                yield exc
    except (ConfigError, MissingDependencyError):
        raise
    except Exception as exc:  # inspect raises many unrelated types (zip, JSON, pydantic) for a bad log
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        note = _JSON_NOTE if path.suffix.lower() == ".json" else ""
        raise ConfigError(f"cannot read {path} as an inspect_ai eval log{note}: {detail[:300]}") from exc
