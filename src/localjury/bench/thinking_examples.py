"""The bench report's judges' thinking (judges with a thinking budget, or a server's reasoning
parser): for a few records, each sample's vote and reason beside the gold label, its thinking
collapsed under them, the records the judges got wrong first."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from localjury.bench._markdown import md_text
from localjury.bench.evidence_examples import SHOWN, html_examples, html_vote, predicted


def _samples(row: dict[str, Any]) -> list[dict[str, Any]]:
    """Each model's samples of a prediction row that thought: vote, reason and thinking."""
    out = []
    for model, m in row["models"].items():
        votes, reasons = m.get("votes") or [], m.get("reasons") or []
        for j, thinking in enumerate(m.get("thinking") or []):
            out.append(
                {
                    "model": model,
                    "vote": votes[j] if j < len(votes) else None,
                    "reason": reasons[j] if j < len(reasons) else None,
                    "thinking": thinking,
                }
            )
    return out


def examples(rows: Sequence[dict[str, Any]], shown: int = SHOWN) -> list[dict[str, Any]]:
    """Up to ``shown`` records whose judges thought, those predicted against their gold label
    first, in file order; each with its gold label, the prediction and every sample."""
    chosen = sorted((predicted(row) == row["gold"], i) for i, row in enumerate(rows) if _samples(row))
    return [
        {
            "record_id": rows[i]["record_id"],
            "gold": rows[i]["gold"],
            "prediction": predicted(rows[i]),
            "samples": _samples(rows[i]),
        }
        for _, i in chosen[:shown]
    ]


def html_section(shown: Sequence[dict[str, Any]]) -> str:
    """The report's HTML section: each record's samples, each one's thinking collapsed."""
    esc = html.escape

    def item(s: dict[str, Any]) -> str:
        thought = s["thinking"] or ""
        return (
            f"{esc(s['model'])}: {html_vote(s)}<details class='thinking'>"
            f"<summary>thinking ({len(thought.split())} words)</summary>{esc(thought)}</details>"
        )

    note = "The records the judges got wrong first; open a sample's thinking to read it."
    return html_examples("The judges' thinking", note, shown, lambda ex: "", item)


def markdown_section(shown: Sequence[dict[str, Any]]) -> list[str]:
    """The report's Markdown lines: per record, each sample's vote and the length of its thinking."""
    note = "The records the judges got wrong first (report.html shows the thinking)."
    lines = ["## The judges' thinking", "", note, ""]
    for ex in shown:
        lines.append(f"- **{md_text(ex['record_id'])}**: gold {ex['gold']}, predicted {ex['prediction']}")
        for s in ex["samples"]:
            vote = "abstained" if s["vote"] is None else f"vote {s['vote']}"
            lines.append(f"  - {md_text(s['model'])}: {vote}, thought {len((s['thinking'] or '').split())} words")
    return [*lines, ""]
