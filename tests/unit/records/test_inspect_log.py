"""inspect_ai eval logs as records (localjury.records.inspect_log, through the readers): logs built
with inspect's own types and written by its own ``write_eval_log``, in both formats."""

import json
import sys

import pytest
from inspect_ai.log import EvalConfig, EvalDataset, EvalError, EvalLog, EvalSample, EvalSpec, write_eval_log
from inspect_ai.model import (
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageTool,
    ChatMessageUser,
    ContentImage,
    ContentText,
    ModelOutput,
)
from inspect_ai.tool import ToolCall, ToolCallError

import localjury.run.generate
from localjury import AspectCritic, evaluate
from localjury.errors import ConfigError, MissingDependencyError, RecordError
from localjury.records.inspect_log import openai_messages
from localjury.records.readers import iter_records
from tests.fakes import factory, fake_registry, judgment, run_cli

ANSWER = "It is 18C and sunny in Paris. " * 8  # long enough for inspect to store it as an attachment

AGENT_RUN = [
    ChatMessageSystem(content="Use the tools."),
    ChatMessageUser(content="Weather in Paris?"),
    ChatMessageAssistant(
        content="", tool_calls=[ToolCall(id="t1", function="get_weather", arguments={"city": "Paris", "days": 1})]
    ),
    ChatMessageTool(content="18C, sunny", tool_call_id="t1", function="get_weather"),
    ChatMessageAssistant(content="", tool_calls=[ToolCall(id="t2", function="get_rain", arguments={"city": "Paris"})]),
    ChatMessageTool(
        content="", tool_call_id="t2", function="get_rain", error=ToolCallError(type="timeout", message="no answer")
    ),
    ChatMessageAssistant(content=[ContentText(text=ANSWER), ContentImage(image="data:image/png;base64,AAAA")]),
]


def sample(sid, epoch=1, messages=AGENT_RUN, target="18C", output=ANSWER, **kw):
    return EvalSample(id=sid, epoch=epoch, input="Weather in Paris?", target=target, messages=messages,
                      output=ModelOutput.from_content("mockllm/model", output), **kw)  # fmt: skip


def write_log(path, samples, epochs=1):
    ids = list(dict.fromkeys(s.id for s in samples))
    dataset = EvalDataset(name="d", samples=len(ids), sample_ids=ids)
    spec = EvalSpec(created="2026-01-01T00:00:00+00:00", task="weather", model="mockllm/model", dataset=dataset,
                    config=EvalConfig(epochs=epochs))  # fmt: skip
    write_eval_log(EvalLog(status="success", eval=spec, samples=samples), str(path))
    return path


@pytest.mark.parametrize("suffix", [".eval", ".json"])
def test_a_sample_is_a_conversation_record_with_its_tool_calls_and_target(tmp_path, suffix):
    path = write_log(tmp_path / f"log{suffix}", [sample("q1"), sample(7, target=["a", "b"])])
    first, second = iter_records(path)
    assert (first.id, second.id) == ("q1", "7")
    assert (first.reference, second.reference) == ("18C", "a\nb")
    # The last assistant turn is the judged response: not given again as `response`.
    assert first.response is None and first.user_input is None
    m = first.messages
    assert [x.role for x in m] == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    call = m[2].tool_calls[0]
    assert m[2].content is None and (call.id, call.function.name) == ("t1", "get_weather")
    assert json.loads(call.function.arguments) == {"city": "Paris", "days": 1}
    assert (m[3].tool_call_id, m[3].name, m[3].content) == ("t1", "get_weather", "18C, sunny")
    assert m[5].content == "error (timeout): no answer"  # a tool's error is part of its result
    assert m[6].content == ANSWER  # the attachment resolved; the image part left out


def test_epochs_give_each_sample_epoch_its_own_record(tmp_path):
    path = write_log(tmp_path / "log.eval", [sample("q1", 1), sample("q1", 2), sample("q2", 1), sample("q2", 2)], 2)
    assert [r.id for r in iter_records(path)] == ["q1-epoch1", "q1-epoch2", "q2-epoch1", "q2-epoch2"]


