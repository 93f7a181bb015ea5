"""A judge profile on the embedded model: judged end to end through the real engine, an empty
profile giving the zero-shot run's results, and no labeled record shown as its own example."""

import pytest

pytest.importorskip("sklearn")

from localjury import AspectCritic, evaluate
from localjury.metrics.profile import JudgeProfile, LabeledExample, ProfileCriterion
from localjury.records.record import Record

pytestmark = pytest.mark.slow

CRITERION = ProfileCriterion(name="dated", definition="The response must include a specific date or year.")
EXAMPLES = [
    LabeledExample(id="wall", user_input="When did the Berlin Wall fall?", response="On 9 November 1989.", gold=1),
    LabeledExample(id="moon", user_input="When did people land on the Moon?", response="In July 1969.", gold=1),
    LabeledExample(id="paris", user_input="What is the capital of France?", response="Paris.", gold=0),
    LabeledExample(id="kenya", user_input="What is the capital of Kenya?", response="Nairobi.", gold=0),
]
RECORDS = [
    {"id": "euro", "user_input": "When was the euro introduced?", "response": "In 1999, as an accounting currency."},
    {"id": "peru", "user_input": "What is the capital of Peru?", "response": "Lima."},
    {"id": "wall", "user_input": "When did the Berlin Wall fall?", "response": "On 9 November 1989."},
]


def test_a_profile_on_the_embedded_model(smollm, tmp_path):
    path = tmp_path / "profile.yaml"
    profile = JudgeProfile(criterion=CRITERION, shots=2, examples=EXAMPLES, models=[smollm.name])
    path.write_text(profile.dump_yaml())
    run = evaluate(RECORDS[1:], [], profile=path, seed=3, use_cache=False)  # the profile's models
    assert [m.model for m in run.summary.models] == [smollm.name]
    assert run.manifest.metrics[0]["profile"]["sha256"] == profile.sha256()
    for row in run.iter_results():
        (m,) = row.models
        assert len(m.votes) == 1 and m.abstentions == sum(v is None for v in m.votes)
    # The labeled record judged is never its own example: its text is in its prompt once.
    metric = profile.metric()
    record = Record(**RECORDS[-1])
    shown = metric.demonstrations(record)
    assert "wall" not in [d.record.id for d in shown] and sorted(d.gold for d in shown) == [0, 1]
    assert sum("On 9 November 1989." in m["content"] for m in metric.messages(record)) == 1


def test_an_empty_profile_judges_as_the_zero_shot_critic(smollm):
    records = RECORDS[:1]
    critic = AspectCritic(CRITERION.name, CRITERION.definition)
    plain = evaluate(records, [critic], [smollm.name], seed=5, use_cache=False)
    empty = JudgeProfile(criterion=CRITERION, examples=[])
    aligned = evaluate(records, [], [smollm.name], profile=empty, seed=5, use_cache=False)
    assert [r.model_dump() for r in aligned.results] == [r.model_dump() for r in plain.results]
