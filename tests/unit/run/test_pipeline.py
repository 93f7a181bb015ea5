import json

import pytest

from localjury import AspectCritic, evaluate
from localjury.errors import ConfigError, RecordError
from localjury.results.record_result import read_results
from tests.fakes import factory, judgment, spec

DATED = AspectCritic("dated", "The response must include a specific date or year.")


def votes_by_model(table):
    """respond() that gives each model a fixed vote vector per sample."""
    return lambda model, prompt, j: judgment(table[model][j]) if isinstance(table[model][j], int) else table[model][j]


def test_spec_example_jury_of_two_with_strictness_3():
    log = []
    result = evaluate(
        [{"id": "r1", "user_input": "q", "response": "in 1989"}],
        [DATED],
        [spec("A"), spec("B")],
        strictness=3,
        engine_factory=factory(votes_by_model({"A": [1, 1, 0], "B": [0, 0, 1]}), log),
    )
    (row,) = result.results
    assert row.score == 0.5 and row.error is None
    a, b = row.models
    assert (a.model, a.votes, a.verdict, a.score) == ("A", [1, 1, 0], 1, 1.0)
    assert (b.model, b.votes, b.verdict, b.score) == ("B", [0, 0, 1], 0, 0.0)
    assert a.reasons == ["because"] * 3


def test_each_model_is_one_batched_call_with_n_k_and_is_freed_before_the_next_loads():
    log = []
    records = [{"id": str(i), "response": f"r{i}"} for i in range(5)]
    evaluate(
        records,
        [DATED, AspectCritic.predefined("conciseness")],
        [spec("A"), spec("B")],
        strictness=3,
        engine_factory=factory(lambda m, p, j: judgment(1), log),
    )
    assert log == [
        ("load", "A"),
        ("generate", "A", 10, 3),
        ("close", "A"),
        ("load", "B"),
        ("generate", "B", 10, 3),
        ("close", "B"),
    ]


def test_unparseable_and_cut_off_samples_are_counted_abstentions_not_zeros():
    table = {"A": ['{"reason": "x", "verdict": 1}', "not json", ('{"reason": "trunc', False)]}
    result = evaluate(
        [{"response": "x"}], [DATED], [spec("A")], strictness=3, engine_factory=factory(votes_by_model(table), [])
    )
    m = result.results[0].models[0]
    assert m.votes == [1, None, None] and m.abstentions == 2 and m.verdict == 1 and result.results[0].score == 1.0
    assert [(i.sample, i.raw) for i in m.invalid] == [(1, "not json"), (2, '{"reason": "trunc')]
    assert "cut off" in m.invalid[1].problem and "schema" in m.invalid[0].problem
    assert result.summary.models[0].abstentions == 2


def test_verdict_outside_schema_abstains():
    result = evaluate(
        [{"response": "x"}],
        [DATED],
        [spec("A")],
        engine_factory=factory(lambda m, p, j: '{"reason": "r", "verdict": 2}', []),
    )
    assert result.results[0].models[0].votes == [None]
    assert result.results[0].score is None


def test_all_models_abstain_gives_null_score():
    result = evaluate(
        [{"response": "x"}],
        [DATED],
        [spec("A"), spec("B")],
        strictness=2,
        engine_factory=factory(lambda m, p, j: "garbage", []),
    )
    row = result.results[0]
    assert row.score is None and [m.verdict for m in row.models] == [None, None]
    assert result.summary.metrics[0].scored == 0 and result.summary.metrics[0].mean_score is None


@pytest.mark.parametrize(
    ("tie_break", "verdict", "score"), [("fail", 0, 0.0), ("pass", 1, 1.0), ("abstain", None, None)]
)
def test_tie_break_policies(tie_break, verdict, score):
    result = evaluate(
        [{"response": "x"}],
        [DATED],
        [spec("A")],
        strictness=2,
        tie_break=tie_break,
        engine_factory=factory(votes_by_model({"A": [1, 0]}), []),
    )
    assert result.results[0].models[0].verdict == verdict and result.results[0].score == score


def test_metric_tie_break_and_strictness_apply_without_overrides():
    log = []
    metric = AspectCritic("lenient", "The response is polite.", strictness=2, tie_break="pass")
    result = evaluate(
        [{"response": "x"}], [metric], [spec("A")], engine_factory=factory(votes_by_model({"A": [0, 1]}), log)
    )
    assert log[1] == ("generate", "A", 1, 2) and result.results[0].score == 1.0