@pytest.mark.parametrize("suffix", [".eval", ".json"])
def test_a_sample_that_cannot_be_judged_is_its_own_error_and_the_others_are_read(tmp_path, suffix):
    failed = sample("boom", error=EvalError(message="RuntimeError: tool crashed", traceback="", traceback_ansi=""))
    empty = sample("empty", messages=[], output="")
    path = write_log(tmp_path / f"log{suffix}", [sample("ok"), failed, empty, sample("ok2")])
    entries = list(iter_records(path))
    assert [e.id for e in entries if not isinstance(e, RecordError)] == ["ok", "ok2"]
    errors = {e.record_id: e for e in entries if isinstance(e, RecordError)}
    assert f"log{suffix} sample 'boom'" in str(errors["boom"]) and "tool crashed" in str(errors["boom"])
    assert "no messages and no output" in str(errors["empty"])


def _counting_sample_reads(monkeypatch, most=50):
    """Count the samples read from a log (each a read of the zip); more than ``most`` raises."""
    import inspect_ai.log
    import inspect_ai.log._file

    reads = []
    original = inspect_ai.log._file.read_eval_log_sample

    def counted(*args, **kwargs):
        reads.append(kwargs.get("id", args[1] if len(args) > 1 else None))
        if len(reads) > most:
            raise RuntimeError(f"more than {most} sample reads for a log of one sample")
        return original(*args, **kwargs)

    monkeypatch.setattr(inspect_ai.log._file, "read_eval_log_sample", counted)
    monkeypatch.setattr(inspect_ai.log, "read_eval_log_sample", counted)
    return reads


def log_claiming(path, samples, sample_ids, epochs):
    """A log whose header lists ``sample_ids`` and ``epochs``, whatever ``samples`` it holds."""
    dataset = EvalDataset(name="d", samples=len(sample_ids), sample_ids=sample_ids)
    spec = EvalSpec(created="2026-01-01T00:00:00+00:00", task="weather", model="mockllm/model", dataset=dataset,
                    config=EvalConfig(epochs=epochs))  # fmt: skip
    write_eval_log(EvalLog(status="started", eval=spec, samples=samples), str(path))
    return path


@pytest.mark.parametrize(
    ("extra_ids", "epochs"), [(0, 10**9), (10_000, 1), (10_000, 10**9)], ids=["epochs", "sample_ids", "both"]
)
def test_a_header_that_claims_more_than_the_log_holds_costs_a_read_per_sample_held(
    tmp_path, monkeypatch, extra_ids, epochs
):
    """The samples in the log bound the work, not the header's sample_ids times its epochs
    (10**9 epochs hung; 10,000 ids that no sample has took 21 ms each)."""
    ids = ["q1", *(f"missing{i}" for i in range(extra_ids)), "q2"]
    path = log_claiming(tmp_path / "log.eval", [sample("q2"), sample("q1")], ids, epochs)
    reads = _counting_sample_reads(monkeypatch)
    suffix = "-epoch1" if epochs > 1 else ""
    assert [r.id for r in iter_records(path)] == [f"q1{suffix}", f"q2{suffix}"]  # in the header's order
    assert len(reads) == 2


def test_samples_the_header_does_not_list_are_read_after_the_others(tmp_path):
    """A header that says one epoch while the log holds two: each epoch its own record, never two
    records of one id; a sample the header does not list, last."""
    samples = [sample("q1", 1), sample("q1", 2), sample("stray", 1), sample("q2", 1)]
    path = log_claiming(tmp_path / "log.eval", samples, ["q1", "q2"], 1)
    assert [r.id for r in iter_records(path)] == ["q1-epoch1", "q1-epoch2", "q2-epoch1", "stray-epoch1"]


