"""Checklist mode on the real tiny model, greedy: one call per record for every criterion,
against one call per criterion on the same records.

The checklist's verdicts are not asserted equal to the separate calls' verdicts: they are
answers to different prompts (one criterion in context against all of them, and each
checklist verdict written after the reasons and verdicts of the criteria before it), so even
greedy decoding follows each prompt's own path. What holds on any machine is asserted
instead: every verdict is 0/1 or an abstention, the counts add up, each checklist verdict
comes with its own probability read in the one decode, the bench's agreement figure is the
share of equal verdicts, and the checklist sends one prompt per record instead of one per
record and criterion."""

import pytest

from localjury import AspectCritic, evaluate
from localjury.bench.checklist_comparison import _agreement
from localjury.votes.voting import passes

pytestmark = pytest.mark.slow

CRITICS = [
    AspectCritic("dated", "The response must include a specific date or year."),
    AspectCritic.predefined("conciseness"),
]
RECORDS = [
    {
        "id": "moon",
        "user_input": "When did people first land on the Moon?",
        "response": "Apollo 11 landed there in July 1969, after a long space race and much more.",
    },
]


def test_checklist_against_one_call_per_criterion_greedy(smollm):
    kw = dict(temperature=0.0, max_tokens=96, use_cache=False, engine="llamacpp")
    separate = evaluate(RECORDS, CRITICS, [smollm], **kw)
    together = evaluate(RECORDS, CRITICS, [smollm], checklist=True, **kw)
    keys = [(rec["id"], c.name) for rec in RECORDS for c in CRITICS]
    verdicts = {}
    for mode, run in (("separate", separate), ("checklist", together)):
        assert [(r.record_id, r.metric) for r in run.results] == keys
        for r in run.results:
            assert r.error is None
            (m,) = r.models
            assert len(m.votes) == 1 and m.votes[0] in (0, 1, None)
            assert m.abstentions == m.votes.count(None) == len(m.invalid)
            if m.votes[0] is not None:
                assert m.verdict == m.votes[0] and r.score == float(m.votes[0])
                assert m.p_pass[0] is not None and 0 < m.p_pass[0] < 1  # its own, read in the decode
        verdicts[mode] = {(r.record_id, r.metric): passes(r.score) for r in run.results}
        (summary,) = run.summary.models
        assert summary.judgments == len(keys)  # per criterion in both modes
    # the checklist: one prompt per record (fewer prompt tokens for the same records)
    assert together.summary.models[0].prompt_tokens < separate.summary.models[0].prompt_tokens
    for c in CRITICS:
        a = [None if verdicts["separate"][(r["id"], c.name)] is None else int(verdicts["separate"][(r["id"], c.name)])
             for r in RECORDS]  # fmt: skip
        b = [None if verdicts["checklist"][(r["id"], c.name)] is None else int(verdicts["checklist"][(r["id"], c.name)])
             for r in RECORDS]  # fmt: skip
        both = [(x, y) for x, y in zip(a, b, strict=True) if x is not None and y is not None]
        agreement = _agreement(a, b)
        assert agreement["decided_both"] == len(both)
        if both:
            assert agreement["same_verdict"] == sum(x == y for x, y in both) / len(both)
