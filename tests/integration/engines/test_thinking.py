"""A judge with a thinking budget, for real: the embedded SmolLM2 through transformers and
llama.cpp thinks in a ``<think>`` block closed at its budget, then answers under the schema;
the same seed gives the same samples. (vLLM's: the guidance backend's test in
``tests/integration/engines/vllm/test_vllm.py``; the store's key: the unit tests.)"""

import pytest

from localjury import AspectCritic, evaluate

pytestmark = pytest.mark.slow

DATED = AspectCritic("dated", "The response must include a specific date or year.", strictness=2)
RECORDS = [
    {"id": "wall", "user_input": "When did the Berlin Wall fall?", "response": "On 9 November 1989."},
    {"id": "tea", "user_input": "How do I make tea?", "response": "Boil water and steep the leaves."},
]
BUDGET = 12


@pytest.mark.parametrize("engine", ["transformers", "llamacpp"])
def test_each_sample_thinks_within_its_budget_then_answers_reproducibly(smollm, engine, tmp_path):
    if engine == "llamacpp":
        pytest.importorskip("llama_cpp", reason="the llamacpp extra (scripts/test installs it)")
        smollm.require_gguf()
    thinker = smollm.model_copy(update={"thinking": BUDGET})
    settings = dict(engine=engine, seed=5, max_tokens=160, use_cache=False)
    first = evaluate(RECORDS, [DATED], [thinker], **settings)
    again = evaluate(RECORDS, [DATED], [thinker], **settings)

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(smollm.local_dir())
    for row in first.results:
        (m,) = row.models
        assert m.abstentions == 0 and None not in m.votes  # every answer parsed under the schema
        assert m.thinking is not None and len(m.thinking) == 2 and all(m.thinking)
        for thought, reason in zip(m.thinking, m.reasons, strict=True):
            # Closed at the budget: its tokens (re-encoded, which may merge a few) within it.
            assert len(tokenizer(thought, add_special_tokens=False)["input_ids"]) <= BUDGET + 1
            assert "</think>" not in thought and reason and "</think>" not in reason
    (model,) = first.summary.models
    assert model.output_tokens > model.judgments * BUDGET  # the thinking counts in the output tokens
    # Reproducible with the seed (no store).
    assert [r.models for r in again.results] == [r.models for r in first.results]
