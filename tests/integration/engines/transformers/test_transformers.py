"""The real embedded model through the real transformers + Outlines engine."""

import gc
import json
import weakref

import jsonschema
import pytest

from localjury.engines import load_engine
from localjury.engines.base import GenerateCall, Sampling, Usage
from localjury.metrics import AspectCritic
from localjury.records.record import Record
from tests.integration.reference import DECISION_CASES, assert_same_samples, shared_prefix_tokens

pytestmark = pytest.mark.slow

DATED = AspectCritic("dated", "The response must include a specific date or year.")
RECORDS = [
    Record(id="a", user_input="When did the Berlin Wall fall?", response="On 9 November 1989."),
    Record(id="b", user_input="Who wrote Hamlet?", response="William Shakespeare wrote it."),
    Record(
        id="c",
        user_input="When was the Euro introduced?",
        response="Banknotes arrived in 2002.",
        retrieved_contexts=["Euro cash was introduced on 1 January 2002."],
    ),
]


def test_every_sample_is_valid_under_the_schema(smollm_engine):
    prompts = [smollm_engine.format_prompt(DATED.messages(r)) for r in RECORDS]
    schema = DATED.json_schema()
    outputs = smollm_engine.generate(
        GenerateCall(prompts, n=3, sampling=Sampling(0.7, 1.0, 512, seed=1), schema=schema)
    )
    assert [len(o) for o in outputs] == [3, 3, 3]
    # Each prompt's tokens counted once (its 3 samples share them); the instruction and examples
    # the three start with prefilled once, for the first prompt, reused by the other two.
    shared = shared_prefix_tokens(smollm_engine.tokenizer, prompts, keep=1)
    assert smollm_engine.last_usage == Usage(sum(smollm_engine.count_tokens(prompts)), 2 * shared)
    assert shared > 100
    for samples in outputs:
        for c in samples:
            assert c.finished, c.text
            jsonschema.validate(json.loads(c.text), schema)
            assert DATED.parse(c.text).vote in (0, 1)


def test_kv_sharing_gives_the_same_tokens_as_plain_generate(smollm_engine):
    """Greedy decoding through the shared-prefix, shared-sample path matches transformers'
    own generate() on each prompt alone (no padding, no cache tricks)."""
    import torch

    prompts = [smollm_engine.format_prompt(DATED.messages(r)) for r in RECORDS]
    ours = smollm_engine.generate(GenerateCall(prompts, n=1, sampling=Sampling(0.0, 1.0, 40, seed=0), schema=None))
    tok, model = smollm_engine.tokenizer, smollm_engine.model
    for prompt, (completion,) in zip(prompts, ours, strict=True):
        enc = tok(prompt, return_tensors="pt", add_special_tokens=False)
        with torch.inference_mode():
            ref = model.generate(
                **enc,
                max_new_tokens=40,
                do_sample=False,
                eos_token_id=smollm_engine.eos_ids,
                pad_token_id=tok.pad_token_id,
            )
        ids = ref[0, enc["input_ids"].shape[1] :].tolist()
        ids = ids[: next((i for i, t in enumerate(ids) if t in smollm_engine.eos_ids), len(ids))]
        assert completion.text == tok.decode(ids, skip_special_tokens=True)


def test_same_seed_same_samples(smollm_engine):
    prompts = [smollm_engine.format_prompt(DATED.messages(r)) for r in RECORDS[:2]]

    def run():
        return smollm_engine.generate(
            GenerateCall(prompts, n=2, sampling=Sampling(1.0, 1.0, 128, seed=7), schema=DATED.json_schema())
        )

    first = run()
    smollm_engine.generate(
        GenerateCall(prompts[:1], n=1, sampling=Sampling(1.0, 1.0, 16, seed=99), schema=None)
    )  # disturb global RNG
    assert run() == first


def test_a_prompts_samples_do_not_depend_on_its_batch(smollm_engine):
    # Seeds are per (run seed, prompt, sample): chunking, resuming or caching a run cannot
    # change a sample by changing which prompts share its call.
    prompts = [smollm_engine.format_prompt(DATED.messages(r)) for r in RECORDS]
    sampling = Sampling(1.0, 1.0, 96, seed=11)
    together = smollm_engine.generate(GenerateCall(prompts, n=2, sampling=sampling, schema=DATED.json_schema()))
    alone = smollm_engine.generate(GenerateCall(prompts[-1:], n=2, sampling=sampling, schema=DATED.json_schema()))
    assert_same_samples(alone[0], together[-1])  # the same tokens; probabilities to 1e-4
    assert together[-1][0] != together[-1][1] or together[0][0] != together[0][1]  # samples do differ


@pytest.mark.fresh_engines
def test_close_frees_the_model(smollm):
    engine = load_engine(smollm)
    ref = weakref.ref(engine.model)
    engine.close()
    gc.collect()
    assert ref() is None


def test_gemma_base_model_gets_a_plain_prompt_with_bos(gemma):
    engine = load_engine(gemma)
    try:
        prompt = engine.format_prompt(DATED.messages(RECORDS[0]))
        assert not engine.use_chat
        assert prompt.startswith(engine.tokenizer.bos_token + "You are an impartial")
        (samples,) = engine.generate(
            GenerateCall([prompt], n=2, sampling=Sampling(0.7, 1.0, 512, seed=0), schema=DATED.json_schema())
        )
        for c in samples:
            jsonschema.validate(json.loads(c.text), DATED.json_schema())
    finally:
        engine.close()


@pytest.mark.parametrize("case", DECISION_CASES)
def test_p_pass_equals_a_direct_forward_pass(smollm_engine, case):
    """The engine's verdict probability (batched, KV-shared decode) is the one a plain forward
    pass gives at the decision position of the same greedy output: a 0/1 verdict, and a
    pairwise preference (the probability of "A")."""
    import torch

    from tests.integration.reference import greedy_with_p_pass

    engine = smollm_engine
    metric, record, decision = DECISION_CASES[case]
    schema = metric.json_schema()
    prompt = engine.format_prompt(metric.messages(record))
    (sample,) = engine.generate(GenerateCall([prompt], n=1, sampling=Sampling(0.0, 1.0, 128, 0), schema=schema))[0]

    cache = {"past": None, "seen": 0}

    def next_logits(ids):
        # One plain forward pass of the new tokens over the cache of the earlier ones (the
        # reference only ever appends), without the engine's batching, sharing or masking.
        with torch.inference_mode():
            out = engine.model(torch.tensor([ids[cache["seen"] :]]), past_key_values=cache["past"], use_cache=True)
        cache["past"], cache["seen"] = out.past_key_values, len(ids)
        return out.logits[0, -1].float().tolist()

    prompt_ids = engine.tokenizer(prompt, add_special_tokens=False)["input_ids"]
    text, probs = greedy_with_p_pass(next_logits, engine.tokenizer, prompt_ids, schema, 128, decision=decision)
    assert sample.text == text and len(probs) == 1
    assert sample.verdict_probs == pytest.approx(tuple(probs), abs=1e-4)
    assert 0.0 < probs[0] < 1.0
