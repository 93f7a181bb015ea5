"""Decision mode: a judge profile's criterion decided, for the models that have a decision head,
by the head on the model's hidden states, with one prefill a record and nothing sampled.

A profile whose ``localjury align`` found a head that beats prompting for a model
(:mod:`localjury.bench.decision_ways`) judges with a :class:`HeadCritic`: that model's request is the
criterion's zero-shot prompt (the prompt the head was fitted on) with the head in it, and its
judgment is the head's verdict, one vote, its probability as ``p_pass`` and ``confidence``, no
reason (the result's ``head`` says which layer decided). A head after the reason reads the
judge's state where, having written its reason (one greedy sample), it is about to write its
verdict: the judgment keeps that reason. Strictness does not apply to a head
(it is deterministic). With ``with_reasons`` (``run --with-reasons``) the model also draws its
usual samples, reported beside the decision (``head.votes``, ``head.reasons``), never counted.
The jury's other models judge as the profile's aligned critic does, and the record's score is
the mean over all of them, as always.

A head is used only with the hidden states it was fitted on: a run refuses a model whose
weights file, engine, prompt format or the criterion's wording differ from the head's binding.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any, ClassVar

from localjury.metrics.aligned import AlignedCritic
from localjury.metrics.aspect_critic import AspectCritic, VerdictJudging
from localjury.metrics.neutralise import DEFAULT, Neutraliser
from localjury.metrics.prompt_fit import fit_prompt
from localjury.metrics.protocol import Judged, Juror, Request, Samples
from localjury.records.record import Record
from localjury.results.record_result import HeadDecision, ModelJudgment
from localjury.types import Message, OverflowPolicy
from localjury.votes.heads import DecisionHead, HeadBinding


class DecidedByHeads:
    """What a judge profile's metric whose models decide by heads carries (a yes/no critic's
    decision heads, a pairwise criterion's preference heads): the heads by model and their
    hashes; a run checks each head against its model's shape before loading it."""

    name: str
    definition: str
    """The criterion's wording its heads are bound to."""
    profile: dict[str, Any] | None

    def have_heads(self, heads: Mapping[str, DecisionHead]) -> None:
        self.heads = dict(heads)
        #: Each head's hash, computed once (it hashes every weight).
        self.head_sha256s = {model: head.sha256() for model, head in self.heads.items()}

    def head_request(
        self,
        model: Juror,
        record: Record,
        key: str,
        render: Callable[[Record], list[Message]],
        schema: dict[str, object],
        on_overflow: OverflowPolicy,
    ) -> Request:
        """One prefill of ``render``'s prompt of ``record`` (fitted to the model's context),
        decided by ``model``'s head, under the key ``(record.id, key)``.

        Raises:
            ConfigError: The head was fitted on other hidden states (another model file,
                engine, prompt format or criterion; :meth:`~localjury.votes.heads.DecisionHead.check`).
        """
        spec = model.spec
        head = self.heads[spec.name]
        head.check(HeadBinding(model=spec.name, weights_sha256=model.identity, engine=spec.engine,
                               prompt_format=spec.prompt_format, criterion=self.definition))  # fmt: skip
        fitted = fit_prompt(on_overflow, model, record, model.max_tokens, render(record), render)
        return Request(
            (record.id, key),
            fitted.messages,
            schema,
            1,
            model.max_tokens,
            model.temperature,
            turns_cut=fitted.turns_cut,
            revision=f"head:{self.head_sha256s[spec.name]}",
            head=head,
        )

    def beside(self, decided: Request, asked: Sequence[Request]) -> list[Request]:
        """The head's request, then ``asked`` (the usual samples, drawn for their reasons with
        ``--with-reasons``) under a key of their own: never counted in the decision."""
        return [decided, *(replace(req, key=(req.key[0], f"{self.name} [reasons]")) for req in asked)]

    def head_judgment(
        self,
        name: str,
        vote: int | None,
        score: float | None,
        p: float,
        votes: list[int | None] | None = None,
        reasons: list[str | None] | None = None,
        reason: str | None = None,
    ) -> ModelJudgment:
        """Model ``name``'s judgment decided by its head: one vote, the head's probability ``p``
        as ``p_pass`` and ``confidence``, and ``reason``, the one the judge wrote before a head
        after the reason decided (else none); ``votes`` and ``reasons``: the usual samples drawn
        beside it (``--with-reasons``), not counted."""
        head = self.heads[name]
        decision = HeadDecision(layer=head.layer, more_layers=head.more_layers, pooling=head.pooling,
                                after_reason=head.after_reason, probability=p, head_sha256=self.head_sha256s[name],
                                votes=votes, reasons=reasons)  # fmt: skip
        return ModelJudgment(
            model=name,
            votes=[vote],
            reasons=[reason],
            drawn=1,
            abstentions=0,
            verdict=vote,
            score=score,
            p_pass=[p],
            confidence=p,
            head=decision,
        )

    @property
    def head_source(self) -> str:
        """Where its heads come from, for messages: the judge profile's file, where it was read from one."""
        path = (self.profile or {}).get("path")
        return f"judge profile {path}" if path else f"the judge profile of metric {self.name!r}"


