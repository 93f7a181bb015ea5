"""Preference heads at run time: a pairwise criterion decided, for the models whose judge profile
holds a preference head, by that head on each response's hidden states: a local reward model.

``localjury align`` on preference pairs (``response_a``, ``response_b``, gold 1 where A is the
better) fits a Bradley-Terry head per model on the difference of the two responses' states
(:mod:`localjury.votes.preference`) and keeps it where it beats asking the judge the pairwise
question in both orders (:mod:`localjury.bench.decision_ways`). A run with that profile asks such a
model for two prefills a pair, one a response, each the criterion's zero-shot yes/no prompt about
that response alone (:func:`side`: the prompt the head was fitted on); the engine decides each by
the head (its reward through a sigmoid), and the model's preference is
``p = sigmoid(r_A - r_B)``, the probability that ``response_a`` is the better one. Swapping the two
responses gives ``1 - p``: position-free by construction, where a prompted pairwise judge is
asked in both orders. Nothing is sampled; strictness does not apply to a head.

The model's vote is 1 (``response_a``) where ``p > 0.5``, 0 where ``p < 0.5`` (an exact 0.5 is an
even split, settled by the tie-break); its score that vote, or ``p`` under
``scoring="probability"``; its ``head`` in the results says which blocks decided and with which
probability. With ``with_reasons`` (``run --with-reasons``) the model also judges the pair as the
prompted pairwise judge does, in both orders, beside the decision (``head.votes``,
``head.reasons``, in the record's frame), never counted. The jury's other models judge the pair
as a :class:`~localjury.metrics.pairwise.PairwiseCritic` does, and the record's score is the mean
over all of them, as always.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from functools import partial
from typing import Any, ClassVar, Literal, get_args

from localjury.metrics.aspect_critic import AspectCritic
from localjury.metrics.head_critic import DecidedByHeads
from localjury.metrics.neutralise import DEFAULT, Neutraliser
from localjury.metrics.pairwise import ORDERS, PairwiseCritic, PairwiseJudging, corrected
from localjury.metrics.protocol import Judged, Juror, Request, Samples
from localjury.records.record import Record
from localjury.types import Message, OverflowPolicy, TieBreak
from localjury.votes.heads import DecisionHead
from localjury.votes.preference import preferred
from localjury.votes.voting import model_score, model_verdict, probability_verdict

Side = Literal["response_a", "response_b"]
#: A pair's two responses, each read on its own by a preference head.
SIDES: tuple[Side, ...] = get_args(Side)


def side(record: Record, which: Side) -> Record:
    """One response of a pair as the pointwise record a preference head reads: the pair's input,
    contexts and reference, with that response as the response (``align`` reads the labeled
    pairs' states through this too, so that a run's prompts are the ones the head was fitted on)."""
    return Record(
        id=f"{record.id} [{which}]",
        response=getattr(record, which),
        user_input=record.user_input,
        retrieved_contexts=record.retrieved_contexts,
        reference=record.reference,
    )


class PreferenceCritic(DecidedByHeads, PairwiseCritic):
    """A pairwise criterion of which some models decide by their preference head (a judge
    profile's, see the module's text); the others judge as a
    :class:`~localjury.metrics.pairwise.PairwiseCritic` does.

    Args:
        heads: Each preference head by its model's name.
        profile: The judge profile it comes from, as the manifest records it.
    """

    kind: ClassVar[str | None] = "preference"

    def __init__(
        self,
        name: str,
        criterion: str,
        *,
        heads: Mapping[str, DecisionHead],
        profile: dict[str, Any] | None = None,
        strictness: int = 1,
        tie_break: TieBreak = "abstain",
    ) -> None:
        super().__init__(name, criterion, strictness=strictness, tie_break=tie_break)
        self.have_heads(heads)
        #: The wording its heads are bound to: the criterion's.
        self.definition = self.criterion
        self.profile = dict(profile or {})
        #: The yes/no question a head's prompt asks of each response.
        self.pointwise = AspectCritic(name, self.criterion)

    def side_messages(self, record: Record, which: Side, neutralise: Neutraliser = DEFAULT) -> list[Message]:
        """The zero-shot prompt about one response of the pair (what its head reads)."""
        return self.pointwise.messages(side(record, which), neutralise)


class PreferenceJudging(PairwiseJudging):
    """A :class:`PreferenceCritic`: a model with a head sends one prefill a response, decided by
    it; the others judge as :class:`~localjury.metrics.pairwise.PairwiseJudging` does."""

    metric: PreferenceCritic

    def requests(self, model: Juror, record: Record, context: Any, on_overflow: OverflowPolicy) -> list[Request]:
        if model.spec.name not in self.metric.heads:
            return super().requests(model, record, context, on_overflow)
        self.metric.bind(record)  # a missing response: the error the prompted judge gives, naming the field
        schema = self.metric.pointwise.json_schema()
        decided = []
        for which in SIDES:  # one prefill a response, each decided by the head
            render = partial(self.metric.side_messages, which=which, neutralise=model.neutralise)
            key = f"{self.metric.name} [{which}]"
            decided.append(self.metric.head_request(model, record, key, render, schema, on_overflow))
        asked = super().requests(model, record, context, on_overflow) if self.with_reasons else []
        beside = [  # the prompted pairwise samples, for their reasons, under keys of their own
            replace(req, key=(record.id, f"{self.metric.name} [reasons {order}]"))
            for order, req in zip(ORDERS, asked, strict=False)
        ]
        return [*decided, *beside]

    def judge(self, name: str, record: Record, context: Any, samples: Samples) -> Judged:
        head = self.metric.heads.get(name)
        if head is None:
            return super().judge(name, record, context, samples)
        if isinstance(samples, str):
            return Judged(self.abstained(name, samples, 1))
        (a, *_), (b, *_), *beside = samples
        if not a.verdict_probs or not b.verdict_probs:  # pragma: no cover - a head's completion always carries it
            return Judged(self.abstained(name, "the preference head gave no probability", 1))
        p = preferred(a.verdict_probs[0], b.verdict_probs[0])
        vote = 1 if p > 0.5 else 0 if p < 0.5 else model_verdict([1, 0], self.tie)
        score = model_score(vote)
        if self.scoring == "probability":
            vote, score = probability_verdict(p, self.threshold), p
        votes = reasons = None
        if beside:  # each order's samples, their votes in the record's frame (1: response_a)
            parsed = [(order, self.metric.parse(c.text, finished=c.finished)) for order, drawn in zip(ORDERS, beside,
                      strict=True) for c in drawn]  # fmt: skip
            votes, reasons = [corrected(x.vote, order) for order, x in parsed], [x.reason for _, x in parsed]
        return Judged(self.metric.head_judgment(name, vote, score, p, votes, reasons), unanimous=True)
