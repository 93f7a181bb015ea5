"""Reasons held to the record on the real tiny model through the real engine (llama.cpp): whatever
SmolLM2 writes, each sample's flagged citations are exactly the plain numbers of its reason that
its record and the criterion do not hold (counted independently here), the summary counts those
samples, and under ``ungrounded: abstain`` exactly those samples abstain, every other vote as it
was. Which reasons cite what is not asserted: other kernels sample other reasons (the default
judge's rate is measured in benchmarks/quality/grounded_reasons.py)."""

import json
import re

import pytest

from localjury import AspectCritic, evaluate
from tests import ROOT

pytestmark = pytest.mark.slow

DATED = "The response must include a specific date or year."
RECORDS = [json.loads(line) for line in (ROOT / "examples" / "demo.jsonl").read_text().splitlines()]
#: A run of ASCII digits standing alone (not part of 1,000 or 3.5; a sentence's full stop may
#: follow it): what this test counts without the code under test.
PLAIN = re.compile(r"(?<!\d)(?<!\d[.,])[1-9]\d+(?![\d]|[.,]\d)")


def record_numbers(record: dict) -> set[str]:
    text = json.dumps({k: v for k, v in record.items() if k != "id"}, ensure_ascii=False) + DATED
    return set(re.findall(r"\d+", text))


def test_the_flagged_samples_are_those_citing_numbers_the_record_lacks_and_abstain_drops_only_them(smollm):
    critic = AspectCritic("dated", DATED, strictness=3)
    settings = dict(engine="llamacpp", seed=0, max_tokens=96)
    flagged = evaluate(RECORDS, [critic], [smollm], **settings)
    by_id = {r["id"]: r for r in RECORDS}
    citing = 0
    for r in flagged.results:
        (m,) = r.models
        cited = m.ungrounded or [[] for _ in m.votes]
        assert len(cited) == len(m.votes) == len(m.reasons)
        held = record_numbers(by_id[r.record_id])
        for reason, numbers in zip(m.reasons, cited, strict=True):
            plain = [n for n in PLAIN.findall(reason or "") if n not in held]
            assert [n for n in numbers if PLAIN.fullmatch(n)] == list(dict.fromkeys(plain)), (
                r.record_id,
                reason,
                numbers,
            )
            citing += bool(numbers)
    assert flagged.summary.models[0].ungrounded == citing

    abstained = evaluate(RECORDS, [critic], [smollm], ungrounded="abstain", **settings)  # the same samples, stored
    assert abstained.summary.models[0].judgments == flagged.summary.models[0].judgments
    assert abstained.summary.models[0].ungrounded == citing
    assert abstained.summary.models[0].abstentions == flagged.summary.models[0].abstentions + citing
    for before, after in zip(flagged.results, abstained.results, strict=True):
        (b,), (a,) = before.models, after.models
        cited = b.ungrounded or [[] for _ in b.votes]
        assert a.votes == [None if c else v for v, c in zip(b.votes, cited, strict=True)]
        dropped = {i.sample for i in a.invalid if i.problem.startswith("its reason cites")}
        assert dropped == {j for j, c in enumerate(cited) if c}
