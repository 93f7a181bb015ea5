"""Rubrics: scales, expected scores, aggregation, the judging, rubric files and their store keys."""

from __future__ import annotations

import json
import math

import pytest

from localjury.engines.base import Completion
from localjury.engines.constrain.verdicts import SCORE_KEY, decision_of, verdict_probs_from_top
from localjury.errors import ConfigError, MetricError, RecordError
from localjury.metrics.rubric import (
    PREDEFINED_RUBRICS,
    Rubric,
    aggregate,
    expected_score,
    normalised,
    predefined_rubric,
)
from localjury.metrics.rubric_file import rubric_file_metrics
from localjury.metrics.spec import parse_metric
from localjury.records.record import Record
from localjury.run.pipeline import evaluate
from tests.fakes import factory, fake_registry, run_cli, spec

LEVELS = ["Wrong.", "Partly right.", "Mostly right.", "Right and complete."]
RECORD = {"id": "r1", "user_input": "When did the Wall fall?", "response": "In 1989.", "reference": "1989"}


def scored(score, probs=None, finished=True) -> Completion:
    text = json.dumps({"reason": "because", "score": score}) if isinstance(score, int) else score
    return Completion(text=text, n_tokens=5, finished=finished, verdict_probs=probs)


def scripted(table):
    """respond(model, prompt, sample) from {model: [completion per sample]}."""
    return lambda model, prompt, j: table[model][j]


@pytest.mark.parametrize(
    ("scores", "how", "expected"),
    [
        ([4, 5, None], "mean", 4.5),
        ([1, 2, 4], "mean", 7 / 3),
        ([1, 2, 4], "median", 2.0),
        ([1, 4], "median", 2.5),
        ([None, None], "mean", None),
        ([], "median", None),
    ],
)
def test_aggregate_takes_the_known_scores(scores, how, expected):
    assert aggregate(scores, how) == (pytest.approx(expected) if expected is not None else None)


@pytest.mark.parametrize(
    ("score", "levels", "norm"), [(1, 5, 0.0), (5, 5, 1.0), (3, 5, 0.5), (2.5, 4, 0.5), (None, 5, None)]
)
def test_normalised_maps_the_scale_onto_0_1(score, levels, norm):
    assert normalised(score, levels) == norm


def test_expected_score_weighs_the_levels_by_their_probabilities():
    assert expected_score((0.0, 0.1, 0.2, 0.3, 0.4), 5) == pytest.approx(4.0)
    assert expected_score((0.5, 0.5), 2) == pytest.approx(1.5)
    assert expected_score(None, 5) is None
    assert expected_score((0.3, 0.7), 5) is None  # not a distribution over this scale


def test_the_schema_allows_only_the_scale_s_values():
    for n in (2, 5, 10):
        schema = Rubric("r", "Quality.", [f"level {i}" for i in range(n)]).json_schema()
        assert list(schema["properties"]) == ["reason", "score"]
        assert schema["properties"][SCORE_KEY]["enum"] == list(range(1, n + 1))
        assert schema["properties"]["reason"]["maxLength"] == 200


def test_a_ten_level_scale_compiles_and_accepts_1_and_10():
    """Outlines' regex of the 10-level enum takes both "1" and "10" (one is the other's prefix)."""
    import re

    from outlines_core.json_schema import build_regex_from_schema

    schema = Rubric("r", "Quality.", [f"level {i}" for i in range(10)]).json_schema()
    regex = re.compile(build_regex_from_schema(json.dumps(schema), r"[ ]?"))
    for value in (1, 9, 10):
        assert regex.fullmatch(json.dumps({"reason": "x", "score": value}, separators=(",", ":")))
    assert not regex.fullmatch('{"reason":"x","score":11}')
    assert not regex.fullmatch('{"reason":"x","score":0}')


def test_the_score_decision_and_its_distribution_from_top_logprobs():
    rubric = Rubric("r", "Quality.", LEVELS)
    decision = decision_of(rubric.json_schema())
    assert decision is not None and decision.choices == ("1", "2", "3", "4")
    tokens = ['{"reason": "', "3", ' of them", "', "score", '": ', "3", "}"]
    tops = [[(t, 0.0)] for t in tokens]
    # The "3" in the reason is no score; at the score: 2, 3 and a 4 with a space; "x" writes none.
    tops[5] = [("3", math.log(0.5)), ("2", math.log(0.2)), (" 4", math.log(0.1)), ("x", math.log(0.2))]
    probs = verdict_probs_from_top(tokens, tops, decision)
    assert probs == pytest.approx((0.0, 0.2 / 0.8, 0.5 / 0.8, 0.1 / 0.8))
    # At 10 levels "1" begins "10": no single token decides the score, none is read.
    assert decision_of(Rubric("t", "Quality.", [str(i) for i in range(10)]).json_schema()) is None


