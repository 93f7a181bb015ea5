"""The CI gate (``run --fail-under METRIC=RATE``): bars parsed and checked against the
summary's pass rates, a distinct exit code with the failing records listed, and every output
written whether the gate passes or not."""

import json
import sys

import pytest

import localjury.run.generate
from localjury.cli import main
from localjury.errors import ConfigError
from localjury.results.gate import GATE_EXIT, Gate, check, check_names
from localjury.results.record_result import RecordResult
from localjury.results.summary import MetricSummary, Summary
from tests.fakes import factory, fake_registry, judgment

#: r0 and r4 give no year.
RECORDS = [{"id": f"r{i}", "user_input": "When?", "response": f"In {1900 + i}." if i % 4 else "Soon."}
           for i in range(8)]  # fmt: skip
DATED = "The response must include a specific date or year."


@pytest.mark.parametrize(
    ("text", "metric", "rate"),
    [("faithfulness=0.9", "faithfulness", 0.9), ("dated = 80%", "dated", 0.8), ("a=b=1", "a=b", 1.0),
     ("x=0", "x", 0.0), ("x=100%", "x", 1.0)],
)  # fmt: skip
def test_a_bar_is_a_metric_and_a_fraction_or_percentage(text, metric, rate):
    gate = Gate.parse(text)
    assert (gate.metric, gate.rate) == (metric, pytest.approx(rate))


@pytest.mark.parametrize(
    ("text", "message"),
    [("faithfulness", "give METRIC=RATE"), ("=0.5", "give METRIC=RATE"), ("f=high", "'high' is not a number"),
     ("f=1.5", "from 0 to 1"), ("f=-0.1", "from 0 to 1"), ("f=nan", "from 0 to 1"), ("f=inf", "from 0 to 1"),
     ("f=101%", "from 0 to 1")],
)  # fmt: skip
def test_a_malformed_bar_is_a_config_error(text, message):
    with pytest.raises(ConfigError, match=message):
        Gate.parse(text)


def test_a_bar_on_a_metric_the_run_does_not_judge_is_refused():
    with pytest.raises(ConfigError, match=r"'faithfulnes', which this run does not judge \(its metrics: a, b\)"):
        check_names([Gate("faithfulnes", 0.5)], ["a", "b"])
    with pytest.raises(ConfigError, match="two bars"):
        check_names([Gate("a", 0.5), Gate("a", 0.6)], ["a"])


def summary(rate, scored):
    metric = MetricSummary(metric="m", kind="aspect", definition="d", strictness=1, tie_break="fail", records=4,
                           scored=scored, mean_score=rate, pass_rate=rate)  # fmt: skip
    return Summary(localjury_version="x", dataset=None, records=4, record_errors=0, seed=0, temperature=0.7,
                   max_tokens=8, metrics=[metric], models=[], started_at="now", seconds=1.0)  # fmt: skip


def result(rid, score, error=None):
    return RecordResult(record_id=rid, metric="m", score=score, error=error, models=[])


def test_the_failing_and_unscored_records_are_listed_by_metric():
    rows = [result("a", 1.0), result("b", 0.0), result("c", 0.5), result("d", None), result("e", None, "bad")]
    other = RecordResult(record_id="z", metric="other", score=0.0, error=None, models=[])
    (outcome,) = check([Gate("m", 0.5)], summary(1 / 3, 3), [*rows, other])
    # 0.5 is a split jury, not a pass (a strict majority): it fails like 0.0.
    assert (outcome.failed, outcome.unscored) == (["b", "c"], ["d", "e"])
    assert not outcome.met and outcome.rate == pytest.approx(1 / 3)
    assert check([Gate("m", 1 / 3)], summary(1 / 3, 3), rows)[0].met  # a bar equal to the rate is met


def test_a_metric_with_no_scored_record_never_meets_its_bar():
    (outcome,) = check([Gate("m", 0.0)], summary(None, 0), [result("d", None)])
    assert not outcome.met and outcome.unscored == ["d"]


# -- the command --------------------------------------------------------------------------------


@pytest.fixture
def setup(tmp_path, monkeypatch):
    registry = fake_registry(tmp_path)
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    # The fake judge passes a response with a year in it: 6 of the 8 records (r0 and r4 fail).
    monkeypatch.setattr(localjury.run.generate, "load_engine", factory(lambda m, p, j: judgment(int("In 19" in p)), []))
    return tmp_path, data, registry


def run(monkeypatch, capsys, tmp, data, registry, *more):
    args = ["run", data, "--criterion", f"dated={DATED}", "--models", "fake", "--registry", registry, "--quiet",
            "--out", tmp / "r.jsonl", "--cache", tmp / "c.sqlite", *more]  # fmt: skip
    monkeypatch.setattr(sys, "argv", ["localjury", *map(str, args)])
    with pytest.raises(SystemExit) as exit_info:
        main()
    captured = capsys.readouterr()
    return exit_info.value.code or 0, captured.out, captured.err


def test_a_run_under_its_bar_exits_with_the_gate_code_listing_the_failures(setup, monkeypatch, capsys):
    tmp, data, registry = setup
    code, _, err = run(monkeypatch, capsys, tmp, data, registry, "--fail-under", "dated=0.8")
    assert code == GATE_EXIT
    assert "dated: pass rate 75.0% of 8 is under the bar 80.0%; failed: r0, r4" in " ".join(err.split())
    # The gate reads what the run wrote: every output is there, whole.
    rows = [json.loads(line) for line in (tmp / "r.jsonl").read_text().splitlines()]
    assert len(rows) == 8 and (tmp / "r.summary.json").is_file() and (tmp / "r.manifest.json").is_file()


def test_a_run_that_meets_its_bar_exits_0_and_says_so(setup, monkeypatch, capsys):
    tmp, data, registry = setup
    code, out, _ = run(monkeypatch, capsys, tmp, data, registry, "--fail-under", "dated=75%")
    assert code == 0
    assert "dated: pass rate 75.0% of 8 meets the bar 75.0%" in " ".join(out.split())


def test_a_bar_on_an_unknown_metric_stops_before_any_model_loads(setup, monkeypatch, capsys):
    tmp, data, registry = setup
    loaded = []
    monkeypatch.setattr(localjury.run.generate, "load_engine", lambda spec, **_: loaded.append(spec))
    code, _, err = run(monkeypatch, capsys, tmp, data, registry, "--fail-under", "date=0.8")
    assert code == 2 and "'date', which this run does not judge (its metrics: dated)" in " ".join(err.split())
    assert loaded == [] and not (tmp / "r.jsonl").exists()
