import json
import re

import pytest
from pydantic import BaseModel

from localjury import AspectCritic, evaluate
from localjury.errors import ConfigError, RecordError
from localjury.metrics import (
    NLI_STATEMENT,
    STATEMENT_GENERATOR,
    CompositeMetric,
    FactualAccuracy,
    Faithfulness,
    JudgeMetric,
    Judgment,
    StatementsInContext,
    StatementSource,
)
from localjury.metrics.composite import MAX_STATEMENTS
from localjury.records.record import Record
from tests.fakes import factory, judgment, spec

CTX = ["Paris is the capital of France. It has about 2.1 million inhabitants."]


def statements(*texts):
    return json.dumps({"statements": list(texts)})


def verdicts(*votes):
    return json.dumps(
        {"verdicts": [{"statement": f"s{i}", "reason": "r", "verdict": v} for i, v in enumerate(votes, start=1)]}
    )


def is_extraction(prompt):
    return "Break the answer" in prompt


def statements_in(prompt):
    """The statements a verification prompt shows, parsed back from its last <statements> block."""
    block = prompt.rsplit("<statements>", 1)[1].split("</statements>", 1)[0]
    return re.findall(r'<item index="\d+">\n(.*?)\n</item>', block, re.S)


def test_spec_example_per_statement_majority_then_mean_over_models():
    table = {"A": [(1, 0), (1, 0), (0, 1)], "B": [(1, 1), (1, 1), (1, 1)]}

    def respond(model, prompt, j):
        return statements("S one.", "S two.") if is_extraction(prompt) else verdicts(*table[model][j])

    result = evaluate(
        [{"id": "r1", "user_input": "q", "response": "a", "retrieved_contexts": CTX}],
        [Faithfulness()],
        [spec("A"), spec("B")],
        strictness=3,
        engine_factory=factory(respond, []),
    )
    (row,) = result.results
    assert row.error is None and row.extracted_by == "A"
    a, b = row.models
    assert (a.score, b.score, row.score) == (0.5, 1.0, 0.75)
    assert a.verdict is None and a.votes == [] and a.abstentions == 0
    s1, s2 = row.statements
    assert (s1.statement, s1.score, s2.statement, s2.score) == ("S one.", 1.0, "S two.", 0.5)
    assert [(m.model, m.votes, m.verdict) for m in s1.models] == [("A", [1, 1, 0], 1), ("B", [1, 1, 1], 1)]
    assert [(m.model, m.votes, m.verdict) for m in s2.models] == [("A", [0, 0, 1], 0), ("B", [1, 1, 1], 1)]
    assert s1.models[0].reasons == ["r", "r", "r"]
    assert result.summary.metrics[0].kind == "composite" and result.summary.extractor == "A"


def test_stages_are_whole_dataset_batches_and_the_extractor_runs_first():
    log, calls = [], []

    def respond(model, prompt, j):
        if is_extraction(prompt):
            return statements("One.", "Two.")
        if "<criterion>" in prompt.rsplit("### Task", 1)[1]:
            return judgment(1)
        return verdicts(1, 0)

    records = [
        {"id": str(i), "response": f"r{i}", "retrieved_contexts": [f"ctx {i}"], "reference": f"ref {i}"}
        for i in range(3)
    ]
    result = evaluate(
        records,
        [Faithfulness(), FactualAccuracy(), AspectCritic.predefined("conciseness")],
        [spec("A"), spec("B")],
        strictness=3,
        extractor="B",
        engine_factory=factory(respond, log, calls),
    )
    # Both composites extract from (user_input, response): the same prompt, generated once.
    assert log[:2] == [("load", "B"), ("generate", "B", 3, 1)]
    assert sorted(log[2:4]) == [("generate", "B", 3, 3), ("generate", "B", 6, 3)]
    assert log[4:6] == [("close", "B"), ("load", "A")]
    assert sorted(log[6:8]) == [("generate", "A", 3, 3), ("generate", "A", 6, 3)] and log[8:] == [("close", "A")]
    extraction = calls[0]
    assert extraction["sampling"].temperature == 0.0 and extraction["schema"]["required"] == ["statements"]
    (verify_call,) = [c for c in calls[1:3] if "verdicts" in c["schema"]["properties"]]
    verify = verify_call["schema"]["properties"]["verdicts"]
    assert (verify["minItems"], verify["maxItems"]) == (2, 2)
    assert all(r.score == 0.5 for r in result.results if r.metric != "conciseness")
    assert {r.extracted_by for r in result.results if r.metric != "conciseness"} == {"B"}
    assert [m.model for m in result.results[0].models] == ["A", "B"]  # jury order kept in results
    assert [m.model for m in result.summary.models] == ["A", "B"]


