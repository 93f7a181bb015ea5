"""Checklist mode: each criterion of a :class:`~localjury.metrics.checklist.Checklist` judged
as its own metric from samples the whole checklist shares (see :class:`ChecklistJudging`)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar

from localjury.engines.base import Completion
from localjury.metrics.checklist import CHECK_TOKENS, ChecklistCriterion
from localjury.records.record import Record
from localjury.results.report import ModelJudgment
from localjury.run.config import OverflowPolicy
from localjury.run.fit import fit_counted
from localjury.run.judging.base import OneVerdictJudging, verdict_judgment
from localjury.run.state import JuryModel, Request
from localjury.store import Stored


@dataclass(frozen=True)
class ChecklistJudging(OneVerdictJudging):
    """One criterion of a checklist. Its request asks for the whole checklist (the same
    messages, schema, k and token budget for every criterion of the checklist, so a model's
    pass generates them once per record and the judgment store keeps them under one key);
    it reads its own verdict, reason and ``p_pass`` from each sample and votes them as
    :class:`~localjury.run.judging.base.VerdictJudging` votes an Aspect Critic's: the majority per
    model (or its confidence, under probability scoring), the mean over the models. A sample
    that does not parse is an abstention on every criterion of the checklist."""

    kind: ClassVar[str] = "checklist"
    extracts: ClassVar[bool] = False
    metric: ChecklistCriterion

    def first_step(self, record: Record, first: JuryModel) -> Request | None:
        self.metric.checklist.messages(record, first.neutralise)  # raises the record's error
        return None

    def read_first_step(self, record: Record, stored: Stored | None, by: str, lost: str | None) -> Any:
        return None

    def judged(self, context: Any) -> bool:
        return True

    def requests(self, model: JuryModel, record: Record, context: Any, on_overflow: OverflowPolicy) -> list[Request]:
        checklist = self.metric.checklist
        budget = model.max_tokens + CHECK_TOKENS * (len(checklist.critics) - 1)
        render = partial(checklist.messages, neutralise=model.neutralise)
        messages, cut = fit_counted(on_overflow, model, record, budget, render(record), render)
        key = (record.id, self.metric.name)
        # The criteria's rubric-file versions (name@version), so that a new version is judged again.
        versions = [v for v in (getattr(c, "revision", None) for c in checklist.critics) if v]
        revision = " ".join(versions) or None
        schema = checklist.json_schema()
        return [Request(key, messages, schema, self.k, budget, model.temperature, turns_cut=cut, revision=revision)]

    def unanimous(self, record: Record, context: Any, samples: list[Completion]) -> bool:
        # The whole checklist's, so that every criterion draws the same samples.
        parsed = [self.metric.checklist.parse(c.text, finished=c.finished) for c in samples]
        if any(p.problem for p in parsed):
            return False
        return all(len({p.votes[i] for p in parsed}) == 1 for i in range(len(self.metric.checklist.critics)))

    def judge(
        self, name: str, record: Record, context: Any, samples: list[list[Completion]]
    ) -> tuple[ModelJudgment, Any]:
        (drawn,) = samples
        parsed = [self.metric.parse(c.text, finished=c.finished) for c in drawn]
        count, i = len(self.metric.checklist.critics), self.metric.index
        # A sample's verdict probabilities, one per criterion in order, where it wrote them all.
        p_pass = [
            c.verdict_probs[i] if p.vote is not None and c.verdict_probs and len(c.verdict_probs) == count else None
            for c, p in zip(drawn, parsed, strict=True)
        ]
        return verdict_judgment(self, name, parsed, p_pass), None