def test_a_rubric_is_refused_with_a_bad_scale():
    with pytest.raises(MetricError, match="2 to 10 level descriptions, got 11"):
        Rubric("r", "Quality.", ["x"] * 11)
    with pytest.raises(MetricError, match=r"numbered 1\.\.N without gaps"):
        Rubric("r", "Quality.", {1: "a", 3: "c"})
    with pytest.raises(MetricError, match=r"threshold must be within 0\.\.1"):
        Rubric("r", "Quality.", LEVELS, threshold=3)
    with pytest.raises(MetricError, match="unknown aggregate 'mode'"):
        Rubric("r", "Quality.", LEVELS, aggregate="mode")  # type: ignore[arg-type]


def test_the_prompt_shows_the_levels_and_the_reference_where_needed():
    rubric = predefined_rubric("correctness_rubric")
    content = rubric.messages(Record(**RECORD))[-1]["content"]
    assert content.startswith("<rubric>\nHow well") and "Score 5: It agrees fully" in content
    assert "<reference>\n1989\n</reference>" in content
    with pytest.raises(RecordError, match="reference"):
        rubric.messages(Record(id="x", user_input="q", response="a"))
    assert (
        "<reference>" not in predefined_rubric("coherence_rubric").messages(Record(id="x", response="a"))[-1]["content"]
    )


def test_the_predefined_rubrics_are_named_metrics():
    assert set(PREDEFINED_RUBRICS) == {
        "helpfulness_rubric",
        "correctness_rubric",
        "coherence_rubric",
        "harmlessness_rubric",
    }
    for name in PREDEFINED_RUBRICS:
        metric = parse_metric(name)
        assert isinstance(metric, Rubric) and metric.name == name and metric.n == 5


def judge(table, metric, models=("M1",), **kw):
    return evaluate([RECORD], [metric], [spec(m) for m in models], engine_factory=factory(scripted(table), []), **kw)


def test_a_model_s_score_is_the_mean_of_its_samples_and_an_unparsed_one_abstains():
    rubric = Rubric("quality", "Quality.", LEVELS, strictness=3)
    dist = (0.1, 0.1, 0.3, 0.5)  # expected 3.2
    table = {"M1": [scored(4, dist), scored(3, dist), scored("not json")], "M2": [scored(1), scored(2), scored(2)]}
    result = judge(table, rubric, ("M1", "M2"), use_cache=False).results[0]
    m1, m2 = result.models
    assert m1.scores == [4, 3, None] and m1.abstentions == 1 and m1.invalid[0].raw == "not json"
    assert m1.expected == pytest.approx([3.2, 3.2, None])
    assert m1.scale_score == 3.5 and m1.score == pytest.approx(2.5 / 3)
    assert m1.votes == [1, 1, None] and m1.verdict == 1  # 4 and 3 of 4 reach 0.5 normalised
    assert m1.p_pass == pytest.approx([0.8, 0.8, None])  # the mass of levels 3 and 4
    assert m2.expected == [None, None, None] and m2.scale_score == pytest.approx(5 / 3) and m2.verdict == 0
    assert result.score == pytest.approx((2.5 / 3 + (2 / 3) / 3) / 2)
    assert result.rubric is not None and result.rubric.levels == 4
    assert result.rubric.score == pytest.approx((3.5 + 5 / 3) / 2) and result.rubric.expected == pytest.approx(3.2)


def test_median_aggregation_and_probability_scoring():
    dist = (0.0, 0.0, 0.5, 0.5)  # expected 3.5
    table = {"M1": [scored(1, dist), scored(2, dist), scored(4, dist)]}
    median = Rubric("q", "Quality.", LEVELS, strictness=3, aggregate="median")
    (result,) = judge(table, median, use_cache=False).results
    assert result.models[0].scale_score == 2.0 and result.models[0].verdict == 0
    (result,) = judge(table, median, use_cache=False, scoring="probability").results
    assert result.models[0].scale_score == pytest.approx(3.5) and result.models[0].verdict == 1


def test_the_threshold_decides_passes_in_the_summary():
    table = {"M1": [scored(3)]}
    lenient = judge(table, Rubric("q", "Quality.", LEVELS, threshold=0.6), use_cache=False)
    assert lenient.results[0].score == pytest.approx(2 / 3) and lenient.summary.metrics[0].pass_rate == 1.0
    strict = judge(table, Rubric("q", "Quality.", LEVELS, threshold=0.7), use_cache=False)
    assert strict.summary.metrics[0].pass_rate == 0.0 and strict.results[0].models[0].verdict == 0


RUBRICS_FILE = """\
criteria:
  - name: dated
    version: 1
    definition: The response includes a year.
rubrics:
  - name: quality
    version: 1
    criterion: How good the answer is.
    levels:
      1: Wrong.
      2: Partly right.
      3: Right.
    threshold: 0.5
"""


