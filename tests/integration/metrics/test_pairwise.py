"""Pairwise judging on the real tiny model: both orders asked, every sample parses."""

import pytest

from localjury import PairwiseCritic, evaluate

pytestmark = pytest.mark.slow

PAIRS = [
    {
        "id": "capital",
        "user_input": "What is the capital of France?",
        "response_a": "The capital of France is Paris.",
        "response_b": "The capital of France is Lyon.",
    },
    {
        "id": "sum",
        "user_input": "What is 2 + 3?",
        "response_a": "2 + 3 is 6.",
        "response_b": "2 + 3 is 5.",
    },
]


def test_both_orders_are_asked_and_every_sample_parses(smollm):
    spec = smollm.model_copy(update={"engine": "transformers", "max_tokens": 160})
    result = evaluate(PAIRS, [PairwiseCritic("correct", "The response is correct.")], [spec], seed=3, use_cache=False)
    assert result.summary.models[0].judgments == 4  # 2 pairs x 2 orders x k=1
    for row in result.results:
        assert row.error is None
        (model,) = row.models
        assert model.abstentions == 0 and model.invalid == []
        assert set(model.order_votes or {}) == {"AB", "BA"}
        assert all(len(v) == 1 and v[0] in (0, 1) for v in (model.order_votes or {}).values())
        assert all(isinstance(r, str) for r in model.reasons) and len(model.votes) == 2
        # Each sample's probability of preferring response_a (checked against a direct forward
        # pass in the engines' tests): one per sample, a probability, the mean its confidence.
        assert len(model.p_pass) == 2 and all(p is not None and 0 < p < 1 for p in model.p_pass)
        assert model.confidence == pytest.approx(sum(model.p_pass) / 2)