class HeadCritic(DecidedByHeads, AlignedCritic):
    """A label-aligned critic of which some models decide by their decision head.

    Args:
        heads: Each decision head by its model's name.
        **aligned: The :class:`~localjury.metrics.aligned.AlignedCritic`'s arguments (the
            other models judge as it does).
    """

    kind: ClassVar[str | None] = "head"

    def __init__(self, name: str, definition: str, *, heads: Mapping[str, DecisionHead], **aligned: Any) -> None:
        super().__init__(name, definition, **aligned)
        self.have_heads(heads)

    def zero_shot_messages(self, record: Record, neutralise: Neutraliser = DEFAULT) -> list[Message]:
        """The criterion's prompt with no demonstrations: what a head reads."""
        return AspectCritic.messages(self, record, neutralise)


class HeadJudging(VerdictJudging):
    """A :class:`HeadCritic`: a model with a head sends one zero-shot prompt decided by it; the
    others judge as :class:`~localjury.metrics.aspect_critic.VerdictJudging` does. (A head's
    request is of one sample, never split under adaptive strictness.)"""

    metric: HeadCritic

    def requests(self, model: Juror, record: Record, context: Any, on_overflow: OverflowPolicy) -> list[Request]:
        if model.spec.name not in self.metric.heads:
            return super().requests(model, record, context, on_overflow)
        render = partial(self.metric.zero_shot_messages, neutralise=model.neutralise)
        decided = self.metric.head_request(model, record, self.metric.name, render, self.metric.json_schema(),
                                           on_overflow)  # fmt: skip
        asked = super().requests(model, record, context, on_overflow) if self.with_reasons else []
        return self.metric.beside(decided, asked)

    def judge(self, name: str, record: Record, context: Any, samples: Samples) -> Judged:
        head = self.metric.heads.get(name)
        if head is None:
            return super().judge(name, record, context, samples)
        if isinstance(samples, str):
            return Judged(self.abstained(name, samples, 1))
        (decided, *_), *beside = samples
        p = (decided.verdict_probs or (None,))[0]
        if p is None:  # a head after the reason, whose judge wrote no verdict to read it at
            problem = f"the judge's answer has no verdict for its head to decide at; raw: {decided.text!r}"
            return Judged(self.abstained(name, problem, 1))
        vote = head.verdict(p)
        reason = self.parse(decided, record).reason if head.after_reason else None
        votes = reasons = None
        if beside:
            parsed = [self.parse(c, record) for c in beside[0]]
            votes, reasons = [x.vote for x in parsed], [x.reason for x in parsed]
        judgment = self.metric.head_judgment(name, vote, float(vote), p, votes, reasons, reason)
        return Judged(judgment, unanimous=True)


def head_models(heads: Sequence[DecisionHead]) -> dict[str, DecisionHead]:
    """The heads by their model's name."""
    return {h.binding.model: h for h in heads}