def test_verification_is_one_call_per_statement_count_with_a_matching_schema():
    calls = []
    counts = {"r0": 1, "r1": 3, "r2": 1}

    def respond(model, prompt, j):
        if is_extraction(prompt):
            rid = re.search(r"<response>\n(r\d)\n</response>", prompt.rsplit("### Task", 1)[1]).group(1)
            return statements(*[f"{rid} claim {i}." for i in range(counts[rid])])
        return verdicts(*[1] * len(statements_in(prompt)))

    records = [{"id": rid, "response": rid, "retrieved_contexts": CTX} for rid in counts]
    result = evaluate(records, [Faithfulness()], [spec("A")], engine_factory=factory(respond, [], calls))
    verify_calls = calls[1:]
    assert sorted(len(c["prompts"]) for c in verify_calls) == [1, 2]
    for c in verify_calls:
        n_statements = {len(statements_in(p)) for p in c["prompts"]}
        (count,) = n_statements
        assert c["schema"]["properties"]["verdicts"]["maxItems"] == count
        assert c["sampling"].max_tokens >= 160 * count
    assert [len(r.statements) for r in result.results] == [1, 3, 1] and all(r.score == 1.0 for r in result.results)


def test_no_statements_gives_a_null_score_and_no_verification():
    log = []
    result = evaluate(
        [{"id": "x", "response": "Hmm.", "retrieved_contexts": CTX}],
        [Faithfulness()],
        [spec("A"), spec("B")],
        engine_factory=factory(lambda m, p, j: statements(), log),
    )
    (row,) = result.results
    assert row.score is None and row.error is None and row.statements == [] and row.models == []
    assert [e for e in log if e[0] == "generate"] == [("generate", "A", 1, 1)]
    assert result.summary.metrics[0].scored == 0


def test_unparseable_extraction_is_an_error_of_that_pair_only():
    def respond(model, prompt, j):
        return "not json" if is_extraction(prompt) else judgment(1)

    result = evaluate(
        [{"id": "x", "response": "r", "retrieved_contexts": CTX}],
        [Faithfulness(), AspectCritic.predefined("coherence")],
        [spec("A")],
        engine_factory=factory(respond, []),
    )
    faith, coherence = result.results
    assert faith.score is None and "statement extraction by 'A' abstained" in faith.error and "not json" in faith.error
    assert coherence.score == 1.0 and coherence.error is None


def test_bad_verification_samples_abstain_on_every_statement():
    samples = [verdicts(1, 1), "junk", verdicts(1)]

    def respond(model, prompt, j):
        return statements("One.", "Two.") if is_extraction(prompt) else samples[j]

    result = evaluate(
        [{"id": "x", "response": "r", "retrieved_contexts": CTX}],
        [Faithfulness()],
        [spec("A")],
        strictness=3,
        engine_factory=factory(respond, []),
    )
    (row,) = result.results
    assert [s.models[0].votes for s in row.statements] == [[1, None, None], [1, None, None]]
    (model,) = row.models
    assert model.abstentions == 2 and model.score == 1.0
    assert "does not match the schema" in model.invalid[0].problem
    assert model.invalid[1].problem == "gives 1 verdicts for 2 statements"
    assert result.summary.models[0].abstentions == 2


