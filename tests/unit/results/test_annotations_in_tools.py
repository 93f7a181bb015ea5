"""The annotation files, loaded by each tool's own client, offline: Phoenix's and Langfuse's
clients send them to a fake server (an httpx transport that keeps each request), MLflow's
``Feedback`` entity is built from each row. What the tool would store is what the run decided."""

import json

import httpx
import pytest

pytest.importorskip("openinference.instrumentation.openai", reason="the dev extra's trace packages are not installed")

from localjury import AspectCritic, evaluate
from localjury.results.annotations import write_annotations
from localjury.results.record_result import read_results
from tests.fakes import dated_responder, factory, spec
from tests.otel_exports import make_exports


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """A scripted jury's results on three traces of each real export."""
    folder = tmp_path_factory.mktemp("annotated")
    exports = make_exports(folder, traces=1)
    data = folder / "traces.jsonl"
    data.write_text("".join(path.read_text() for path in exports.values()))
    dated = AspectCritic("dated", "The response must include a specific date or year.")
    out = folder / "r.jsonl"
    evaluate(str(data), [dated], [spec("A"), spec("B")], strictness=3, out=out, use_cache=False,
             engine_factory=factory(dated_responder, []))  # fmt: skip
    got = list(read_results(out))
    assert len(got) == 4 and all(r.score is not None for r in got)
    return got


def rows(results, tool, tmp_path):
    write_annotations(results, tool, tmp_path / f"{tool}.jsonl")
    return tmp_path / f"{tool}.jsonl"


def recorder():
    seen = []

    def handler(request):
        seen.append((request.url.path, json.loads(request.content) if request.content else None))
        return httpx.Response(200, json={"data": [], "successes": [], "errors": []})

    return seen, httpx.Client(transport=httpx.MockTransport(handler), base_url="http://tool")


def test_phoenix_client_logs_the_span_annotations(results, tmp_path):
    pd = pytest.importorskip("pandas")
    client_module = pytest.importorskip("phoenix.client", reason="arize-phoenix-client is not installed")
    seen, http = recorder()
    frame = pd.read_json(rows(results, "phoenix", tmp_path), lines=True, dtype={"span_id": str})
    client_module.Client(base_url="http://tool", http_client=http).spans.log_span_annotations_dataframe(dataframe=frame)
    sent = [a for path, body in seen if path.endswith("span_annotations") for a in body["data"]]
    assert {a["span_id"] for a in sent} == {r.record_id.split("/")[1] for r in results}
    for a in sent:
        result = next(r for r in results if r.record_id.endswith(a["span_id"]))
        assert (a["name"], a["annotator_kind"], a["result"]["score"]) == ("dated", "LLM", result.score)
        assert a["result"]["label"] == ("pass" if result.score > 0.5 else "fail") and a["result"]["explanation"]


def test_langfuse_client_sends_the_scores(results, tmp_path):
    langfuse = pytest.importorskip("langfuse", reason="langfuse is not installed")
    seen, http = recorder()
    client = langfuse.Langfuse(public_key="pk", secret_key="sk", host="http://tool", httpx_client=http)
    for line in rows(results, "langfuse", tmp_path).read_text().splitlines():
        client.create_score(**json.loads(line))
    client.flush()
    sent = [score for path, body in seen if path.endswith("/api/public/scores") for score in body]
    assert sorted((s["traceId"], s["observationId"], s["value"]) for s in sent) == sorted(
        (*r.record_id.split("/"), r.score) for r in results
    )
    assert all(s["name"] == "dated" and s["dataType"] == "NUMERIC" and s["comment"] for s in sent)


def test_mlflow_feedback_is_built_from_each_row(results, tmp_path):
    entities = pytest.importorskip("mlflow.entities", reason="mlflow-tracing is not installed")
    for line, result in zip(rows(results, "mlflow", tmp_path).read_text().splitlines(), results, strict=True):
        row = json.loads(line)
        feedback = entities.Feedback(source=entities.AssessmentSource(**row.pop("source")), **row)
        trace_id, span_id = result.record_id.split("/")
        assert (feedback.trace_id, feedback.span_id, feedback.value) == (f"tr-{trace_id}", span_id, result.score)
        assert feedback.source.source_type == "LLM_JUDGE" and feedback.rationale
