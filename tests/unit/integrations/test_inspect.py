"""The inspect_ai scorer (localjury.integrations.inspect): concurrent samples judged in one
batch on engines loaded once, the jury's evidence in each Score, an unparsable judge output an
abstention (NaN, counted unscored), never a 0. A real inspect ``eval`` with the scorer:
tests/integration/integrations/test_inspect.py."""

import math

import anyio
import pytest
from inspect_ai.model import ChatMessageAssistant, ChatMessageUser, ModelName
from inspect_ai.scorer import Target
from inspect_ai.solver import TaskState

from localjury.engines import pool
from localjury.errors import ConfigError
from localjury.integrations.inspect import build_metrics, localjury_scorer
from tests.fakes import ScriptedEngine, judgment, spec

DATED = "The response must include a specific date or year."


def state(sid, answer="It fell in 1989.", target="a year"):
    messages = [ChatMessageUser(content="When did the Berlin Wall fall?"), ChatMessageAssistant(content=answer)]
    return TaskState(model=ModelName("mockllm/model"), sample_id=sid, epoch=1, input="When did the Berlin Wall fall?",
                     messages=messages if answer else [], target=Target(target))  # fmt: skip


def pooled(respond, log):
    """An engine factory that keeps its engine in the open pool, as load_engine does."""
    return lambda s: pool.kept(s, "transformers", lambda: ScriptedEngine(s, respond, log))


def make_scorer(respond, log, **kw):
    return localjury_scorer({"dated": DATED}, [spec("A")], strictness=3, use_cache=False,
                            engine_factory=pooled(respond, log), **kw)  # fmt: skip


def test_concurrent_samples_are_judged_in_one_batch_on_engines_loaded_once():
    log = []
    score = make_scorer(lambda m, p, j: judgment(int("2031" in p)), log)
    jury = score.jury

    async def main():
        results = {}

        async def one(sid, answer):
            results[sid] = await score(state(sid, answer), Target("a year"))

        jury._run_lock.acquire()  # a batch in progress: the samples that come meanwhile wait for the next
        async with anyio.create_task_group() as tg:
            for sid, answer in (("a", "In 2031."), ("b", "Long ago."), ("c", "2031, in November.")):
                tg.start_soon(one, sid, answer)
            while len(jury._pending) < 3:
                await anyio.sleep(0.01)
            jury._run_lock.release()
        return results

    results = anyio.run(main)
    assert jury.batches == [3]
    assert [e for e in log if e[0] == "generate"] == [("generate", "A", 3, 3)]  # one engine call for all three
    assert {sid: s.value for sid, s in results.items()} == {"a": {"dated": 1.0}, "b": {"dated": 0.0},
                                                           "c": {"dated": 1.0}}  # fmt: skip
    # A later sample: its own batch, the engine still loaded; close() closes it.
    anyio.run(score, state("d"), Target("a year"))
    assert jury.batches == [3, 1] and [e[0] for e in log].count("load") == 1 and ("close", "A") not in log
    jury.close()
    assert log[-1] == ("close", "A")


def test_a_score_carries_the_votes_and_reasons_and_an_unparsable_output_abstains():
    log = []
    # Sample 0 of each judgment does not parse; samples 1 and 2 vote 1.
    score = make_scorer(lambda m, p, j: "not json" if j == 0 else judgment(1, f"reason {j}"), log)
    result = anyio.run(score, state("a"), Target("a year"))
    assert result.value == {"dated": 1.0} and result.reason is None
    (model,) = result.metadata["dated"]["models"]
    assert model["votes"] == [None, 1, 1] and model["abstentions"] == 1 and model["verdict"] == 1
    assert result.metadata["dated"]["passed"] is True
    assert "dated: PASS (score 1)" in result.explanation and "1 of 3 samples abstained" in result.explanation
    assert "reason 2" in result.explanation

    every = make_scorer(lambda m, p, j: "not json", [])
    unparsed = anyio.run(every, state("a"), Target("a year"))
    assert math.isnan(unparsed.value["dated"]) and unparsed.reason == "grader_failed"
    assert unparsed.metadata["dated"]["models"][0]["votes"] == [None] * 3
    assert "NO VERDICT" in unparsed.explanation


def test_a_sample_with_nothing_to_judge_is_unscored_saying_why():
    score = make_scorer(lambda m, p, j: judgment(1), [])
    result = anyio.run(score, state("empty", answer=""), Target(""))
    assert math.isnan(result.value["dated"]) and result.reason == "scoring_failed"
    assert "'empty-epoch1'" in result.explanation and "no messages and no output" in result.explanation


def test_criteria_are_statements_by_name_or_predefined_aspects():
    assert [m.name for m in build_metrics({"dated": DATED, "short": "It is short."}, "last_turn")] == ["dated", "short"]
    assert [m.name for m in build_metrics("conciseness", "last_turn")] == ["conciseness"]
    assert [m.name for m in build_metrics(DATED, "conversation")] == ["criterion"]
    assert [m.name for m in build_metrics(["coherence", "harmfulness"], "last_turn")] == ["coherence", "harmfulness"]
    with pytest.raises(ConfigError, match=r"\['dated'\] are not predefined aspects"):
        build_metrics(["dated"], "last_turn")
    with pytest.raises(ConfigError, match="at least one criterion"):
        build_metrics({}, "last_turn")
