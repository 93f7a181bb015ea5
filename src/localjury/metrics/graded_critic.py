"""Graded heads at run time: a rubric decided, for the models whose judge profile holds a graded
head, by that head on the model's hidden states, with one prefill a record and nothing sampled.

``localjury align --rubric`` on records scored on the rubric's scale fits a ridge regression per
model on the rubric prompt's hidden states (:mod:`localjury.votes.graded`) and keeps it where its
Spearman's rho beats the prompted rubric's by cross-validation (:mod:`localjury.bench.align_graded`).
A run with that profile asks such a model for one prefill of the rubric's prompt (the prompt the
head was fitted on); the engine reads the head's score from the state (normalised to 0..1, as its
output is: :meth:`~localjury.votes.heads.DecisionHead.output`). The model's scale score is that
score on 1..N, its score the scale score normalised to 0..1 and its verdict whether that
reaches the rubric's threshold, as a prompted rubric's (:mod:`localjury.metrics.rubric`); its
``head`` in the results says which blocks decided and the score they gave. Strictness does not
apply to a head. With ``with_reasons`` (``run --with-reasons``) the model also draws its usual
samples, reported beside the decision (``head.votes``, ``head.reasons``), never counted. The jury's
other models grade as the rubric does (a model whose expected score won in ``align`` scored by it),
and the record's score is the mean over all of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any, ClassVar

from localjury.metrics.head_critic import DecidedByHeads
from localjury.metrics.protocol import Judged, Juror, Request, Samples
from localjury.metrics.rubric import Rubric, RubricJudging, normalised
from localjury.records.record import Record
from localjury.results.record_result import HeadDecision, ModelJudgment
from localjury.types import OverflowPolicy
from localjury.votes.heads import DecisionHead

#: A graded profile's prompted ways (:mod:`localjury.bench.align_graded`): the mean of a model's
#: sampled scores, and of its expected scores.
PROMPTED, EXPECTED = "prompted score", "prompted expected score"


class GradedCritic(DecidedByHeads, Rubric):
    """A rubric of which some models decide by their graded head (a judge profile's, see the
    module's text); the others grade as a :class:`~localjury.metrics.rubric.Rubric` does.

    Args:
        heads: Each graded head by its model's name.
        expected: The models scored by their expected score (``align``'s winner for them).
        profile: The judge profile it comes from, as the manifest records it.
        **rubric: The :class:`~localjury.metrics.rubric.Rubric`'s arguments.
    """

    kind: ClassVar[str | None] = "graded"

    def __init__(
        self,
        name: str,
        criterion: str,
        levels: Sequence[str],
        *,
        heads: Mapping[str, DecisionHead],
        expected: Sequence[str] = (),
        profile: dict[str, Any] | None = None,
        **rubric: Any,
    ) -> None:
        super().__init__(name, criterion, levels, **rubric)
        self.have_heads(heads)
        #: The models without a head whose expected score won over their sampled one in ``align``:
        #: scored by it, whatever the run's scoring.
        self.expected = frozenset(expected)
        #: What its heads are bound to: the rubric as the judge reads it (the criterion and its levels).
        self.definition = self.rubric_text()
        self.profile = dict(profile or {})


class GradedJudging(RubricJudging):
    """A :class:`GradedCritic`: a model with a head sends one prefill of the rubric's prompt,
    decided by it; the others judge as :class:`~localjury.metrics.rubric.RubricJudging` does."""

    metric: GradedCritic

    def by_expected(self, name: str) -> bool:
        return name in self.metric.expected or super().by_expected(name)

    def requests(self, model: Juror, record: Record, context: Any, on_overflow: OverflowPolicy) -> list[Request]:
        if model.spec.name not in self.metric.heads:
            return super().requests(model, record, context, on_overflow)
        render = partial(self.metric.messages, neutralise=model.neutralise)
        decided = self.metric.head_request(model, record, self.metric.name, render, self.metric.json_schema(),
                                           on_overflow)  # fmt: skip
        asked = super().requests(model, record, context, on_overflow) if self.with_reasons else []
        return self.metric.beside(decided, asked)

    def judge(self, name: str, record: Record, context: Any, samples: Samples) -> Judged:
        head = self.metric.heads.get(name)
        if head is None:
            return super().judge(name, record, context, samples)
        if isinstance(samples, str):
            judgment = self.abstained(name, samples, 1)
            return Judged(judgment.model_copy(update={"scores": [None], "expected": [None]}))
        (decided, *_), *beside = samples
        output = (decided.verdict_probs or (None,))[0]
        if output is None:  # pragma: no cover - a head's completion always carries its output
            return Judged(self.abstained(name, "the graded head gave no score", 1))
        scale = head.scale_score(output)
        votes = reasons = None
        if beside:
            parsed = [self.metric.parse(c.text, finished=c.finished) for c in beside[0]]
            votes = [None if x.score is None else int(self._passes(x.score)) for x in parsed]
            reasons = [x.reason for x in parsed]
        score = normalised(scale, self.metric.n)
        decision = HeadDecision(layer=head.layer, more_layers=head.more_layers, pooling=head.pooling, score=scale,
                                head_sha256=self.metric.head_sha256s[name], votes=votes, reasons=reasons)  # fmt: skip
        level = int(scale + 0.5)
        judgment = ModelJudgment(
            model=name,
            votes=[int(self._passes(level))],
            reasons=[None],
            drawn=1,
            abstentions=0,
            verdict=int((score or 0.0) >= self.pass_at),
            score=score,
            scores=[level],
            expected=[scale],
            scale_score=scale,
            head=decision,
        )
        return Judged(judgment, unanimous=True)