def test_bad_records_are_reported_and_the_others_judged(tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text('{"id": "ok", "response": "1989"}\n{"id": "bad", "user_input": "q"}\n{oops\n')
    result = evaluate(data, [DATED], [spec("A")], engine_factory=factory(lambda m, p, j: judgment(1), []))
    assert [(r.record_id, r.score) for r in result.results][:2] == [("ok", 1.0), ("bad", None)]
    assert "field 'response'" in result.results[1].error and result.results[1].models == []
    assert "not valid JSON" in result.results[2].error
    assert result.summary.records == 3 and result.summary.record_errors == 2
    out, summary = result.write(tmp_path / "res.jsonl")
    assert [r.record_id for r in read_results(out)] == [r.record_id for r in result.results]
    assert json.loads(summary.read_text())["record_errors"] == 2


def test_strict_input_stops_at_first_bad_record():
    with pytest.raises(RecordError, match=r"record 'bad'.*field 'response'"):
        evaluate(
            [{"id": "bad", "user_input": "q"}, {"response": "a"}],
            [DATED],
            [spec("A")],
            strict_input=True,
            engine_factory=factory(lambda m, p, j: judgment(1), []),
        )


def test_prompt_over_context_length_is_a_per_model_error():
    long = {"id": "long", "response": "word " * 400}
    result = evaluate(
        [long, {"id": "short", "response": "1989"}],
        [DATED],
        [spec("A", context_length=600, max_tokens=100)],
        engine_factory=factory(lambda m, p, j: judgment(1), []),
    )
    long_row, short_row = result.results
    assert long_row.score is None and "exceeds context_length 600" in long_row.models[0].error
    assert short_row.score == 1.0


def test_summary_figures():
    table = {"A": [1], "B": [0]}
    records = [{"id": str(i), "response": "x"} for i in range(4)]
    result = evaluate(records, [DATED], [spec("A"), spec("B")], engine_factory=factory(votes_by_model(table), []))
    m = result.summary.metrics[0]
    assert (m.records, m.scored, m.mean_score, m.pass_rate) == (4, 4, 0.5, 0.0)
    a, b = result.summary.models
    assert (a.pass_rate, b.pass_rate, a.judgments, a.abstentions) == (1.0, 0.0, 4, 0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"metrics": []}, "no metric to judge"),
        ({"metrics": [DATED, DATED]}, "metric names must be unique"),
        ({"strictness": 3, "temperature": 0.0}, "strictness above 1 needs a temperature above 0"),
        ({"tie_break": "coin"}, "unknown tie-break policy 'coin'"),
        ({"models": [spec("A"), spec("A")]}, "a model is named twice"),
    ],
)
def test_config_errors(kwargs, message):
    args = {"metrics": [DATED], "models": [spec("A")], **kwargs}
    with pytest.raises(ConfigError, match=message):
        evaluate([{"response": "x"}], engine_factory=factory(lambda m, p, j: judgment(1), []), **args)


def test_to_pandas_has_a_row_per_model():
    result = evaluate(
        [{"response": "x"}], [DATED], [spec("A"), spec("B")], engine_factory=factory(lambda m, p, j: judgment(1), [])
    )
    frame = result.to_pandas()
    assert list(frame["model"]) == ["A", "B"] and list(frame["verdict"]) == [1, 1]


def test_no_judgeable_record_loads_no_model():
    log = []
    result = evaluate([{"id": "bad"}], [DATED], [spec("A")], engine_factory=factory(lambda m, p, j: judgment(1), log))
    assert log == []
    assert [(r.record_id, r.score) for r in result.results] == [("bad", None)]
    assert result.summary.models[0].judgments == 0 and result.summary.record_errors == 1
    empty = evaluate([], [DATED], [spec("A")], engine_factory=factory(lambda m, p, j: judgment(1), log))
    assert empty.results == [] and log == [] and empty.summary.metrics[0].mean_score is None


def test_a_model_loads_from_the_files_its_jury_checked_and_checks_them_once(tmp_path, monkeypatch, capsys):
    import localjury.run.generate
    from localjury.models.registry import ModelFiles, ModelSpec
    from tests.fakes import fake_registry, run_args, run_cli

    registry = fake_registry(tmp_path)
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"id": "r", "response": "in 1989"}) + "\n")
    checks, loads = [], []
    require = ModelSpec.require
    monkeypatch.setattr(ModelSpec, "require", lambda spec, files: checks.append(spec.name) or require(spec, files))
    engine = factory(lambda m, p, j: judgment(1), [])
    monkeypatch.setattr(localjury.run.generate, "load_engine", lambda spec, files: loads.append(files) or engine(spec))
    args = run_args(data, registry, tmp_path / "r.jsonl", "--engine", "transformers")
    code, _, err = run_cli(monkeypatch, capsys, *args)
    assert code == 0, err
    folder = tmp_path / "model"
    assert checks == ["fake"] and loads == [ModelFiles(folder, folder)]


def test_a_bare_gguf_files_markers_are_read_from_the_tokenizer_its_check_converted(tmp_path, monkeypatch, capsys):
    """On the first run of a bare .gguf path, the check converts its tokenizer; the markers kept
    from record text are read after that, so the first run's prompt is the second's."""
    import localjury.models.registry
    import localjury.run.generate
    from tests.fakes import run_cli

    monkeypatch.setenv("LOCALJURY_HOME", str(tmp_path / "home"))
    gguf = tmp_path / "judge.gguf"
    gguf.write_bytes(b"GGUF")
    registry = tmp_path / "models.yaml"
    registry.write_text(f"models:\n  g:\n    path: {gguf}\n    engine: llamacpp\n")

    def convert(gguf, folder):
        folder.mkdir(parents=True)
        (folder / "tokenizer_config.json").write_text(json.dumps({"additional_special_tokens": ["[JUDGE_TOKEN]"]}))

    monkeypatch.setattr(localjury.models.registry, "save_gguf_tokenizer", convert)
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"id": "r", "response": "In 1989 [JUDGE_TOKEN]."}) + "\n")
    prompts: list = []
    engine = factory(lambda m, p, j: prompts.append(p) or judgment(1), [])
    monkeypatch.setattr(localjury.run.generate, "load_engine", lambda spec, files: engine(spec))
    args = ["run", data, "-c", "dated=The response includes a year.", "--models", "g", "--registry", registry,
            "--quiet", "--no-cache", "--out", tmp_path / "r.jsonl"]  # fmt: skip
    code, _, err = run_cli(monkeypatch, capsys, *args)
    assert code == 0, err
    assert prompts and "1989" in prompts[0] and "[JUDGE_TOKEN]" not in prompts[0]
