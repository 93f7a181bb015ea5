"""What every judge metric shares: chat messages in, a JSON object out, parsed into votes.

Nothing here imports an engine: a metric renders messages; the engine turns them into its
model's prompt format and constrains the output to the metric's JSON schema.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypedDict

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from localjury.records import Record
from localjury.voting import TieBreak, check_tie_break

#: Upper bound of a judgment's ``reason``; part of the schema, so a generation cannot run
#: out of tokens mid-string when max_tokens leaves room for it.
REASON_MAX_CHARS = 200


class Message(TypedDict):
    """One chat turn."""

    role: Literal["system", "user", "assistant"]
    content: str


class Judgment(BaseModel):
    """The judge's output for one sample: its reasoning first, then its verdict."""

    model_config = ConfigDict(extra="forbid")

    reason: str = Field(max_length=REASON_MAX_CHARS)
    """One or two sentences of reasoning, written before the verdict."""
    verdict: Literal[0, 1]
    """1 when the response meets the criterion, 0 when it does not."""


@dataclass(frozen=True)
class ParsedSample:
    """One sample after parsing: a vote and its reason, or an abstention with the raw text."""

    vote: int | None
    reason: str | None
    raw: str
    problem: str | None = None
    """Why the sample abstained (does not parse, cut off by the token budget)."""


_TAGS = ("user_input", "response", "retrieved_contexts", "context", "reference", "criterion")
_TAG_RE = re.compile(r"<(/?\s*(?:" + "|".join(_TAGS) + r")\b)", re.IGNORECASE)


def delimit(text: str) -> str:
    """Neutralise our own delimiter tags inside record text, so a record cannot close its
    block early and smuggle instructions into the prompt's frame."""
    return _TAG_RE.sub(lambda m: "‹" + m.group(1), text)  # noqa: RUF001 (deliberately not "<")


def render_record(record: Record, *, include_reference: bool = True) -> str:
    """Render a record's fields as tagged blocks; contexts only when present."""
    parts: list[str] = []
    if record.user_input is not None:
        parts.append(f"<user_input>\n{delimit(record.user_input)}\n</user_input>")
    if record.retrieved_contexts:
        ctx = "\n".join(
            f'<context index="{i}">\n{delimit(c)}\n</context>' for i, c in enumerate(record.retrieved_contexts, start=1)
        )
        parts.append(f"<retrieved_contexts>\n{ctx}\n</retrieved_contexts>")
    if include_reference and record.reference is not None:
        parts.append(f"<reference>\n{delimit(record.reference)}\n</reference>")
    parts.append(f"<response>\n{delimit(record.response)}\n</response>")
    return "\n".join(parts)


class Metric(ABC):
    """A judge metric: renders messages for a record and reads votes from the outputs."""

    output_model: ClassVar[type[Judgment]] = Judgment

    def __init__(self, name: str, *, strictness: int = 1, tie_break: TieBreak = "fail") -> None:
        if not name or not name.strip():
            raise ValueError("a metric needs a non-empty name")
        if not isinstance(strictness, int) or strictness < 1:
            raise ValueError(f"strictness must be an integer >= 1, got {strictness!r}")
        self.name = name
        self.strictness = strictness
        self.tie_break = check_tie_break(tie_break)

    @abstractmethod
    def messages(self, record: Record) -> list[Message]:
        """Return the chat messages that ask the judge about ``record``."""

    def json_schema(self) -> dict[str, Any]:
        """The JSON schema the engine constrains every sample to."""
        return self.output_model.model_json_schema()

    def parse(self, text: str, *, finished: bool = True) -> ParsedSample:
        """Parse one sample; anything that does not validate is an abstention, not a 0."""
        try:
            out = self.output_model.model_validate_json(text)
        except ValidationError as exc:
            problem = (
                "cut off by the token budget (max_tokens)"
                if not finished
                else ("does not match the schema: " + "; ".join(e["msg"] for e in exc.errors()[:3]))
            )
            return ParsedSample(vote=None, reason=None, raw=text, problem=problem)
        return ParsedSample(vote=int(out.verdict), reason=out.reason, raw=text)


def example_turns(examples: list[tuple[str, Judgment]]) -> list[Message]:
    """Few-shot examples as user/assistant turns, the assistant answering in the schema."""
    turns: list[Message] = []
    for user, judgment in examples:
        turns.append({"role": "user", "content": user})
        turns.append({"role": "assistant", "content": json.dumps(judgment.model_dump(), ensure_ascii=False)})
    return turns