def test_a_sample_over_the_bound_is_its_error_unread(tmp_path, monkeypatch):
    import localjury.records.inspect_log as inspect_log

    path = write_log(tmp_path / "log.eval", [sample("q1"), sample("big", output="x" * 50_000), sample("q3")])
    monkeypatch.setattr(inspect_log, "MAX_SAMPLE_BYTES", 20_000)
    reads = _counting_sample_reads(monkeypatch)
    q1, big, q3 = iter_records(path)
    assert (q1.id, q3.id) == ("q1", "q3") and reads == ["q1", "q3"]
    assert isinstance(big, RecordError) and big.record_id == "big" and big.location == "log.eval sample 'big'"
    assert "over the 20,000-byte bound on a sample; it is skipped unread" in str(big)


def test_a_sample_without_messages_is_judged_on_its_output(tmp_path):
    (record,) = iter_records(write_log(tmp_path / "log.eval", [sample("q", messages=[], output="Paris.")]))
    assert (record.response, record.messages, record.reference) == ("Paris.", None, "18C")


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [("log.eval", b"not a zip", r"cannot read .*log\.eval as an inspect_ai eval log: "),
     ("log.json", b'{"records": []}', r"log\.json as an inspect_ai eval log \(it holds a JSON object; a \.json "
                                      r"dataset of records holds a list\)")],
)  # fmt: skip
def test_a_log_that_cannot_be_read_is_a_config_error_naming_the_file(tmp_path, name, content, message):
    (tmp_path / name).write_bytes(content)
    with pytest.raises(ConfigError, match=message):
        list(iter_records(tmp_path / name))
    with pytest.raises(ConfigError, match=r"dataset file not found: .*gone\.eval"):
        list(iter_records(tmp_path / "gone.eval"))


def test_a_json_list_is_still_a_dataset_of_records(tmp_path):
    (tmp_path / "d.json").write_text(' \n[{"id": "a", "response": "x"}]')
    assert [r.id for r in iter_records(tmp_path / "d.json")] == ["a"]


def test_openai_messages_keeps_a_tool_call_with_text_and_a_tool_result_without_id():
    out = openai_messages([ChatMessageAssistant(content="Let me look.", tool_calls=[ToolCall(
        id="c", function="f", arguments={})]), ChatMessageTool(content="done")])  # fmt: skip
    assert out[0]["content"] == "Let me look." and out[0]["tool_calls"][0]["function"]["arguments"] == "{}"
    assert out[1] == {"role": "tool", "content": "done"}


def test_a_log_is_judged_by_evaluate_and_by_localjury_run(tmp_path, monkeypatch, capsys):
    path = write_log(tmp_path / "run.eval", [sample("q1"), sample("q2", messages=[], output="")])
    prompts = []
    judge = factory(lambda m, p, j: prompts.append(p) or judgment(1), [])
    run = evaluate(path, [AspectCritic("grounded", "It states what the tool returned.")], [fake_spec()],
                   engine_factory=judge, use_cache=False)  # fmt: skip
    ok, bad = run.results
    assert (ok.record_id, ok.score) == ("q1", 1.0) and bad.record_id == "q2" and "no messages" in bad.error
    assert '<call name="get_weather" id="t1">' in prompts[0] and "error (timeout): no answer" in prompts[0]

    monkeypatch.setattr(localjury.run.generate, "load_engine", judge)
    code, _, err = run_cli(monkeypatch, capsys, "run", path, "-c", "grounded=It states what the tool returned.",
                           "--models", "fake", "--registry", fake_registry(tmp_path), "--quiet",
                           "--out", tmp_path / "r.jsonl", "--cache", tmp_path / "c.sqlite")  # fmt: skip
    rows = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert code == 0, err
    assert [(r["record_id"], r["score"]) for r in rows] == [("q1", 1.0), ("q2", None)]


def fake_spec():
    from tests.fakes import spec

    return spec("fake")


def test_without_inspect_ai_a_log_names_the_extra_to_install(tmp_path, monkeypatch):
    path = write_log(tmp_path / "log.eval", [sample("q1")])
    monkeypatch.setitem(sys.modules, "inspect_ai.log", None)  # import inspect_ai.log fails as if not installed
    with pytest.raises(MissingDependencyError, match=r"log\.eval is read as an inspect_ai eval log, .*\[inspect\]"):
        list(iter_records(path))
