"""Reasons held to the record: which citations of a reason the record holds, and what a run does
with a sample whose reason cites what it does not (flagged, or an abstention)."""

import json

import pytest

from localjury import AspectCritic, RunConfig, evaluate
from localjury.errors import ConfigError
from localjury.metrics.judging import RecordTexts, numbers, quotations
from localjury.results.show import judgment_view
from tests.fakes import factory, spec

DATED = ("dated", "The response must include a specific date or year.")


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("built in 1889, for 1,000,000 francs", {"1889", "1000000"}),
        ("3.50 euros, then 3.5 again", {"3.5"}),
        ("items 1,2 and 7", set()),  # a list of single digits, not a number grouped by thousands
        ("version 3.5.1", {"3.5"}),
        ("on 2023-05-01", {"2023"}),  # "05" and "01" are single digits once their zeros go
        ("in ١٣٤٠", {"1340"}),  # Arabic-Indic digits compare as their values
        ("no numbers here, one 7", set()),
    ],
)
def test_numbers_of_two_digits_or_more_compare_by_value(text, found):
    assert numbers(text) == found


def test_quotations_are_the_texts_between_double_or_curly_quotes():
    reason = (
        'It says "created by Guido," and \u201cin Amsterdam\u201d; it\'s not \u00aba date\u00bb, '
        "\u2018its own\u2019 or \u2018x\u2019."
    )
    assert quotations(reason) == ["created by Guido", "in Amsterdam", "a date", "its own"]


@pytest.mark.parametrize(
    ("reason", "cited"),
    [
        ("The response gives a specific date, 1989.", ["1989"]),
        ("The response says 'created by' but gives no year.", []),
        ('It says "CREATED   by guido" and no year.', []),  # case and whitespace aside
        ('It says "invented in Amsterdam" in 1991 and 1991.', ["1991", "invented in Amsterdam"]),
        ("Verdict 1: the criterion's date or year is missing.", []),
        ("It costs 1000000 francs, so 1,000,000.", []),
        ("", []),
        (None, []),
    ],
)
def test_a_reason_s_ungrounded_citations_are_the_numbers_and_quotations_the_record_lacks(reason, cited):
    held = RecordTexts(["Python was created by Guido van Rossum for 1,000,000 francs.", DATED[1]])
    assert held.ungrounded(reason) == cited


def _respond(model, prompt, sample):
    """Sample 0 cites a year the record lacks, sample 1 one it holds, sample 2 nothing."""
    reasons = ["It gives the date 1989.", "It gives the year 1991.", "It names no year."]
    return json.dumps({"reason": reasons[sample], "verdict": int(sample < 2)})


def _run(tmp_path, **settings):
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"id": "py", "response": "Python was first released in 1991."}) + "\n")
    out = tmp_path / settings.get("ungrounded", "flag") / "r.jsonl"
    run = evaluate(str(data), [AspectCritic(*DATED)], [spec("A")], strictness=3, out=out, use_cache=False,
                   engine_factory=factory(_respond, []), **settings)  # fmt: skip
    (result,) = run.iter_results()
    return run, result, json.loads(out.read_text())


def test_a_flagged_sample_keeps_its_vote_and_the_results_say_what_it_cited(tmp_path):
    run, result, line = _run(tmp_path)
    (judgment,) = result.models
    assert judgment.votes == [1, 1, 0] and judgment.abstentions == 0 and judgment.verdict == 1
    assert judgment.ungrounded == [["1989"], [], []]
    assert line["models"][0]["ungrounded"] == [["1989"], [], []]
    assert run.summary.models[0].ungrounded == 1 and run.summary.models[0].abstentions == 0
    shown = judgment_view(result, None)
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(shown)
    assert "not in the record: 1989" in console.export_text()


def test_under_abstain_the_sample_abstains_saying_what_it_cited(tmp_path):
    run, result, _ = _run(tmp_path, ungrounded="abstain")
    (judgment,) = result.models
    assert judgment.votes == [None, 1, 0] and judgment.abstentions == 1
    assert judgment.verdict == 0  # one vote each way: the tie-break (fail)
    assert judgment.ungrounded == [["1989"], [], []]
    (invalid,) = judgment.invalid
    assert invalid.sample == 0 and "cites '1989', which the record does not hold" in invalid.problem
    assert "1989" in invalid.raw
    assert run.summary.models[0].ungrounded == 1 and run.summary.models[0].abstentions == 1
    assert run.manifest.settings["ungrounded"] == "abstain"


def test_where_the_record_holds_every_citation_the_results_and_manifest_are_as_before(tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"id": "py", "response": "Python appeared in 1991, after 1989."}) + "\n")
    out = tmp_path / "r.jsonl"
    run = evaluate(str(data), [AspectCritic(*DATED)], [spec("A")], strictness=3, out=out, use_cache=False,
                   engine_factory=factory(_respond, []))  # fmt: skip
    (result,) = run.iter_results()
    assert result.models[0].ungrounded is None and run.summary.models[0].ungrounded == 0
    assert "ungrounded" not in json.loads(out.read_text())["models"][0]
    assert "ungrounded" not in run.manifest.settings  # recorded where it is not the default


def test_an_unknown_policy_is_refused_naming_the_choices():
    with pytest.raises(ConfigError, match=r"ungrounded policy.*flag, abstain"):
        RunConfig.of(ungrounded="drop")