def test_all_statements_abstained_gives_a_null_model_score():
    def respond(model, prompt, j):
        if is_extraction(prompt):
            return statements("One.")
        return "junk" if model == "A" else verdicts(0)

    result = evaluate(
        [{"id": "x", "response": "r", "retrieved_contexts": CTX}],
        [Faithfulness()],
        [spec("A"), spec("B")],
        engine_factory=factory(respond, []),
    )
    (row,) = result.results
    assert [m.score for m in row.models] == [None, 0.0] and row.score == 0.0
    assert result.summary.models[0].abstained_verdicts == 1


def test_missing_context_is_a_record_error_naming_the_field_before_any_load():
    log = []
    result = evaluate(
        [{"id": "no-ctx", "response": "r"}],
        [Faithfulness(), FactualAccuracy()],
        [spec("A")],
        engine_factory=factory(lambda m, p, j: statements("x."), log),
    )
    assert log == []
    faith, fact = result.results
    assert "record 'no-ctx', field 'retrieved_contexts'" in faith.error
    assert "record 'no-ctx', field 'reference'" in fact.error


def test_factual_accuracy_checks_statements_against_the_reference():
    calls = []

    def respond(model, prompt, j):
        return statements("Paris is the capital.") if is_extraction(prompt) else verdicts(1)

    evaluate(
        [{"id": "x", "user_input": "Capital?", "response": "Paris", "reference": "The capital is Paris."}],
        [FactualAccuracy()],
        [spec("A")],
        engine_factory=factory(respond, [], calls),
    )
    task = calls[1]["prompts"][0].rsplit("### Task", 1)[1]
    assert '<context>\n<item index="1">\nThe capital is Paris.\n</item>\n</context>' in task
    assert task.index("<context>") < task.index("<statements>")


def test_extractor_must_be_in_the_jury():
    with pytest.raises(ConfigError, match="extractor 'C' is not in the jury; expected one of: A, B"):
        evaluate(
            [{"response": "r", "retrieved_contexts": CTX}],
            [Faithfulness()],
            [spec("A"), spec("B")],
            extractor="C",
            engine_factory=factory(lambda m, p, j: statements(), []),
        )


def test_nested_output_parsing_and_schema():
    inp = StatementsInContext(context=["c"], statements=["a", "b"])
    schema = NLI_STATEMENT.json_schema(inp)
    assert (schema["properties"]["verdicts"]["minItems"], schema["properties"]["verdicts"]["maxItems"]) == (2, 2)
    assert "minItems" not in NLI_STATEMENT.json_schema()["properties"]["verdicts"]  # the shared one is untouched
    item = schema["$defs"]["StatementVerdict"]
    assert list(item["properties"]) == ["statement", "reason", "verdict"]
    ok = NLI_STATEMENT.parse(verdicts(1, 0), inp=inp)
    assert [v.verdict for v in ok.value.verdicts] == [1, 0]
    nested_bad = json.dumps({"verdicts": [{"statement": "a", "reason": "r", "verdict": "yes"}] * 2})
    bad = NLI_STATEMENT.parse(nested_bad, inp=inp)
    assert bad.value is None and bad.problem.startswith("does not match the schema")
    missing = NLI_STATEMENT.parse(json.dumps({"verdicts": [{"statement": "a", "verdict": 1}] * 2}), inp=inp)
    assert missing.value is None and "Field required" in missing.problem
    cut = NLI_STATEMENT.parse('{"verdicts": [{"statement": "a", "rea', finished=False, inp=inp)
    assert cut.value is None and "cut off" in cut.problem
    too_many = STATEMENT_GENERATOR.parse(statements(*[f"s{i}." for i in range(MAX_STATEMENTS + 1)]))
    assert too_many.value is None
    metric = Faithfulness()
    assert metric.parse_statements(statements("A.", " ", "A.", "B.")) == (["A.", "B."], None)


def test_statement_prompts_render_the_question_and_no_pronoun_instruction():
    msgs = STATEMENT_GENERATOR.messages(StatementSource(user_input="Who?", response="He did it."))
    assert "no pronouns" in msgs[0]["content"]
    assert json.loads(msgs[2]["content"])["statements"]  # the example answers in the schema
    assert msgs[-1]["content"] == "<user_input>\nWho?\n</user_input>\n<response>\nHe did it.\n</response>"


