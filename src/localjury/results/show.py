"""One judgment as a reader checks it: each model's samples (vote, reason, quotes) and the
judged text with every quote marked where it stands (``localjury show``; the bench report's
evidence section renders the same marks as HTML); and the results ``show`` reads, past the
lines that are not results (:func:`read_shown`)."""

from __future__ import annotations

import dataclasses
import html
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from rich.console import Group
from rich.text import Text

from localjury._terminal import escape_controls
from localjury.errors import ConfigError
from localjury.records.conversation import last_response
from localjury.records.record import Record
from localjury.results.record_result import NOT_A_RESULT_FIX, ModelJudgment, Quote, RecordResult, read_results
from localjury.votes.heads import reading_suffix


@dataclasses.dataclass
class Shown:
    """The results of a file that ``show`` prints, and the lines it could not read."""

    path: Path
    """The results file."""
    rows: list[RecordResult] = dataclasses.field(default_factory=list)
    """The results kept, in the file's order."""
    lines: int = 0
    """Lines read (results, and lines that are not results)."""
    first_bad: tuple[int, str] | None = None
    """The first line that is valid JSON but not a result: its number, and why."""
    bad: int = 0
    """How many lines are not results."""
    stopped: ConfigError | None = None
    """Why the reading stopped before the end (a line too long, or not JSON), if it did."""

    @property
    def complete(self) -> bool:
        """Every line of the file was read as a result."""
        return self.stopped is None and not self.bad

    def problem(self) -> ConfigError | None:
        """The error to report once the rows are shown: the line where the reading stopped, or
        the first line that is not a result (and how many more); None when the file read whole."""
        k = len(self.rows)

        def shown(lines: str) -> str:
            return f"{k:,} judgment{'s' * (k != 1)} of the {lines} {'is' if k == 1 else 'are'} shown"

        if self.stopped is not None:
            more = f"; {self.bad:,} lines before it are not results either" if self.bad else ""
            return ConfigError(f"{self.stopped}; the reading stopped there{more}; {shown('lines before it')}")
        if self.first_bad is None:
            return None
        n, why = self.first_bad
        more = f" (nor are {self.bad - 1:,} more lines)" if self.bad > 1 else ""
        return ConfigError(
            f"{self.path}, line {n} is not a result ({why}){more}; {shown('other lines')}; {NOT_A_RESULT_FIX}"
        )


def read_shown(path: Path, keep: Callable[[RecordResult], bool]) -> Shown:
    """Read the results ``show`` prints: those ``keep`` accepts, past any line that is valid
    JSON but not a result, and up to a line that cannot be read at all (too long, not JSON),
    so that the judgments a reader can reach are shown beside the error
    (:meth:`Shown.problem`).

    Raises:
        ConfigError: The file is not a regular file or cannot be opened, or its first line
            cannot be read (nothing to show beside the error).
    """
    shown = Shown(path)

    def skip(n: int, why: str) -> None:
        shown.lines += 1
        shown.bad += 1
        shown.first_bad = shown.first_bad or (n, why)

    try:
        for row in read_results(path, on_bad=skip):
            shown.lines += 1
            if keep(row):
                shown.rows.append(row)
    except ConfigError as exc:
        if not shown.lines:
            raise
        shown.stopped = exc
    return shown


#: Characters of context kept on each side of a quote when a text is long.
CONTEXT_CHARS = 80
#: A text up to this long is shown whole; a longer one only around its quotes.
WHOLE_CHARS = 600


def texts_of(record: Record) -> dict[str, str]:
    """The texts of ``record`` a quote's ``field`` names: ``response`` (a conversation's last
    assistant turn with text, where the record has none), ``reference``, ``user_input``,
    ``retrieved_contexts[i]``, and each turn's text as ``messages[i]``."""
    texts = {k: v for k in ("response", "reference", "user_input") if isinstance(v := getattr(record, k), str)}
    if "response" not in texts and record.messages and (last := last_response(record.messages)):
        texts["response"] = last
    for i, ctx in enumerate(record.retrieved_contexts or []):
        texts[f"retrieved_contexts[{i}]"] = ctx
    for i, turn in enumerate(record.messages or []):
        if turn.content:
            texts[f"messages[{i}]"] = turn.content
    return texts


