"""Fitting a record's prompt to a model's context: the bound a record's text must keep before
any tokenizer reads it (:func:`over_bound`), and under ``on_overflow="truncate"`` the
conversation turns and retrieved contexts cut, each cut marked, until the prompt fits
(:func:`fit_prompt`), with the record as the prompt shows it (what quotes may come from).
Every kind of judging renders its prompts through here."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from localjury.errors import RecordError
from localjury.metrics.protocol import Juror
from localjury.records.conversation import cut_turns, last_turn_split, turn_texts
from localjury.records.record import FIELDS, Record
from localjury.types import Message, OverflowPolicy

#: Characters per token assumed when fitting a prompt to a model's context by truncating its
#: retrieved contexts; below the 3.5-4.5 of English text, so the estimate errs long.
CHARS_PER_TOKEN = 3.0
#: Put in place of what truncation removed from a context, so the judge (and you) can see it.
TRUNCATION_MARK = " [... {n} characters cut by localjury to fit the model's context ...]"
#: The most bytes of text one token stands for, which bounds a record's text fields by the
#: judge's context before any tokenizer sees them (:func:`over_bound`): a Hugging Face
#: tokenizer given a text of a few hundred MB aborts the whole process (a failed allocation
#: in Rust). The longest tokens of the embedded judges' vocabularies are runs of spaces or
#: dashes: 128 bytes in Qwen2.5's (128 spaces), 81 in SmolLM2's, 48 in Gemma 3's; twice the
#: longest leaves room for other vocabularies. Each token of a byte-level BPE or SentencePiece
#: tokenizer covers its own span of the text, so a text of more than context x 256 bytes
#: holds more tokens than the context whatever it says (for tokenizers that fold or drop
#: characters first, such as NFKC normalisers, the bound is a near one, not a proof).
MAX_TOKEN_BYTES = 256


@dataclass(frozen=True)
class Fitted:
    """A record's prompt fitted to a model's context (:func:`fit_prompt`)."""

    messages: list[Message]
    """The prompt."""
    turns_cut: int
    """The conversation turns cut (0 when none was)."""
    shown: Record
    """The record as far as the prompt shows it: the conversation as cut (its cut mark a turn
    of no text to quote), each retrieved context cut to what is kept of it (without its mark).
    What the judge's quotes may come from; the record itself when nothing was cut."""


def fit_prompt(
    on_overflow: OverflowPolicy,
    model: Juror,
    record: Record,
    budget: int,
    messages: list[Message],
    render: Callable[[Record], list[Message]],
) -> Fitted:
    """Under ``on_overflow="truncate"``, fit the prompt to the model's context, leaving
    ``budget`` output tokens (and a thinking budget's): first cut a conversation's middle
    turns (:func:`cut_conversation`), then the record's retrieved contexts (longest first,
    each cut marked in the text). The estimate is by characters (CHARS_PER_TOKEN), so it
    needs no tokenizer and every pass builds the same prompt; a prompt still too long after it
    is the model's error for that record. Returns the prompt, the number of turns cut, and
    the record as the prompt shows it."""
    if on_overflow != "truncate" or not (record.retrieved_contexts or record.messages):
        return Fitted(messages, 0, record)
    allowed = int((model.spec.context_length - model.output_tokens(budget)) * CHARS_PER_TOKEN)

    def fits(shorter: Record) -> bool:
        try:
            return _length(render(shorter)) <= allowed
        except RecordError:  # the cut left the prompt nothing to show (a metric's evidence): no fit
            return False

    excess = _length(messages) - allowed
    if excess <= 0:
        return Fitted(messages, 0, record)
    turns_cut = 0
    if record.messages:
        shorter, turns_cut = cut_conversation(record, fits)
        try:
            cut_messages = render(shorter)
        except RecordError:
            cut_messages = messages  # no cut leaves it its evidence: the uncut prompt, the model's overflow
        if turns_cut and _length(cut_messages) < _length(messages):  # the prompt shows the conversation
            record, messages = shorter, cut_messages
            excess = _length(messages) - allowed
        else:
            turns_cut = 0
    if excess <= 0 or not record.retrieved_contexts:
        return Fitted(messages, turns_cut, record)
    return _cut_contexts(record, excess, allowed, render, turns_cut)


def _length(messages: list[Message]) -> int:
    """A prompt's length in characters, as the fit estimates it."""
    return sum(len(m["content"]) for m in messages)


