"""How a prompt program's input is filled from a record, and checked when a metric is declared."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from localjury.errors import MetricError, RecordError
from localjury.metrics.thinking import answers_only
from localjury.records.conversation import ChatMessage, Scope, last_response, last_turn_split
from localjury.records.record import Record

InT = TypeVar("InT", bound=BaseModel)

#: The record fields a program's input model can take its values from.
RECORD_FIELDS = ("user_input", "response", "retrieved_contexts", "reference", "response_a", "response_b")


class RecordInput(BaseModel):
    """The record as a judge's prompt shows it, after what the metric puts first: the input
    block the Aspect Critic's, a rubric's and a checklist's prompts share.

    An input model that shows its own fields before the record's lists this class first among
    its bases and a model of its own fields second, ``class CriterionInput(RecordInput,
    Criterion)``: pydantic lays out fields from the last base to the first, so its own come
    first, where every record's prompt shares them (the cacheable prefix).
    """

    model_config = ConfigDict(extra="forbid")

    user_input: str | None = None
    """The prompt or question the response answers."""
    retrieved_contexts: list[str] | None = None
    """Passages the system retrieved."""
    reference: str | None = None
    """A reference answer."""
    conversation: list[ChatMessage] | None = None
    """A conversation record's turns: those before the judged last turn, or all of them."""
    response: str | None = None
    """The output being judged (a conversation record's last assistant turn)."""


def bind_input(
    model: type[InT],
    record: Record,
    metric: str,
    *,
    constants: Mapping[str, Any] | None = None,
    sources: Mapping[str, str] | None = None,
    extra: Mapping[str, Any] | None = None,
    scope: Scope = "last_turn",
    thinking: bool = False,
) -> InT:
    """Fill a program's input model from a record.

    A response's thinking (a leading ``<think>…</think>`` block: :mod:`localjury.metrics.thinking`)
    is left out, the answer alone shown, unless ``thinking``.

    A conversation record (``messages``) fills an input field named ``conversation``: under
    ``scope="last_turn"`` its last assistant turn with text is the ``response`` (unless the
    record gives one) and the turns before it are the conversation; under
    ``scope="conversation"`` every turn is. A model without a ``conversation`` field takes
    the last assistant turn as the record's ``response``.

    A field takes its value from ``extra`` (values computed by an earlier stage), then
    ``constants`` (fixed by the metric, e.g. the criterion), then the record field that
    ``sources`` maps it to, then the record field of the same name. A string record field
    given to a list field becomes a one-item list.

    Raises:
        RecordError: The record lacks a field the input model requires (naming that field),
            or a value does not fit the input model.
    """
    if not thinking:
        record = answers_only(record, metric)
    values: dict[str, Any] = {}
    extra = {**conversation_values(model, record, metric, scope, sources), **(extra or {})}
    for name, info in model.model_fields.items():
        if extra and name in extra:
            values[name] = extra[name]
            continue
        if constants and name in constants:
            values[name] = constants[name]
            continue
        field = (sources or {}).get(name, name)
        if field not in RECORD_FIELDS:
            continue  # optional: check_inputs() refused a required field without a source
        value = getattr(record, field)
        if value is None:
            if info.is_required():
                raise RecordError(f"metric {metric!r} needs this field", record_id=record.id, field=field)
            continue
        if isinstance(value, str) and _wants_list(info.annotation):
            value = [value]
        values[name] = value
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise RecordError(f"metric {metric!r}: {first['msg']}", record_id=record.id, field=loc) from None


def _wants_list(annotation: Any) -> bool:
    return "list[" in str(annotation)


def check_inputs(
    model: type[BaseModel],
    metric: str,
    *,
    constants: Mapping[str, Any] | None = None,
    sources: Mapping[str, str] | None = None,
    computed: Sequence[str] = (),
) -> None:
    """Refuse, when a metric is declared, an input model with a required field nothing fills.

    Raises:
        ValueError: Naming the field and where a value could come from.
    """
    for name, field in (sources or {}).items():
        if field not in RECORD_FIELDS:
            raise MetricError(f"metric {metric!r}: source of {name!r} must be a record field, got {field!r}")
    for name, info in model.model_fields.items():
        provided = name in computed or name in (constants or {}) or (sources or {}).get(name, name) in RECORD_FIELDS
        if info.is_required() and not provided:
            raise MetricError(
                f"metric {metric!r}: required input field {name!r} is no record field "
                f"({', '.join(RECORD_FIELDS)}); give it in constants= or map it with sources="
            )


def conversation_values(
    model: type[BaseModel], record: Record, metric: str, scope: Scope, sources: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The input values a conversation record gives a program's input ``model``; {} for
    other records. A model with a ``conversation`` field gets the turns (all of them under
    ``scope="conversation"`` or when the record gives its ``response``; else those before
    the last assistant turn, which is the ``response``); a model without one gets the last
    assistant turn's text in each field that takes the record's ``response`` (``sources``).

    Raises:
        RecordError: Judging the last turn of a conversation without an assistant turn with text.
    """
    if record.messages is None:
        return {}
    if "conversation" not in model.model_fields:
        text = last_response(record.messages) if record.response is None else None
        takes = [name for name in model.model_fields if (sources or {}).get(name, name) == "response"]
        return {name: text for name in takes} if text is not None else {}
    if scope == "conversation" or record.response is not None:
        return {"conversation": list(record.messages)}
    split = last_turn_split(record.messages)
    if split is None:
        raise RecordError(
            f"metric {metric!r} judges the last assistant turn, and the conversation has no assistant turn "
            "with text; judge the whole conversation with scope='conversation'",
            record_id=record.id,
            field="messages",
            location=record._location,
        )
    before, last = split
    return {"response": last.content, "conversation": before or None}
