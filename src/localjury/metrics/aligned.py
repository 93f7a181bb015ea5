"""Label-aligned judging: an Aspect Critic shown, for each record, the nearest labeled records
as worked examples with their gold verdicts.

A pool of labeled records (a judge profile's examples, see :mod:`localjury.metrics.profile`) is
indexed by TF-IDF over each record's user input and response (scikit-learn's
``TfidfVectorizer``); for a record to judge, the most similar pool records by cosine
similarity are its demonstrations, half of them labeled 1 and half 0 (a label short of
candidates leaves its places to the other). A pool record is never a demonstration of
itself: one with the record's id, or the same user input and response, is left out; so is,
where the caller gives folds, one of the record's own fold (``align`` and ``bench`` put a pair,
or the records of one input, in one fold: none sees its pair).

The demonstrations come after the metric's fixed instruction and worked examples, which stay
the prefix every prompt shares (so prefix caching still holds for them), and before the
record: the least similar first, the most similar last. An empty pool, or no candidate left,
gives the Aspect Critic's prompt byte for byte.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic import BaseModel

from localjury.errors import MetricError, MissingDependencyError
from localjury.metrics.aspect_critic import AspectCritic
from localjury.metrics.neutralise import DEFAULT, Neutraliser
from localjury.records.conversation import Scope
from localjury.records.record import Record
from localjury.types import Message, TieBreak
from localjury.votes.calibration import Calibrator
from localjury.votes.stacking import StackedJury

#: Demonstrations per prompt unless a profile says otherwise.
DEFAULT_SHOTS = 4
#: How demonstrations are chosen: TF-IDF cosine similarity over user input and response.
Similarity = Literal["tfidf-cosine"]
#: The reason a demonstration's answer gives when its label carries none.
GOLD_REASONS = {
    1: "A reviewer labeled this response: it meets the criterion.",
    0: "A reviewer labeled this response: it does not meet the criterion.",
}


@dataclass(frozen=True)
class Demonstration:
    """One labeled record of the pool."""

    record: Record
    gold: int
    """1 when the response meets the criterion, else 0."""
    reason: str | None = None
    """The label's own reason, shown as the demonstration's; None: :data:`GOLD_REASONS`."""
    group: str | None = None
    """The pair or group it belongs to (records sharing it are never each other's examples)."""
    evidence: tuple[str, ...] | None = None
    """Quotes of its response, shown as the demonstration's evidence when the critic quotes
    (``evidence=True``); a quoting critic takes only demonstrations that have them."""


def _text(record: Record) -> str:
    return f"{record.user_input or ''}\n{record.response or ''}"


class Selector:
    """Nearest labeled records by TF-IDF cosine similarity, balanced by label.

    Args:
        pool: The labeled records.
        shots: Demonstrations per record.
        folds: Record id -> fold, for judging labeled records: a record's demonstrations come
            from the other folds only (a record without a fold sees the whole pool).
    """

    def __init__(
        self,
        pool: Sequence[Demonstration],
        shots: int = DEFAULT_SHOTS,
        *,
        folds: Mapping[str, int] | None = None,
    ) -> None:
        if shots < 0:
            raise MetricError(f"shots must be >= 0, got {shots}")
        self.pool = list(pool)
        self.shots = shots
        self.folds = dict(folds or {})
        self._index: Any = None
        self._memo: dict[tuple[str, str], list[int]] = {}

    def _fit(self) -> Any:
        if self._index is None:
            try:
                from sklearn.feature_extraction.text import TfidfVectorizer
            except ImportError:  # pragma: no cover - depends on the environment
                raise MissingDependencyError(
                    "label-aligned examples need scikit-learn: pip install 'localjury[bench]'"
                ) from None
            vectorizer = TfidfVectorizer(sublinear_tf=True)
            self._index = (vectorizer, vectorizer.fit_transform([_text(d.record) for d in self.pool]))
        return self._index

    def _allowed(self, record: Record, d: Demonstration) -> bool:
        other = d.record
        if other.id == record.id or (other.user_input, other.response) == (record.user_input, record.response):
            return False
        fold = self.folds.get(record.id)
        return fold is None or self.folds.get(other.id) != fold

    def select(self, record: Record) -> list[Demonstration]:
        """The record's demonstrations, the least similar first; the same for the same record."""
        if not self.pool or not self.shots:
            return []
        memo = (record.id, _text(record))
        if memo not in self._memo:
            self._memo[memo] = self._select(record)
        return [self.pool[i] for i in self._memo[memo]]

    def _select(self, record: Record) -> list[int]:
        allowed = [i for i, d in enumerate(self.pool) if self._allowed(record, d)]
        if not allowed:
            return []
        vectorizer, matrix = self._fit()
        sims = (matrix[allowed] @ vectorizer.transform([_text(record)]).T).toarray().ravel()
        # Most similar first; ties by pool order, so that the choice is deterministic.
        ranked = [allowed[j] for j in sorted(range(len(allowed)), key=lambda j: (-sims[j], allowed[j]))]
        by_label = {g: [i for i in ranked if self.pool[i].gold == g] for g in (1, 0)}
        first = self.pool[ranked[0]].gold  # an odd number of shots: the extra one to the nearest's label
        want = {first: (self.shots + 1) // 2, 1 - first: self.shots // 2}
        chosen = {g: by_label[g][: want[g]] for g in (1, 0)}
        for g in (1, 0):  # a label short of candidates leaves its places to the other
            short = want[1 - g] - len(chosen[1 - g])
            if short > 0:
                chosen[g] = by_label[g][: want[g] + short]
        picked = set(chosen[1]) | set(chosen[0])
        return [i for i in reversed(ranked) if i in picked]


class AlignedCritic(AspectCritic):
    """An Aspect Critic that shows each record's nearest labeled records as examples.

    The judge reads the Aspect Critic's instruction and worked examples, then the record's
    demonstrations (see :class:`Selector`), each a user turn (the criterion and the labeled
    record) answered by its gold verdict with the label's reason (or a sentence saying a
    reviewer labeled it), then the record. With ``evidence``, each answer quotes first: the
    demonstration's own quotes of its response (see :attr:`Demonstration.evidence`; a pool
    record without them is not shown), and the record's quotes are held to its text as the
    Aspect Critic's are. Votes, verdicts and scores are the Aspect
    Critic's; a model with a fitted threshold in ``calibrators`` is scored by it, as under
    ``run --calibration``.

    Args:
        name: The metric name written in results.
        definition: The criterion.
        selector: The labeled pool and how demonstrations are drawn from it.
        calibrators: Fitted calibrations of this metric, one per model.
        stack: The profile's stacked jury, reported beside each record's score.
        profile: The judge profile it comes from, as the manifest records it.
    """

    in_checklist: ClassVar[bool] = False  # each record's prompt shows its own examples

    def __init__(
        self,
        name: str,
        definition: str,
        *,
        selector: Selector,
        calibrators: Sequence[Calibrator] = (),
        stack: StackedJury | None = None,
        profile: Mapping[str, Any] | None = None,
        strictness: int = 1,
        tie_break: TieBreak = "fail",
        verdict_first: bool = False,
        evidence: bool = False,
        scope: Scope = "last_turn",
    ) -> None:
        super().__init__(
            name,
            definition,
            strictness=strictness,
            tie_break=tie_break,
            verdict_first=verdict_first,
            evidence=evidence,
            scope=scope,
        )
        if evidence:  # a demonstration answers with its quotes: one without any cannot be shown
            pool = [d for d in selector.pool if d.evidence is not None]
            if len(pool) < len(selector.pool):
                selector = Selector(pool, selector.shots, folds=selector.folds)
        self.selector = selector
        self.calibrators = list(calibrators)
        self.stack = stack
        self.profile = dict(profile or {})

    def demonstrations(self, record: Record) -> list[Demonstration]:
        """The labeled records shown to the judge before ``record``."""
        return self.selector.select(record)

    def _answer(self, d: Demonstration) -> BaseModel:
        reason = d.reason or GOLD_REASONS[d.gold]
        if self.evidence:
            return self.output_model(evidence=list(d.evidence or ()), reason=reason, verdict=d.gold)
        return self.output_model(reason=reason, verdict=d.gold)

    def messages(self, record: Record, neutralise: Neutraliser = DEFAULT) -> list[Message]:
        turns = super().messages(record, neutralise)
        shown: list[Message] = []
        for d in self.demonstrations(record):
            shown.append({"role": "user", "content": self.program.render_input(self.bind(d.record), neutralise)})
            shown.append({"role": "assistant", "content": self.program.render_output(self._answer(d), neutralise)})
        return turns[:-1] + shown + turns[-1:]

    def __repr__(self) -> str:
        quoted = ", evidence=True" if self.evidence else ""
        return (
            f"AlignedCritic(name={self.name!r}, definition={self.definition!r}, pool={len(self.selector.pool)}{quoted})"
        )