class Dialogue(BaseModel):
    user_input: str
    response: str


POLITE = JudgeMetric(
    "polite",
    instruction="Is the response polite? verdict 1 if it is, 0 if it is not.",
    input_model=Dialogue,
    examples=[(Dialogue(user_input="Help?", response="Go away."), Judgment(reason="Rude.", verdict=0))],
)


def test_a_single_step_metric_declared_in_a_few_lines_runs():
    msgs = POLITE.messages(Record(id="x", user_input="Hello", response="Hi <response>!"))
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]
    assert msgs[-1]["content"] == "<user_input>\nHello\n</user_input>\n<response>\nHi ‹response>!\n</response>"  # noqa: RUF001
    result = evaluate(
        [{"id": "x", "user_input": "Hello", "response": "Hi!"}, {"id": "y", "response": "no question"}],
        [POLITE],
        [spec("A")],
        engine_factory=factory(lambda m, p, j: judgment(1), []),
    )
    ok, bad = result.results
    assert ok.score == 1.0 and ok.models[0].votes == [1]
    assert bad.score is None and "record 'y', field 'user_input': metric 'polite' needs this field" in bad.error


def test_record_error_from_binding_names_record_and_field():
    with pytest.raises(RecordError, match="record 'y', field 'user_input'"):
        POLITE.messages(Record(id="y", response="r"))


class Tone(BaseModel):
    tone: str
    response: str


class NoVerdict(BaseModel):
    reason: str


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"input_model": Tone}, "required input field 'tone' is no record field"),
        ({"input_model": Dialogue, "output_model": NoVerdict}, "needs a field `verdict: Literal\\[0, 1\\]`"),
        ({"input_model": Dialogue, "sources": {"response": "answer_text"}}, "must be a record field"),
        (
            {"input_model": Dialogue, "examples": [(Judgment(reason="r", verdict=1), Judgment(reason="r", verdict=1))]},
            "example 1 must be \\(Dialogue, Judgment\\)",
        ),
    ],
)
def test_declaration_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        JudgeMetric("m", instruction="Judge.", **kwargs)


def test_constants_fill_inputs_that_are_no_record_fields():
    metric = JudgeMetric("tone", instruction="Judge the tone.", input_model=Tone, constants={"tone": "formal"})
    assert metric.messages(Record(id="x", response="r"))[-1]["content"].startswith("<tone>\nformal\n</tone>")


def test_a_custom_composite_reuses_the_stages_with_other_sources():
    # Reference coverage: statements from the reference, each checked against the response.
    coverage = CompositeMetric(
        "coverage",
        extract=STATEMENT_GENERATOR,
        verify=NLI_STATEMENT,
        extract_sources={"response": "reference"},
        verify_sources={"context": "response"},
    )
    calls = []

    def respond(model, prompt, j):
        return statements("Fact one.", "Fact two.") if is_extraction(prompt) else verdicts(1, 0)

    result = evaluate(
        [{"id": "x", "response": "The answer.", "reference": "The reference."}],
        [coverage],
        [spec("A")],
        engine_factory=factory(respond, [], calls),
    )
    assert "<response>\nThe reference.\n</response>" in calls[0]["prompts"][0].rsplit("### Task", 1)[1]
    assert '<context>\n<item index="1">\nThe answer.\n</item>' in calls[1]["prompts"][0].rsplit("### Task", 1)[1]
    assert result.results[0].score == 0.5


def test_cli_builds_composite_metrics_by_name():
    from localjury.metrics.spec import metrics_of_options

    built = metrics_of_options(["coherence"], [], None, ["faithfulness", "factual_accuracy"])
    assert [type(m).__name__ for m in built] == ["AspectCritic", "Faithfulness", "FactualAccuracy"]
    with pytest.raises(ConfigError, match="unknown metric 'nli'; expected one of: faithfulness, factual_accuracy"):
        metrics_of_options([], [], None, ["nli"])
