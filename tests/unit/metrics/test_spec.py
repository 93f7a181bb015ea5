"""One parser reads a metric from its text, whatever asks: ``run``'s options, ``bench``'s,
``calibrate``'s and ``align``'s ``metric``, a checklist's criteria."""

import pytest

from localjury.bench._judge import resolve_metric
from localjury.errors import ConfigError
from localjury.metrics import AspectCritic, Faithfulness
from localjury.metrics.pairwise import PairwiseCritic
from localjury.metrics.spec import metrics_of_options, parse_metric

CRITERION = 'dated="The response includes a year."'


@pytest.mark.parametrize(
    ("text", "kind", "expected"),
    [
        ("coherence", "aspect", AspectCritic),
        ("coherence", "any", AspectCritic),
        (CRITERION, "criterion", AspectCritic),
        (CRITERION, "any", AspectCritic),
        ("faithfulness", "named", Faithfulness),
        ("faithfulness", "any", Faithfulness),
        (CRITERION, "pairwise", PairwiseCritic),
    ],
)
def test_each_kind_reads_what_it_names(text, kind, expected):
    assert type(parse_metric(text, kind)) is expected


@pytest.mark.parametrize(
    ("text", "kind", "message"),
    [
        ("faithfulness", "aspect", "unknown aspect 'faithfulness'"),
        (CRITERION, "aspect", "unknown aspect"),
        ("coherence", "criterion", "--criterion expects NAME=TEXT"),
        ("coherence", "named", "unknown metric 'coherence'"),
        ("coherence", "pairwise", "--pairwise expects NAME=TEXT"),
        ("=no name", "any", "`metric` '=no name': expected a composite"),
        ("name=  ", "criterion", "--criterion expects NAME=TEXT"),
    ],
)
def test_text_of_another_kind_is_a_config_error_naming_the_option(text, kind, message):
    with pytest.raises(ConfigError, match=message):
        parse_metric(text, kind)


def test_aspects_and_criteria_take_the_answer_s_shape_and_strictness():
    metric = parse_metric(CRITERION, strictness=3, verdict_first=True)
    assert isinstance(metric, AspectCritic) and metric.strictness == 3 and metric.verdict_first
    assert parse_metric("coherence", evidence=True).evidence
    assert parse_metric("faithfulness", "named", evidence=True).evidence


def test_run_and_bench_read_the_same_text_as_the_same_metric():
    """What `run --criterion` and `bench --metric` make of one criterion is one metric: the
    same name, definition and prompt."""
    (from_run,) = metrics_of_options(criteria=[CRITERION], verdict_first=True)
    from_bench = resolve_metric(CRITERION, "jsonl", 1, verdict_first=True)
    assert isinstance(from_run, AspectCritic) and isinstance(from_bench, AspectCritic)
    assert (from_run.name, from_run.definition, from_run.verdict_first) == (
        from_bench.name,
        from_bench.definition,
        from_bench.verdict_first,
    )
    (aspect_run,) = metrics_of_options(aspects=["coherence"])
    assert aspect_run.definition == resolve_metric("coherence", "jsonl", 1).definition
