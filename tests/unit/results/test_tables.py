"""The printed summary and dry-run plan read whole in an 80-column terminal: no heading or
figure cut, no line longer than 80."""

import io

import pytest

from localjury._terminal import SafeConsole
from localjury.results.summary import MetricSummary, ModelEstimate, ModelPlan, ModelSummary, RunPlan, Summary
from localjury.results.tables import _count, _rate, _secs, print_plan, print_summary

#: The longest embedded model name, and a jury of the demo's judges.
NAMES = ["qwen2.5-coder-1.5b-instruct", "qwen2.5-coder-0.5b-instruct"]


def render(print_fn, value) -> str:
    console = SafeConsole(file=io.StringIO(), width=80, record=True)
    print_fn(value, console)
    return console.export_text()


def model_summary(name, i, **kw):
    figures = dict(
        judgments=1_500_000 + i,
        cached=123_456,
        abstentions=4_321,
        ungrounded=876,
        abstained_verdicts=99,
        pass_rate=0.5,
        load_seconds=12.3,
        generate_seconds=86_399.9,
        judgments_per_second=17.36,
        output_tokens=45_000_000,
        output_tokens_per_second=520.8,
        prompt_tokens=987_654_321,
        prompt_tokens_reused=876_543_210,
    )
    figures.update(kw)
    return ModelSummary(model=name, path="/m", engine="llamacpp", **figures)


def summary_of(models, metrics=(), **kw):
    figures = dict(records=1, record_errors=0, seconds=1.0) | kw
    return Summary(localjury_version="0", dataset=None, seed=0, temperature=None, max_tokens=None,
                   metrics=list(metrics), models=models, started_at="t", **figures)  # fmt: skip


def metric_summary(name, **kw):
    return MetricSummary(metric=name, definition="d", records=99_997, **kw)


def test_the_summary_fits_80_columns_whole():
    summary = summary_of(
        [model_summary(NAMES[0], 0, replicas=16), model_summary(NAMES[1], 1)],
        [
            metric_summary("mentions_date", strictness=3, tie_break="fail", scored=99_990, mean_score=0.6,
                           pass_rate=0.61),
            metric_summary("helpful", kind="pairwise", strictness=64, tie_break="abstain", scored=99_000,
                           mean_score=0.5, pass_rate=1.0, position_consistency=0.75),
        ],
        records=100_000,
        record_errors=3,
        seconds=90_000.0,
    )  # fmt: skip
    text = render(print_summary, summary)
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 80
    lines = text.splitlines()
    for heading in ("metric", "k", "records", "scored", "mean", "pass"):
        assert heading in lines[1].split()
    for row, name in ((f"{NAMES[0]} (x16)", NAMES[0]), (NAMES[1], NAMES[1])):
        verdicts = next(line for line in lines if line.startswith(row) and "%" in line)
        assert verdicts.split()[-6:] == [_count(1_500_000 + NAMES.index(name)), "123k", "4321", "876", "99", "50.0%"]
        cost = next(line for line in lines if line.startswith(row) and "%" not in line)
        assert cost.split()[-6:] == ["12.3", "86400", "17.36", "988M", "877M", "45.0M"]
    for heading in (
        "model",
        "judg",
        "cached",
        "abst",
        "ungr",
        "no verd",
        "load s",
        "gen s",
        "judg/s",
        "prompt",
        "reused",
    ):
        assert heading in text
    assert next(line for line in lines if line.startswith("mentions_date")).split() == [
        "mentions_date",
        "3",
        "99997",
        "99990",
        "0.600",
        "61.0%",
    ]
    flat = " ".join(text.split())  # the notes wrap at 80
    assert "helpful: pairwise (score, pass rate: preference for response_a); position consistency 75.0%" in flat
    assert "100000 records (3 bad), seed 0, 90000.0 s" in text


def test_a_name_longer_than_the_room_folds_and_the_figures_stay_whole():
    name = "my-organisation/a-very-long-local-checkpoint-name-qwen2.5-32b-instruct-awq"
    text = render(print_summary, summary_of([model_summary(name, 0)]))
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 80
    lines = text.splitlines()
    rules = [i for i, line in enumerate(lines) if line.startswith("───")]
    assert len(rules) == 3  # Metrics, Models, Cost
    for rule in rules[1:]:  # each model table's rows: the name in folds, the figures on its first line
        rows = lines[rule + 1 : rule + 1 + next(i for i, line in enumerate(lines[rule + 1 :]) if ":" in line)]
        assert "".join(row.split()[0] for row in rows) == name
        assert rows[0].split()[1:] in (
            ["1.5M", "123k", "4321", "876", "99", "50.0%"],
            ["12.3", "86400", "17.36", "988M", "877M", "45.0M"],
        )


def test_the_dry_run_plan_fits_80_columns_whole():
    estimate = ModelEstimate(prompts=4, judgments=12, load_seconds=4.2, generate_seconds=14.1, warmup_seconds=2.5,
                             judgments_per_second=0.85, output_tokens_per_judgment=31.2, batch_seconds=3.1,
                             prompt_seconds=0.4, seconds=98_765.4)  # fmt: skip
    plan = RunPlan(
        dataset="d.jsonl", records=250_000, record_errors=2, store="/s.sqlite", estimate_prompts=4, kept=True,
        models=[
            ModelPlan(model=NAMES[0], engine="llamacpp", records=249_998, prompts=499_996, judgments=1_499_988,
                      cached=12, prompt_tokens=212_345_678, awaiting_extraction=7, adaptive_more=30, estimate=estimate),
            ModelPlan(model=NAMES[1], engine="llamacpp", records=3, prompts=0, judgments=0, cached=9,
                      prompt_tokens=0, over_context=2),
        ],
        seconds=98_765.4,
    )  # fmt: skip
    text = render(print_plan, plan)
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 80
    lines = text.splitlines()
    assert lines[1].split() == ["model", "records", "prompts", "judg", "cached", "prompt", "est.", "s"]
    row = next(line for line in lines if line.startswith(NAMES[0]))
    assert row.split()[1:] == ["250k", "500k", "1.5M", "12", "212M", "98765"]
    row = next(line for line in lines if line.startswith(NAMES[1]))
    assert row.split()[1:] == ["3", "0", "0", "9", "0", "0.0"]
    flat = " ".join(text.split())
    assert (
        "measured 12 samples of 4 prompts in 14.1 s (0.85 judg/s, 31 output tokens each) after a 4.2 s load and a "
        "2.5 s warm-up; an engine batch: 3.1 s + 0.4 s a prompt"
    ) in flat
    assert "the verification prompts of 7 (record, metric) pairs depend on statement extractions" in flat
    assert "up to 30 more samples" in flat and "2 prompts exceed its context" in flat
    assert "250000 records (2 bad); estimated run time 98765 s" in flat
    assert "kept in the judgment store /s.sqlite" in flat and "No results file was written." in flat


@pytest.mark.parametrize("n", [0, 7, 99_999, 100_000, 123_456, 999_949, 999_999, 12_345_678, 10**9 - 1, 10**12])
def test_counts_take_at_most_6_characters(n):
    assert len(_count(n)) <= 6
    assert _count(n) == str(n) if n < 100_000 else _count(n)[-1] in "kMGT"


@pytest.mark.parametrize("x", [0.0, 0.04, 9.99, 99.994, 99.996, 999.94, 999.96, 9_999.96, 123_456.0])
def test_seconds_and_rates_take_at_most_6_characters(x):
    assert len(_secs(x)) <= 6 and len(_rate(x)) <= 6
