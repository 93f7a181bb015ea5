"""How a run judges a metric: the :class:`BaseJudging` every kind of metric extends (the four
members a kind writes, and the defaults of everything else); at its end, what a sample's reason
cites that its record does not hold (:class:`RecordTexts`, which :meth:`BaseJudging.held_to` asks).

A kind of metric is one module of this package: its metric (prompt program, parsing) and its
judging, listed in the registry, :data:`localjury.metrics.kinds.KINDS`. A kind writes at most
four members, each with a default here:

- :meth:`~BaseJudging.first_step`: the record's error before any model loads, or an
  :class:`~localjury.metrics.protocol.Extraction` asked of the extractor first (a composite's statements);
- :meth:`~BaseJudging.requests`: what a model is asked for a record (nothing by default);
- :meth:`~BaseJudging.judge`: a model's samples, or why it has none, to its judgment
  (:class:`~localjury.metrics.protocol.Judged`; one yes/no verdict per sample);
- :meth:`~BaseJudging.combine`: the models' judgments to the record's result (the mean score).

:mod:`~localjury.metrics.rubric` and :mod:`~localjury.metrics.tool_calls` are short examples, and
``examples/unsure_kind.py`` one outside the package.

The run stages (:mod:`~localjury.run.plan`, :mod:`~localjury.run.generate`,
:mod:`~localjury.run.assemble`) only call the :class:`~localjury.metrics.protocol.Judging` protocol;
they never look at a metric's class. What the run hands a judging, it sees through the shapes of
:mod:`~localjury.metrics.protocol` (``Juror``, ``JudgingSettings``), so that nothing in ``metrics/``
imports the run.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from localjury.metrics.base import ParsedSample
from localjury.metrics.protocol import Extraction, Judged, Juror, Request, Samples
from localjury.records.record import Record
from localjury.results.record_result import InvalidSample, ModelJudgment, RecordResult
from localjury.types import Completion, OverflowPolicy, Scoring, TieBreak, Ungrounded
from localjury.votes.calibration import Calibrator
from localjury.votes.stacking import stacked_of
from localjury.votes.voting import (
    confidence,
    final_score,
    model_score,
    model_verdict,
    probability_verdict,
    vote_share,
)


@dataclass(frozen=True)
class BaseJudging:
    """What every judging is built with (:func:`localjury.metrics.kinds.judging_for`), and the
    defaults of a metric judged in one step, one yes/no verdict per sample: the record's error
    is whatever rendering the metric's prompt raises, no model is asked anything unless the kind
    says what (:meth:`requests`), a model's judgment is :meth:`verdict_judgment`'s of its parsed
    samples of one prompt, and the record's score is the mean of the models' scores."""

    extracts: ClassVar[bool] = False
    """Its first step is the extractor's (its results name the extractor)."""
    metric: Any
    k: int
    """Samples per model (strictness)."""
    tie: TieBreak
    """What an even split of valid votes gives."""
    scoring: Scoring = "votes"
    """How a model's samples become its score: by votes, or by its mean verdict probability."""
    threshold: float = 0.5
    """The confidence above which a model passes under probability scoring."""
    calibrators: Mapping[str, Calibrator] = field(default_factory=dict)
    """Each calibrated model's fit for this metric, by model name."""
    with_reasons: bool = False
    """A model decided by a decision head also draws its usual samples, reported beside the head's decision."""
    ungrounded: Ungrounded = "flag"
    """What a sample whose reason cites a number or quotation the record does not hold becomes
    (see the end of this module): flagged, its vote kept; or an abstention."""
    kind: str = field(init=False)
    """The metric's ``kind``: the key of its judging in the registry."""
    description: str = field(init=False)
    """The metric's line in summaries and manifests."""

    def __post_init__(self) -> None:
        # Read once, when the run builds its judgings: the summary and manifest read them here.
        object.__setattr__(self, "kind", str(self.metric.kind))
        object.__setattr__(self, "description", self.metric.description)

    def first_step(self, record: Record, first: Juror) -> Extraction | None:
        """The record's error before any model loads (raised as its ``RecordError``), or the
        request asked of ``first``, the extractor, before the models judge. By default the
        metric's prompt is rendered once (``metric.messages``), and there is no first step."""
        self.metric.messages(record, first.neutralise)  # raises the record's error
        return None

    def requests(self, model: Juror, record: Record, context: Any, on_overflow: OverflowPolicy) -> list[Request]:
        """``model``'s requests of k samples each for the record: one per prompt it is asked
        (one; a pairwise metric's two orders), each with its own ``key``, its prompt fitted to
        the model's context (:func:`~localjury.metrics.prompt_fit.fit_prompt`). None by default:
        a record no model is asked about has no judgments, only :meth:`combine`'s result."""
        return []

    def judge(self, name: str, record: Record, context: Any, samples: Samples) -> Judged:
        """Model ``name``'s judgment of the record from its samples (each prompt's, in the
        order of :meth:`requests`), or, where ``samples`` is why it has none, its abstention on
        every sample. By default the samples of one prompt, each one yes/no verdict."""
        if isinstance(samples, str):
            return Judged(self.abstained(name, samples, self.k))
        (drawn,) = samples
        parsed = [self.parse(c, record) for c in drawn]
        p_pass = [
            c.verdict_probs[0] if p.vote is not None and c.verdict_probs else None
            for c, p in zip(drawn, parsed, strict=True)
        ]
        return self.verdict_judgment(name, parsed, p_pass)

    def combine(self, record: Record, context: Any, judged: list[Judged]) -> RecordResult:
        """The record's result from each model's judgment: the mean of their scores and of
        their confidences, and beside them a judge profile's stacked jury, where it has one."""
        models = [j.judgment for j in judged]
        return RecordResult(
            record_id=record.id,
            metric=self.metric.name,
            score=final_score([j.score for j in models]),
            error=None,
            confidence=final_score([j.confidence for j in models]),
            models=models,
            stacked=stacked_of(self.metric.stack, models),
        )

    def result(self, record: Record, context: Any, samples: Mapping[str, Samples]) -> tuple[list[Judged], RecordResult]:
        """The record's result from each model's samples (by model name, in the jury's order; or
        why a model has none): each model's :meth:`judge`, the thinking of its samples kept on its
        judgment, then :meth:`combine`. Also each model's judgment, which the run counts."""
        judged = []
        for name, drawn in samples.items():
            one = self.judge(name, record, context, drawn)
            thinking = [] if isinstance(drawn, str) else [c.thinking for prompt in drawn for c in prompt]
            if any(t is not None for t in thinking):
                one = replace(one, judgment=one.judgment.model_copy(update={"thinking": thinking}))
            judged.append(one)
        return judged, self.combine(record, context, judged)

    def unanimous(self, record: Record, context: Any, samples: list[Completion]) -> bool:
        """Whether these first samples of one prompt already decide its majority (adaptive
        strictness): :meth:`judge`'s word on them, judged alone."""
        return self.judge("", record, context, [samples]).unanimous

    def parse(self, sample: Completion, record: Record) -> ParsedSample:
        """One sample of the metric's prompt parsed; its quotes located in ``record`` where the
        metric asks for quotes; its reason held to the record (:meth:`held_to`)."""
        if self.metric.quote_from:
            return self.held_to(record, self.metric.parse(sample.text, finished=sample.finished, record=record))
        return self.held_to(record, self.metric.parse(sample.text, finished=sample.finished))

    def held_to(self, record: Record, parsed: ParsedSample) -> ParsedSample:
        """``parsed`` with what its reason cites that neither ``record`` nor the metric's
        description holds (see the end of this module): flagged, or under
        ``ungrounded: abstain`` an abstention that says what it cited."""
        if not parsed.reason or not (_NUMBER.search(parsed.reason) or _QUOTED.search(parsed.reason)):
            return parsed  # cites nothing checkable: the record's texts are not read
        held = RecordTexts([*texts_of(record.model_dump(mode="json")), self.description])
        cited = held.ungrounded(parsed.reason)
        if not cited:
            return parsed
        if self.ungrounded == "abstain":
            return ParsedSample(vote=None, reason=None, raw=parsed.raw, problem=citing(cited), ungrounded=cited)
        return replace(parsed, ungrounded=cited)

    def abstained(self, name: str, error: str, n: int) -> ModelJudgment:
        """Model ``name``'s judgment where it has no samples: ``n`` abstentions, and why."""
        return ModelJudgment(
            model=name, votes=[None] * n, reasons=[None] * n, abstentions=n, verdict=None, score=None, error=error
        )

    def verdict_judgment(self, name: str, parsed: Sequence[ParsedSample], p_pass: list[float | None]) -> Judged:
        """Model ``name``'s judgment from its parsed samples of one yes/no criterion and their
        verdict probabilities: calibrated where the model has a fit, by its confidence under
        probability scoring, else the majority of its valid votes (an abstention for each
        sample that did not parse)."""
        votes = [p.vote for p in parsed]
        conf = confidence(p_pass)
        cal = self.calibrators.get(name)
        graded = None if cal is None else conf if cal.source == "p_pass" else vote_share(votes)
        score: float | None
        verdict: int | None
        if cal is not None and graded is not None:
            score = cal.calibrated(graded)
            verdict = int(score > cal.threshold)
        elif self.scoring == "probability" and conf is not None:
            verdict, score = probability_verdict(conf, self.threshold), conf
        else:
            verdict = model_verdict(votes, self.tie)
            score = model_score(verdict)
        judgment = ModelJudgment(
            model=name,
            votes=votes,
            reasons=[p.reason for p in parsed],
            drawn=len(parsed),
            abstentions=sum(p.vote is None for p in parsed),
            verdict=verdict,
            score=score,
            p_pass=p_pass,
            confidence=conf,
            calibrated=cal is not None and graded is not None,
            invalid=invalid_samples(parsed, [p.vote is None for p in parsed]),
            evidence=[p.quotes for p in parsed] if any(p.quotes is not None for p in parsed) else None,
            ungrounded=[p.ungrounded or [] for p in parsed] if any(p.ungrounded for p in parsed) else None,
        )
        return Judged(judgment, unanimous=agree(votes))