def test_a_rubric_file_gives_versioned_metrics(tmp_path):
    path = tmp_path / "rubrics.yaml"
    path.write_text(RUBRICS_FILE)
    dated, quality = rubric_file_metrics(path)
    assert (dated.name, dated.revision, dated.source["version"], dated.source["line"]) == ("dated", "dated@1", "1", 2)
    assert isinstance(quality, Rubric) and quality.n == 3 and quality.revision == "quality@1"
    assert len(quality.source["sha256"]) == 64 and quality.source["line"] == 6


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            ("threshold: 0.5", "threshold: 2"),
            r"line 13, field rubrics.0.threshold: Input should be less than or equal to 1",
        ),
        (("    version: 1\n    criterion", "    criterion"), r"line 6, field rubrics.0.version: Field required"),
        (("definition:", "definitoin:"), r"line 2, field criteria.0.definition: Field required"),
        (("a year.\n", "a year.\n    strict: 3\n"), r"line 5, field criteria.0.strict: Extra inputs are not permitted"),
        (
            ("      3: Right.", "      4: Right."),
            r"line 6, field rubrics.0: rubric 'quality': levels must be numbered 1..N",
        ),
        (("name: quality", "name: dated"), r"line 6, field rubrics.0.name: 'dated' is used twice"),
        (("rubrics:", "rubric:"), r"line 5, field rubric: Extra inputs are not permitted"),
        (
            ("    threshold: 0.5\n", "    threshold: 0.5\n    treshold: 0.4\n"),
            r"line 14, field rubrics.0.treshold: Extra inputs",
        ),
        (
            ("      2: Partly right.\n      3: Right.\n", ""),
            r"line 6, field rubrics.0: rubric 'quality' needs 2 to 10 level",
        ),
        (("    threshold: 0.5\n", "    threshold: [0.5\n"), r"is not valid YAML"),
    ],
)
def test_a_bad_rubric_file_names_the_file_line_and_field(tmp_path, edit, message):
    path = tmp_path / "rubrics.yaml"
    path.write_text(RUBRICS_FILE.replace(*edit))
    with pytest.raises(ConfigError, match=rf"rubrics file {path}.*{message}"):
        rubric_file_metrics(path)


def test_a_bad_rubric_file_exits_2_from_the_cli(tmp_path, monkeypatch, capsys):
    data = tmp_path / "data.jsonl"
    data.write_text(json.dumps(RECORD) + "\n")
    path = tmp_path / "rubrics.yaml"
    path.write_text(RUBRICS_FILE.replace("threshold: 0.5", "threshold: high"))
    code, _, err = run_cli(monkeypatch, capsys, "run", data, "--rubrics", path, "--no-cache")
    assert code == 2 and "line 13, field rubrics.0.threshold" in err and "Traceback" not in err


def test_an_edited_rubric_never_reuses_stale_judgments(tmp_path):
    """The same file judges from the store; a new version, or new level text, generates again;
    a threshold (which no prompt shows) reuses the generations. The manifest names the file's
    hash and each entry's version."""
    path = tmp_path / "rubrics.yaml"
    registry = fake_registry(tmp_path)
    cache = tmp_path / "store.sqlite"

    def run(text):
        path.write_text(text)
        calls: list = []

        def respond(model, prompt, j):
            return scored(2) if "<rubric>" in prompt else json.dumps({"reason": "r", "verdict": 1})

        result = evaluate(
            [RECORD],
            [],
            ["fake"],
            rubrics=path,
            registry=registry,
            cache=cache,
            engine_factory=factory(respond, [], calls),
        )
        prompts = [p for c in calls for p in c["prompts"]]
        return result, prompts

    first, prompts = run(RUBRICS_FILE)
    assert len(prompts) == 2 and [r.metric for r in first.results] == ["dated", "quality"]
    sources = {m["name"]: m["source"] for m in first.manifest.metrics}
    assert sources["quality"]["version"] == "1" and sources["quality"]["file"] == str(path)
    assert run(RUBRICS_FILE)[1] == []  # nothing changed: all from the store
    bumped, prompts = run(RUBRICS_FILE.replace("    version: 1\n    criterion", "    version: 2\n    criterion"))
    assert len(prompts) == 1 and "<rubric>" in prompts[0]  # only the new version, same text
    bumped_sources = {m["name"]: m["source"] for m in bumped.manifest.metrics}
    assert bumped_sources["quality"]["sha256"] != sources["quality"]["sha256"]
    assert len(run(RUBRICS_FILE.replace("2: Partly right.", "2: Half right."))[1]) == 1
    assert run(RUBRICS_FILE.replace("threshold: 0.5", "threshold: 0.9"))[1] == []


def test_store_keys_carry_the_revision():
    from localjury.metrics.protocol import Request
    from localjury.run.context import JuryModel

    model = JuryModel(spec("M1"), "id", 0.7, 1.0, 64)
    base = Request(("r", "m"), [{"role": "user", "content": "x"}], {}, 1, 64, 0.7)
    v1 = Request(("r", "m"), base.messages, {}, 1, 64, 0.7, revision="m@1")
    v2 = Request(("r", "m"), base.messages, {}, 1, 64, 0.7, revision="m@2")
    assert len({model.store_key(r, 0) for r in (base, v1, v2)}) == 3