def _cut_contexts(
    record: Record, excess: int, allowed: int, render: Callable[[Record], list[Message]], turns_cut: int
) -> Fitted:
    """Cut the record's retrieved contexts, longest first, each cut marked in the text
    (:data:`TRUNCATION_MARK`), until its prompt is ``excess`` characters shorter."""
    original = record.retrieved_contexts or []
    contexts = list(original)
    kept = [len(c) for c in original]  # each context's characters the prompt still shows
    mark = len(TRUNCATION_MARK.format(n=10**9))

    def marked() -> Record:
        return record.model_copy(update={"retrieved_contexts": contexts})

    while excess > 0:
        i = max(range(len(contexts)), key=lambda j: len(contexts[j]))
        if len(contexts[i]) <= mark:
            break  # nothing left to cut: the model reports the overflow
        # At least a mark's length is cut, so an earlier mark goes and what is kept is a
        # prefix of the original context.
        kept[i] = len(contexts[i]) - min(excess + mark, len(contexts[i]))
        contexts[i] = original[i][: kept[i]] + TRUNCATION_MARK.format(n=len(original[i]) - kept[i])
        excess = _length(render(marked())) - allowed
    shown = record.model_copy(update={"retrieved_contexts": [c[:k] for c, k in zip(original, kept, strict=True)]})
    return Fitted(render(marked()), turns_cut, shown)


def cut_conversation(record: Record, fits: Callable[[Record], bool]) -> tuple[Record, int]:
    """The record with the fewest of its conversation's middle turns cut for ``fits``, by
    the stated rule (:func:`~localjury.records.conversation.cut_turns`: the system prompt, the first
    user turn and the most recent turns are kept, one ``[… N turns cut …]`` turn stands for
    the rest), and N. The last assistant turn and what follows it are always kept; when
    even the shortest cut does not fit, that shortest cut is returned."""
    turns = record.messages or []
    split = last_turn_split(turns)
    least = len(turns) - len(split[0]) if split is not None else 1
    lo, hi = least, len(turns)  # the most recent turns kept: hi keeps all
    while lo < hi:  # the most recent turns kept such that the prompt fits
        mid = (lo + hi + 1) // 2
        kept, _ = cut_turns(turns, mid)
        if fits(record.model_copy(update={"messages": kept})):
            lo = mid
        else:
            hi = mid - 1
    kept, n = cut_turns(turns, lo)
    return (record.model_copy(update={"messages": kept}), n) if n else (record, 0)


def _utf8_size(text: str) -> int:
    """The UTF-8 size of ``text``, encoded a MiB at a time (a huge field is not copied whole)."""
    if text.isascii():
        return len(text)
    step = 1 << 20
    return sum(len(text[i : i + step].encode("utf-8", "surrogatepass")) for i in range(0, len(text), step))


def over_bound(record: Record, models: Sequence[Juror]) -> str | None:
    """The record's error when one of its text fields (``retrieved_contexts`` all its passages
    together, ``messages`` all its turns' texts) is longer than :data:`MAX_TOKEN_BYTES` bytes a
    token of the longest context in the jury: no judge could read it whole, and tokenizing it
    could end the process. None when every field is under the bound; a field under it but
    over a model's context is that model's error, found when its prompt is counted."""
    widest = max(models, key=lambda m: m.spec.context_length)
    context = widest.spec.context_length
    bound = context * MAX_TOKEN_BYTES
    for name in (*FIELDS, "messages"):
        value = getattr(record, name)
        if value is None:
            continue
        texts = turn_texts(value) if name == "messages" else value if isinstance(value, list) else [value]
        if sum(len(t) for t in texts) * 4 <= bound:
            continue  # under the bound whatever the characters (4 bytes at most each in UTF-8)
        size = sum(_utf8_size(t) for t in texts)
        if size <= bound:
            continue
        parts = "turns" if name == "messages" else "passages"
        what = f"{len(value):,} {parts} of {size:,} bytes in all" if isinstance(value, list) else f"{size:,} bytes"
        whose = "the longest in the jury, " if len(models) > 1 else ""
        error = RecordError(
            f"{what}, over the {bound:,}-byte bound for the context of model {widest.spec.name!r} "
            f"({whose}{context:,} tokens of at most {MAX_TOKEN_BYTES} bytes each); it is not tokenized or "
            "judged: shorten it, or judge it with a model of a longer context_length",
            record_id=record.id,
            field=name,
            location=record._location,
        )
        return str(error)
    return None
