"""The inspect_ai scorer in a real, offline ``inspect_ai.eval`` (examples/inspect_task.py's
task, mockllm as the model under test) judged by the real embedded SmolLM2; the log it writes
read back, then judged again as records through ``evaluate``: the same prompts, so the
judgment store answers every one."""

import importlib.util
import math

import pytest
from inspect_ai import eval as inspect_eval
from inspect_ai.log import read_eval_log

from localjury import AspectCritic, evaluate
from tests import ROOT

pytestmark = pytest.mark.slow  # the embedded SmolLM2, loaded for real

EXAMPLE = ROOT / "examples" / "inspect_task.py"


def example():
    spec = importlib.util.spec_from_file_location("inspect_task_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_an_inspect_eval_scored_by_the_jury_and_its_log_judged_as_records(smollm, tmp_path, monkeypatch):
    monkeypatch.setenv("INSPECT_LOG_DIR", str(tmp_path / "logs"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))  # inspect's traces and sample buffers
    ex = example()
    store = tmp_path / "store.sqlite"
    task = ex.berlin_wall(judges=smollm.name, strictness=3, cache=str(store))
    (done,) = inspect_eval(task, model=ex.canned_model(), display="none")
    assert done.status == "success", done.error
    assert done.location.startswith(str(tmp_path / "logs")) and (tmp_path / "data" / "inspect_ai").is_dir()

    back = read_eval_log(done.location)
    scores = {}
    for s in back.samples:
        score = s.scores["localjury"]
        value = score.value["dated"]
        (model,) = score.metadata["dated"]["models"]
        assert model["model"] == smollm.name and len(model["votes"]) == 3
        assert set(model["votes"]) <= {0, 1, None} and model["abstentions"] == model["votes"].count(None)
        if math.isnan(value):  # the model abstained: unscored, saying so
            assert score.reason == "grader_failed" and "NO VERDICT" in score.explanation
        else:
            assert value == model["score"] == model["verdict"] and score.explanation.startswith("dated: ")
        scores[s.id] = None if math.isnan(value) else value
    (metric,) = back.results.scores
    assert metric.name == "dated" and metric.scored_samples + metric.unscored_samples == 2
    # One batch when both samples reach scoring together (the unit tests pin the batching).
    assert sum(task.scorer[0].jury.batches) == 2

    # The log as records: one a sample, its conversation, the same prompts as the scorer's.
    run = evaluate(done.location, [AspectCritic("dated", ex.DATED)], [smollm.name], strictness=3, seed=0, cache=store)
    assert {r.record_id: r.score for r in run.results} == scores
    (summary,) = run.summary.models
    assert summary.judgments == summary.cached == 6