def text_for(field: str, quotes: Sequence[Quote], texts: Mapping[str, str]) -> tuple[str, str] | None:
    """Where ``quotes`` (all of one ``field``) stand among ``texts``: that field, or for the
    turns shown to a conversation's judge (``conversation[i]``, numbered among those shown)
    the record's turn that holds them all; None when no text does."""
    if field in texts:
        return field, texts[field]
    for name, text in texts.items():
        if name.startswith("messages[") and all(q.text in text for q in quotes):
            return name, text
    return None


def quotes_of(result: RecordResult) -> list[Quote]:
    """Every quote of every sample of every model in ``result`` (statements included)."""
    found = [q for m in result.models for sample in m.evidence or [] for q in sample or []]
    for statement in result.statements or []:
        found += [q for m in statement.models for sample in m.evidence or [] for q in sample or []]
    return found


def spans(text: str, quotes: Iterable[Quote]) -> list[tuple[int, int]]:
    """The quoted character ranges of ``text``, merged where they overlap, in order (each
    quote's every occurrence: the judge quoted the words, not one place)."""
    ranges = []
    for q in {q.text for q in quotes}:
        start = text.find(q)
        while start >= 0 and q:
            ranges.append((start, start + len(q)))
            start = text.find(q, start + 1)
    merged: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def windows(length: int, marked: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of a text of ``length`` characters to show: all of it when short, else each
    quote with CONTEXT_CHARS around it, merged where they meet."""
    if length <= WHOLE_CHARS or not marked:
        return [(0, min(length, WHOLE_CHARS) if not marked else length)]
    out: list[tuple[int, int]] = []
    for start, end in marked:
        lo, hi = max(0, start - CONTEXT_CHARS), min(length, end + CONTEXT_CHARS)
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out


def marked_text(text: str, quotes: Iterable[Quote], style: str = "bold black on yellow") -> Text:
    """``text`` (around its quotes, when long) with every quote highlighted, for the terminal."""
    marked = spans(text, quotes)
    out = Text()
    shown = windows(len(text), marked)
    for k, (lo, hi) in enumerate(shown):
        out.append("…" if lo > 0 or k else "")
        at = lo
        for start, end in marked:
            if end <= lo or start >= hi:
                continue
            out.append(escape_controls(text[at:start]))
            out.append(escape_controls(text[max(start, lo) : min(end, hi)]), style=style)
            at = min(end, hi)
        out.append(escape_controls(text[at:hi]))
    if shown[-1][1] < len(text):
        out.append("…")
    return out


def marked_html(text: str, quotes: Iterable[Quote]) -> str:
    """``text`` (around its quotes, when long) escaped for HTML, every quote in ``<mark>``."""
    marked = spans(text, quotes)
    parts = []
    shown = windows(len(text), marked)
    for k, (lo, hi) in enumerate(shown):
        if lo > 0 or k:
            parts.append("…")
        at = lo
        for start, end in marked:
            if end <= lo or start >= hi:
                continue
            parts.append(html.escape(text[at:start]))
            parts.append(f"<mark>{html.escape(text[max(start, lo) : min(end, hi)])}</mark>")
            at = min(end, hi)
        parts.append(html.escape(text[at:hi]))
    if shown[-1][1] < len(text):
        parts.append("…")
    return "".join(parts)


#: Characters of a sample's thinking that ``show`` prints folded (all of it with ``--thinking``).
FOLDED_THINKING = 100


def _thought(thinking: str, full: bool) -> Text:
    """A sample's thinking, folded to its start (with its length in words) unless ``full``."""
    words = len(thinking.split())
    line = Text(f"\n    thinking ({words} words): ", style="dim")
    flat = " ".join(thinking.split())
    if full:
        line.append(escape_controls(thinking.strip()), style="dim italic")
    else:
        cut = flat if len(flat) <= FOLDED_THINKING else flat[:FOLDED_THINKING].rsplit(" ", 1)[0] + " …"
        line.append(escape_controls(cut), style="dim italic")
    return line


def _samples(m: ModelJudgment, full_thinking: bool = False) -> Text:
    lines = Text()
    for j, vote in enumerate(m.votes):
        reason = m.reasons[j] if j < len(m.reasons) else None
        quotes = (m.evidence or [])[j] if j < len(m.evidence or []) else None
        thinking = (m.thinking or [])[j] if j < len(m.thinking or []) else None
        cited = (m.ungrounded or [])[j] if j < len(m.ungrounded or []) else None
        lines.append(f"  sample {j + 1}: ", style="dim")
        lines.append("abstained" if vote is None else f"vote {vote}", style="red" if vote is None else "")
        if reason:
            lines.append(f" - {escape_controls(reason)}")
        if cited and vote is not None:  # an abstention says what it cited on its own line below
            lines.append("\n    not in the record: ", style="dim")
            lines.append(", ".join(escape_controls(c) for c in cited), style="magenta")
        if thinking:
            lines.append(_thought(thinking, full_thinking))
        if quotes is not None:
            lines.append("\n    quotes: ", style="dim")
            lines.append("(none)" if not quotes else "; ".join(f"“{escape_controls(q.text)}”" for q in quotes))
        lines.append("\n")
    for inv in m.invalid:
        lines.append(f"  sample {inv.sample + 1} abstained: {escape_controls(inv.problem)}\n", style="red")
    return lines


def judgment_view(result: RecordResult, record: Record | None, full_thinking: bool = False) -> Group:
    """``result`` for the terminal: its score, each model's verdict and samples (a judge's
    thinking folded to its start, whole with ``full_thinking``), then each text of ``record``
    that a quote comes from, the quotes marked (offsets alone without it)."""
    head = Text(f"{result.record_id} · {result.metric} · score ", style="bold")
    head.append("-" if result.score is None else f"{result.score:.3f}")
    if result.error:
        head.append(f"  error: {escape_controls(result.error)}", style="red")
    parts: list[Text] = [head]
    if result.stacked is not None:  # beside the score, never in its place
        st = result.stacked
        said = f"p {st.probability:.3f}, verdict {st.verdict}" if st.probability is not None else \
            f"none ({', '.join(st.missing)} gave no probability)"  # fmt: skip
        parts.append(Text(f"stacked jury (weights learned by align; the score is the mean): {said}", style="dim"))
    for m in result.models:
        score = None if m.score is None else round(m.score, 3)  # a rubric's or a head's score, as the record's
        verdict = "abstains" if m.verdict is None and m.score is None else f"verdict {m.verdict}, score {score}"
        parts.append(Text(f"{m.model}: {verdict}" + (f"  ({escape_controls(m.error)})" if m.error else "")))
        if m.head is not None:  # one decision, no sample; the reason the judge wrote before a head after it
            blocks = "+".join(str(i) for i in (m.head.layer, *m.head.more_layers))
            blocks += reading_suffix(m.head.pooling, m.head.after_reason)
            reason = m.reasons[0] if m.reasons else None
            written = f" - {escape_controls(reason)}" if reason else " (hidden states, no reason)"
            parts.append(Text(f"  decided by its head on layer{'s' if m.head.more_layers else ''} {blocks}: "
                              f"{m.head.said()}{written}", style="dim"))  # fmt: skip
            beside = Text()
            for j, (vote, reason) in enumerate(zip(m.head.votes or [], m.head.reasons or [], strict=False)):
                beside.append(f"  beside it, sample {j + 1} (not counted): ", style="dim")
                beside.append("abstained" if vote is None else f"vote {vote}")
                beside.append(f" - {escape_controls(reason)}\n" if reason else "\n")
            parts.append(beside)
            continue
        parts.append(_samples(m, full_thinking))
    quotes = quotes_of(result)
    fields = sorted({q.field for q in quotes})
    texts: Mapping[str, str] = texts_of(record) if record is not None else {}
    for field in fields:
        mine = [q for q in quotes if q.field == field]
        found = text_for(field, mine, texts)
        if found is not None:
            parts.append(Text(f"{field}:" if found[0] == field else f"{field} ({found[0]}):", style="dim"))
            parts.append(marked_text(found[1], mine))
        else:
            at = ", ".join(f"{q.start}-{q.end}" for q in mine)
            parts.append(Text(f"{field}: quoted at characters {at} (the record is not at hand)", style="dim"))
    return Group(*parts)
