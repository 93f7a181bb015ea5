"""The texts a metric's definition brings into every prompt are bounded where they are parsed,
like a record's fields, before any tokenizer sees them: ``--criterion`` and ``--pairwise``,
criteria files, rubric files and judge profiles alike (1 MiB of UTF-8 each)."""

import pytest

from localjury.errors import ConfigError
from localjury.metrics.profile import load_profile
from localjury.metrics.rubric_file import rubric_file_metrics
from localjury.metrics.spec import metrics_of_options, parse_metric
from tests.fakes import run_cli

BOUND = 1 << 20
OVER = "x" * (BOUND + 1)
#: Under the bound in characters, over it in UTF-8 bytes (2 bytes each).
WIDE = "é" * (BOUND // 2 + 1)


@pytest.mark.parametrize("text", [OVER, WIDE], ids=["ascii", "two-byte"])
@pytest.mark.parametrize("kind", ["criterion", "pairwise", "any"])
def test_a_criterion_over_the_bound_on_the_command_line_is_refused(kind, text):
    with pytest.raises(ConfigError, match=r"criterion 'long': its text is (over|[\d,]+ bytes in UTF-8, over) the "):
        parse_metric(f"long={text}", kind)
    with pytest.raises(ConfigError, match=r"its name is .*1,048,576-byte bound on a text of a metric"):
        parse_metric(f"{text}=The response includes a year.", kind)
    assert parse_metric(f"long={'x' * BOUND}", kind).name == "long"  # at the bound: read


def test_a_criterion_that_is_not_text_is_refused_before_any_prompt():
    """A command line's undecodable bytes reach Python as lone surrogates."""
    with pytest.raises(ConfigError, match=r"criterion 'dated': its text is not valid text \(a lone surrogate"):
        parse_metric("dated=The response includes a year \udcff.", "criterion")


@pytest.mark.parametrize(
    ("text", "where"),
    [
        (f"dated: {OVER}\n", "criterion 'dated': its text"),
        (f"criteria:\n- name: dated\n  definition: {OVER}\n", "criterion 'dated': its text"),
        (f"criteria:\n- name: {OVER}\n  definition: The response includes a year.\n", "criterion 'x+': its name"),
    ],
)
def test_a_criterion_over_the_bound_in_a_criteria_file_is_refused_naming_the_file(tmp_path, text, where):
    path = tmp_path / "criteria.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=rf"criteria file .*criteria.yaml: {where} is over the 1,048,576-byte"):
        metrics_of_options(criteria_file=path)


def test_a_criteria_file_s_definition_must_be_text(tmp_path):
    path = tmp_path / "criteria.yaml"
    path.write_text("criteria:\n- name: dated\n  definition: [a, b]\n")
    with pytest.raises(ConfigError, match=r"criteria.yaml: item 1: 'definition' must be the criterion's text"):
        metrics_of_options(criteria_file=path)


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        (f"criteria:\n- {{name: dated, version: 1, definition: {OVER}}}\n", "criteria.0.definition"),
        (f"rubrics:\n- {{name: clear, version: 1, criterion: {OVER}, levels: [a, b]}}\n", "rubrics.0.criterion"),
        (
            f"rubrics:\n- {{name: clear, version: 1, criterion: c, levels: [a, {WIDE}]}}\n",
            "rubrics.0.levels: .*level 2",
        ),
        (
            f"rubrics:\n- {{name: clear, version: 1, criterion: c, levels: {{1: a, 2: {OVER}}}}}\n",
            "rubrics.0.levels: .*level 2",
        ),
    ],
)
def test_a_text_over_the_bound_in_a_rubric_file_is_refused_naming_its_line_and_field(tmp_path, entry, field):
    path = tmp_path / "rubrics.yaml"
    path.write_text(entry)
    with pytest.raises(ConfigError, match=rf"rubrics file .*rubrics.yaml, line 2, field {field}.*1,048,576-byte"):
        rubric_file_metrics(path)


PROFILE = "version: 1\ncriterion: {{name: fluffy, definition: {definition}}}\nexamples:\n{examples}"
EXAMPLE = "- {{id: e{i}, response: {response}, gold: 1}}\n"


@pytest.mark.parametrize(
    ("definition", "response", "field"),
    [
        (OVER, "cats", "criterion.definition"),
        ("About fluffy animals.", OVER, "examples.0.response"),
        ("About fluffy animals.", WIDE, "examples.0.response"),
    ],
)
def test_a_text_over_the_bound_in_a_profile_is_refused_naming_its_field(tmp_path, definition, response, field):
    path = tmp_path / "profile.yaml"
    path.write_text(PROFILE.format(definition=definition, examples=EXAMPLE.format(i=0, response=response)))
    with pytest.raises(ConfigError, match=rf"judge profile .*profile.yaml: {field}: .*1,048,576-byte bound"):
        load_profile(path)


def test_an_example_s_contexts_are_bounded_together(tmp_path):
    half = "x" * (BOUND // 2 + 1)
    path = tmp_path / "profile.yaml"
    examples = f"- {{id: e0, response: cats, gold: 1, retrieved_contexts: [{half}, {half}]}}\n"
    path.write_text(PROFILE.format(definition="About fluffy animals.", examples=examples))
    with pytest.raises(ConfigError, match=r"examples.0.retrieved_contexts: .*texts are 1,048,578 bytes in UTF-8"):
        load_profile(path)


def test_the_cli_refuses_a_long_criterion_with_exit_2_before_any_model(tmp_path, monkeypatch, capsys):
    path = tmp_path / "criteria.yaml"
    path.write_text(f"dated: {OVER}\n")
    code, _, err = run_cli(monkeypatch, capsys, "run", tmp_path / "d.jsonl", "--criteria", path,
                           "--models", "smollm2-135m-instruct")  # fmt: skip
    assert code == 2 and "criteria.yaml: criterion 'dated': its text is over the 1,048,576-byte bound" in err


def _judge_metric_with_example(text):
    from localjury.metrics.aspect_critic import CriterionInput
    from localjury.metrics.base import JudgeMetric, Judgment

    example = (CriterionInput(criterion="c", response=text), Judgment(reason="r", verdict=1))
    return JudgeMetric(
        "own", instruction="Judge.", input_model=CriterionInput, examples=[example], constants={"criterion": "c"}
    )


@pytest.mark.parametrize(
    ("build", "where"),
    [
        (lambda: __import__("localjury").AspectCritic("dated", OVER), r"metric 'dated': its criterion"),
        (lambda: __import__("localjury").AspectCritic(OVER, "d"), r"its name"),
        (lambda: __import__("localjury").Rubric("r", OVER, ["bad", "good"]), r"metric 'r': its criterion"),
        (lambda: __import__("localjury").Rubric("r", "c", ["bad", WIDE]), r"metric 'r': its levels\[1\]"),
        (lambda: __import__("localjury").PairwiseCritic("p", OVER), r"metric 'p': its criterion"),
        (lambda: _judge_metric_with_example(OVER), r"a prompt program: its examples\[0\]\[0\]\.response"),
    ],
    ids=["aspect", "name", "rubric", "level", "pairwise", "example"],
)
def test_a_metric_built_in_code_is_held_to_the_same_bound(build, where):
    """What `evaluate(metrics=[...])` is given never reaches a tokenizer over the bound either."""
    with pytest.raises(ConfigError, match=where + r" is (over|[\d,]+ bytes in UTF-8, over) the 1,048,576-byte bound"):
        build()