def agree(values: Sequence[object]) -> bool:
    """Whether every value is known (no abstention) and all are the same: first samples that
    already decide their majority (adaptive strictness)."""
    return None not in values and len(set(values)) == 1


def invalid_samples(parsed: Sequence[Any], abstained: Sequence[bool], start: int = 0) -> list[InvalidSample]:
    """The parsed samples that abstained, each with its problem and raw text; their indices
    counted from ``start``."""
    return [
        InvalidSample(sample=start + j, problem=p.problem or "invalid", raw=p.raw)
        for j, (p, out) in enumerate(zip(parsed, abstained, strict=True))
        if out
    ]


# Reasons held to the record. A small judge reads its own knowledge into the text: asked whether
# "Python was created by Guido van Rossum." states a year, it may answer that "the response gives
# a specific date, 1989". A reason's citations are what can be checked against the record without
# a model: its numbers of two digits or more (in any script's digits; thousands separators and
# leading zeros aside) and its quotations (between straight or curly double quotes, guillemets or
# curly single quotes, three characters or more). A citation is grounded when the record (every
# text it holds) or the criterion holds it: a number among their numbers, a quotation within one of
# their texts, case and whitespace aside. What a reason says in its own words is not checked.

#: A number: digits grouped by thousands with commas, or a run of digits, with a decimal part or not.
_NUMBER = re.compile(r"(?<![\d,])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\d,])|\d+(?:\.\d+)?")
_QUOTED = re.compile(
    r'"([^"\n]{3,300})"|\u201c([^\u201d\n]{3,300})\u201d|\u00ab([^\u00bb\n]{3,300})\u00bb'
    r"|\u201e([^\u201c\u201d\n]{3,300})[\u201c\u201d]|\u2018([^\u2019\n]{3,300})\u2019"
)
#: Curly quotes straightened, as quotations are compared.
_STRAIGHT = str.maketrans("\u2018\u2019\u201c\u201d", "''\"\"")
_SPACE = re.compile(r"\s+")
#: Around a quotation, what is not part of what it quotes.
_EDGES = " \t.,;:!?…'\"()[]"


