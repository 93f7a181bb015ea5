"""docs/architecture.md's example kind, ``examples/unsure_kind.py``: a user's kind of metric,
judged through ``localjury run --metric-module`` and through ``evaluate``, with the scripted
engine (an unsure sample abstains, the others vote)."""

import json
from pathlib import Path

import pytest

from localjury import evaluate
from localjury.errors import ConfigError
from localjury.metrics.spec import metric_module
from localjury.results.record_result import ModelJudgment
from tests.fakes import factory, fake_registry, spec

EXAMPLE = Path(__file__).parents[3] / "examples" / "unsure_kind.py"
ANSWERS = ["yes", "unsure", "yes"]


def respond(model, prompt, j):
    return json.dumps({"reason": "Checked.", "answer": ANSWERS[j]})


def test_the_example_kind_runs_through_localjury_run(tmp_path, monkeypatch, capsys):
    import localjury.run.generate
    from tests.fakes import run_cli

    registry = fake_registry(tmp_path)
    log: list = []
    monkeypatch.setattr(localjury.run.generate, "load_engine", factory(respond, log))
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"id": "r1", "response": "It fell in 1989."}) + "\n")
    out = tmp_path / "o" / "r.jsonl"
    code, _, err = run_cli(monkeypatch, capsys, "run", data, "--metric-module", EXAMPLE, "--metric", "unsure_dated",
                           "--models", "fake", "--registry", registry, "-k", "3", "--no-cache", "--quiet",
                           "--out", out)  # fmt: skip
    assert code == 0, err
    (result,) = [json.loads(line) for line in out.read_text().splitlines()]
    (judgment,) = result["models"]
    assert (result["metric"], result["score"], result["details"]) == ("dated", 1.0, {"unsure": 1})
    assert (judgment["votes"], judgment["abstentions"], judgment["verdict"]) == ([1, None, 1], 1, 1)
    assert judgment["invalid"][0]["problem"] == "unsure"
    manifest = json.loads(out.with_name("r.manifest.json").read_text())
    assert [m["kind"] for m in manifest["metrics"]] == ["unsure"]


def test_the_example_kind_runs_through_evaluate():
    (critic,) = [make() for make in metric_module(EXAMPLE).values()]
    run = evaluate(
        [{"id": "r1", "response": "It fell in 1989."}],
        [type(critic)("dated", "The response gives a specific date or year.", strictness=3)],
        [spec("M1")],
        engine_factory=factory(respond, []),
    )
    (judgment,) = run.results[0].models
    assert (judgment.votes, judgment.abstentions, judgment.verdict) == ([1, None, 1], 1, 1)
    assert run.results[0].details == {"unsure": 1} and "details" not in judgment.model_dump_json()


def test_a_kind_s_own_details_are_written_only_where_it_sets_them():
    judgment = ModelJudgment(model="M1", votes=[1], reasons=["r"], abstentions=0, verdict=1, score=1.0)
    assert "details" not in judgment.model_dump_json()
    with_details = judgment.model_copy(update={"details": {"unsure": 0}})
    assert json.loads(with_details.model_dump_json())["details"] == {"unsure": 0}
    assert ModelJudgment.model_validate_json(with_details.model_dump_json()).details == {"unsure": 0}


def test_a_metric_module_without_a_metrics_table_is_refused(tmp_path):
    path = tmp_path / "mine.py"
    path.write_text("X = 1\n")
    with pytest.raises(ConfigError, match=r"mine.py has no METRICS table; add METRICS = "):
        metric_module(path)
    with pytest.raises(ConfigError, match=r"nothing.py: not a Python file"):
        metric_module(tmp_path / "nothing.py")
