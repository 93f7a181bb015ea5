"""The bench report's quoted evidence in context (``bench --evidence``): for a few records, the
judged text with every judge's quotes marked, each sample's vote and reason beside the gold
label, the records the judges got wrong first (where a reader most needs to see why)."""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from typing import Any

from localjury.bench._markdown import md_text
from localjury.bench.formats import BenchItem
from localjury.results.record_result import Quote
from localjury.results.show import marked_html, spans

#: Records shown in the report's evidence section.
SHOWN = 8


def _texts(record: dict[str, Any]) -> dict[str, str]:
    """A bench record's texts by the field names quotes carry."""
    texts = {k: record[k] for k in ("response", "reference") if isinstance(record.get(k), str)}
    contexts = record.get("retrieved_contexts") or []
    for i, ctx in enumerate([contexts] if isinstance(contexts, str) else contexts):
        texts[f"retrieved_contexts[{i}]"] = ctx
    return texts


def _samples(row: dict[str, Any]) -> list[dict[str, Any]]:
    """Each model's samples of a prediction row: vote, reason and quotes (statements' too)."""
    out = []
    for model, m in row["models"].items():
        for j, quotes in enumerate(m.get("evidence") or []):
            votes, reasons = m.get("votes") or [], m.get("reasons") or []
            out.append(
                {
                    "model": model,
                    "vote": votes[j] if j < len(votes) else None,
                    "reason": reasons[j] if j < len(reasons) else None,
                    "quotes": quotes,
                }
            )
    for s in row.get("statements") or []:
        for model, per in (s.get("evidence") or {}).items():
            for j, quotes in enumerate(per):
                votes = s["votes"].get(model) or []
                out.append(
                    {
                        "model": model,
                        "statement": s["statement"],
                        "vote": votes[j] if j < len(votes) else None,
                        "reason": None,
                        "quotes": quotes,
                    }
                )
    return out


def predicted(row: dict[str, Any]) -> int | None:
    """The jury's prediction of a row, or its sole judge's."""
    if "jury_prediction" in row:
        return row["jury_prediction"]
    first: dict[str, Any] = next(iter(row["models"].values()), {})
    return first.get("prediction")


def examples(items: Sequence[BenchItem], rows: Sequence[dict[str, Any]], shown: int = SHOWN) -> list[dict[str, Any]]:
    """Up to ``shown`` records with quoted evidence, for the report: the ones whose jury (or
    sole judge) prediction differs from the gold label first, in file order; each with its
    quoted texts, its gold label, the prediction and every sample."""
    chosen: list[tuple[bool, int]] = []
    for i, row in enumerate(rows):
        if not _samples(row):
            continue
        chosen.append((predicted(row) == row["gold"], i))
    out = []
    for _, i in sorted(chosen)[:shown]:
        row, record = rows[i], items[i].record
        samples = _samples(row)
        fields = sorted({q["field"] for s in samples for q in s["quotes"] or []})
        texts = _texts(record)
        out.append(
            {
                "record_id": row["record_id"],
                "gold": row["gold"],
                "prediction": predicted(row),
                "texts": {f: texts[f] for f in fields if f in texts} or {"response": texts.get("response", "")},
                "samples": samples,
            }
        )
    return out


def _quotes(example: dict[str, Any], field: str) -> list[Quote]:
    return [Quote(**q) for s in example["samples"] for q in s["quotes"] or [] if q["field"] == field]


def html_heading(example: dict[str, Any]) -> str:
    """An example's heading in the report: its record, gold label and prediction."""
    esc = html.escape
    return f"<h3>{esc(example['record_id'])}: gold {example['gold']}, predicted {esc(str(example['prediction']))}</h3>"


def html_vote(sample: dict[str, Any]) -> str:
    """A sample's vote and reason in the report."""
    vote = "abstained" if sample["vote"] is None else f"vote {sample['vote']}"
    return vote + (f" — {html.escape(sample['reason'])}" if sample.get("reason") else "")


def html_examples(
    title: str,
    note: str,
    shown: Sequence[dict[str, Any]],
    shows: Callable[[dict[str, Any]], str],
    item: Callable[[dict[str, Any]], str],
) -> str:
    """A report section of examples: its title and note, then per record its heading, what
    ``shows`` shows of it, and one list item per sample (``item``'s)."""
    parts = [f"<h2>{html.escape(title, quote=False)}</h2><p class='note'>{html.escape(note, quote=False)}</p>"]
    for ex in shown:
        items = "".join(f"<li>{item(s)}</li>" for s in ex["samples"])
        parts.append(f"{html_heading(ex)}{shows(ex)}<ul class='samples'>{items}</ul>")
    return "".join(parts)


def html_section(shown: Sequence[dict[str, Any]]) -> str:
    """The report's HTML section: each record's texts with the quotes marked, then its samples."""
    esc = html.escape

    def texts(ex: dict[str, Any]) -> str:
        return "".join(
            f"<p class='quoted'><b>{esc(field)}</b>: {marked_html(text, _quotes(ex, field))}</p>"
            for field, text in ex["texts"].items()
        )

    def item(s: dict[str, Any]) -> str:
        about = f" on “{esc(s['statement'])}”" if s.get("statement") else ""
        quotes = "; ".join(f"“{esc(q['text'])}”" for q in s["quotes"] or []) or "(none)"
        return f"{esc(s['model'])}{about}: {html_vote(s)}<br>quotes: {quotes}"

    note = (
        "The records the judges got wrong first. Marked: every span any sample quoted (each an exact span of the text)."
    )
    return html_examples("Quoted evidence in context", note, shown, texts, item)


def markdown_section(shown: Sequence[dict[str, Any]]) -> list[str]:
    """The report's Markdown lines: per record, the quoted spans in bold in their text."""
    lines = ["## Quoted evidence in context", "", "The records the judges got wrong first; quoted spans in bold.", ""]
    for ex in shown:
        lines.append(f"- **{md_text(ex['record_id'])}**: gold {ex['gold']}, predicted {ex['prediction']}")
        for field, text in ex["texts"].items():
            # Marks as control characters, escaped with the text as a whole (md_text strips the
            # ends of what it is given: pieces would lose the spaces around each quote).
            marked, at = [], 0
            for start, end in spans(text, _quotes(ex, field)):
                marked += [text[at:start], "\x01", text[start:end], "\x02"]
                at = end
            body = md_text("".join([*marked, text[at:]])).replace("\x01", "**").replace("\x02", "**")
            lines.append(f"  - {md_text(field)}: {body}")
    return [*lines, ""]