def _number(token: str) -> str | None:
    """A number as compared: ASCII digits, thousands separators and leading zeros dropped, a
    decimal part kept; None for one of fewer than two digits."""
    digits = "".join(str(unicodedata.digit(c)) if c.isdigit() else c for c in token)
    whole, _, fraction = digits.replace(",", "").partition(".")
    whole, fraction = whole.lstrip("0") or "0", fraction.rstrip("0")
    value = f"{whole}.{fraction}" if fraction else whole
    return value if sum(c.isdigit() for c in value) >= 2 else None


def numbers(text: str) -> set[str]:
    """The numbers of two digits or more in ``text``, as :func:`_number` compares them."""
    found = (_number(m.group()) for m in _NUMBER.finditer(text))
    return {n for n in found if n is not None}


def _plain(text: str) -> str:
    """``text`` as quotations are compared: NFKC, case folded, curly quotes straightened, runs of
    whitespace one space."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = text.translate(_STRAIGHT)
    return _SPACE.sub(" ", text).strip()


def quotations(reason: str) -> list[str]:
    """The texts ``reason`` puts between quotes, in order, trimmed of the punctuation around them."""
    found = (next(g for g in m.groups() if g is not None).strip(_EDGES) for m in _QUOTED.finditer(reason))
    return [q for q in found if len(q) >= 3]


class RecordTexts:
    """What a record holds, as reasons are checked against it: its texts (and the criterion's),
    their numbers, and their text for quotations."""

    def __init__(self, texts: Iterable[str]) -> None:
        kept = [t for t in texts if t]
        self.numbers = set().union(*(numbers(t) for t in kept)) if kept else set()
        self.plain = [_plain(t) for t in kept]

    def ungrounded(self, reason: str | None) -> list[str]:
        """The citations of ``reason`` that the record does not hold: its numbers first, then its
        quotations, each once, in order."""
        if not reason:
            return []
        cited = [m.group() for m in _NUMBER.finditer(reason) if (n := _number(m.group())) and n not in self.numbers]
        cited += [q for q in quotations(reason) if not any(_plain(q) in t for t in self.plain)]
        return list(dict.fromkeys(cited))


def texts_of(value: Any) -> Iterator[str]:
    """Every string in a record's dumped fields (nested lists and mappings walked), its id aside."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            if key != "id":
                yield from texts_of(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from texts_of(item)


def citing(cited: list[str]) -> str:
    """Why a sample abstains under ``ungrounded: abstain``: what its reason cited."""
    shown = ", ".join(repr(c[:60]) for c in cited[:3]) + (f" and {len(cited) - 3} more" if len(cited) > 3 else "")
    return f"its reason cites {shown}, which the record does not hold"
