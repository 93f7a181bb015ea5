"""The kinds of metric: each listed once in the registry, built by ``judging_for`` with the
run's settings, the defaults a kind inherits, the record block the Aspect Critic's, a rubric's
and a checklist's prompts share, and the attributes a run reads of any metric."""

from types import SimpleNamespace

import pytest

from localjury import AspectCritic, Checklist, Metric, PairwiseCritic, Rubric, RunConfig, ToolCallAccuracy
from localjury.errors import ConfigError, RecordError
from localjury.metrics._binding import RecordInput
from localjury.metrics.aspect_critic import CriterionInput, VerdictJudging
from localjury.metrics.checklist import ChecklistInput
from localjury.metrics.judging import BaseJudging, agree
from localjury.metrics.kinds import KINDS, judging_for
from localjury.metrics.neutralise import DEFAULT
from localjury.metrics.rubric import RubricInput
from localjury.records.record import Record
from localjury.votes.calibration import Calibrator

DATED = AspectCritic("dated", "The response must include a specific date or year.", strictness=3)
RECORD_FIELDS = ["user_input", "retrieved_contexts", "reference", "conversation", "response"]


def test_each_kind_has_one_judging_in_the_registry():
    kinds = {"checklist", "composite", "graded", "judge", "head", "pairwise", "preference", "rubric", "tool_calls"}
    assert kinds == set(KINDS)
    assert all(entry.metric.kind == kind for kind, entry in KINDS.items())
    assert KINDS["judge"].judging is VerdictJudging
    assert judging_for(DATED, RunConfig().sampling).kind == "judge"


def test_a_metric_of_a_kind_outside_the_registry_is_judged_by_the_judging_its_class_names():
    class OtherJudging(BaseJudging):
        pass

    class Other(AspectCritic):
        kind = "other"
        judging = OtherJudging

    judging = judging_for(Other("dated", "A year."), RunConfig().sampling)
    assert type(judging) is OtherJudging and judging.kind == "other"
    with pytest.raises(ConfigError, match="or a metric whose class names its `judging`"):
        judging_for(Metric("bare"), RunConfig().sampling)


def test_judging_for_takes_the_run_s_settings_over_the_metric_s():
    judging = judging_for(DATED, RunConfig.of(tie_break="pass", scoring="probability", threshold=0.7).sampling)
    assert (judging.k, judging.tie, judging.metric) == (3, "pass", DATED)
    assert (judging.scoring, judging.threshold) == ("probability", 0.7)
    assert judging_for(DATED, RunConfig.of(strictness=5).sampling).k == 5
    assert judging_for(DATED, RunConfig().sampling).ungrounded == "flag"
    assert judging_for(DATED, RunConfig.of(ungrounded="abstain").sampling).ungrounded == "abstain"


def test_a_calibration_file_calibrates_judge_metrics_only():
    fit = Calibrator(
        model="M1", metric="dated", source="vote_share", a=1.0, b=0.0, threshold=0.5, records=9, positives=4
    )
    # Any object of the settings' shape will do (what the run hands in is its SamplingConfig).
    sampling = SimpleNamespace(
        strictness=None,
        tie_break=None,
        scoring="votes",
        threshold=0.5,
        calibration=SimpleNamespace(calibrators=[fit]),
        with_reasons=False,
        ungrounded="flag",
    )
    assert list(judging_for(DATED, sampling).calibrators) == ["M1"]
    pairwise = PairwiseCritic("dated", "More dated.")
    assert judging_for(pairwise, sampling).calibrators == {}


def test_a_metric_of_no_kind_is_refused_naming_the_kinds():
    checklist = Checklist([DATED, AspectCritic("short", "The response is short.")])
    with pytest.raises(ConfigError, match=r"is a Checklist; expected a .*JudgeMetric, .*Rubric"):
        judging_for(checklist, RunConfig().sampling)


def test_a_single_step_kind_inherits_the_defaults():
    judging = judging_for(DATED, RunConfig().sampling)
    record = Record(id="r1", response="It fell in 1989.")
    first = SimpleNamespace(neutralise=DEFAULT)
    assert (
        judging.first_step(record, first) is None and BaseJudging.requests(judging, first, record, None, "error") == []
    )
    unjudged = judging.judge("M1", record, None, "no samples").judgment
    assert (unjudged.votes, unjudged.abstentions, unjudged.error) == ([None] * 3, 3, "no samples")
    assert BaseJudging.unanimous(judging, record, None, []) is False
    assert agree([1, 1]) and not agree([1, None]) and not agree([1, 0])


def test_a_record_the_metric_cannot_judge_is_its_error_at_the_first_step():
    first = SimpleNamespace(neutralise=DEFAULT)  # the model the first step renders for
    with pytest.raises(RecordError, match="needs this field"):
        judging_for(DATED, RunConfig().sampling).first_step(Record(id="r1", user_input="When?"), first)
    assert judging_for(DATED, RunConfig().sampling).first_step(Record(id="r1", response="In 1989."), first) is None


@pytest.mark.parametrize(
    ("model", "own"), [(CriterionInput, "criterion"), (RubricInput, "rubric"), (ChecklistInput, "criteria")]
)
def test_the_record_block_is_one_model_after_the_kind_s_own_field(model, own):
    assert issubclass(model, RecordInput)
    assert list(model.model_fields) == [own, *RECORD_FIELDS]  # the order the prompt shows them in
    assert model.model_config["extra"] == "forbid"
    assert {name: model.model_fields[name].annotation for name in RECORD_FIELDS} == {
        name: info.annotation for name, info in RecordInput.model_fields.items()
    }


def test_a_run_reads_declared_attributes_of_any_metric():
    for metric in (ToolCallAccuracy(), PairwiseCritic("p", "Better."), Rubric("r", "Good.", ["bad", "good"])):
        assert (metric.quote_from, metric.revision, metric.source, metric.profile, metric.calibrators) == (
            (),
            None,
            None,
            None,
            (),
        )
    assert Rubric("r", "Good.", ["bad", "good"], revision="r@2").revision == "r@2"
