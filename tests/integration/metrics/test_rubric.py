"""Rubrics on the real embedded SmolLM2 through the transformers engine: sampled scores on the
scale, expected scores from the decode equal to a direct forward pass, store keys of an edit."""

from __future__ import annotations

import pytest

from localjury import evaluate
from localjury.engines import load_engine
from localjury.engines.base import GenerateCall, Sampling
from localjury.engines.constrain.verdicts import score_decision
from localjury.metrics.rubric import Rubric, expected_score
from localjury.records.record import Record

pytestmark = pytest.mark.slow

RECORDS = [
    {"id": "wall", "user_input": "When did the Berlin Wall fall?", "response": "On 9 November 1989.",
     "reference": "On 9 November 1989."},
    {"id": "moon", "user_input": "When did humans land on the Moon?", "response": "They never did.",
     "reference": "On 20 July 1969."},
]  # fmt: skip

RUBRICS = """\
rubrics:
  - name: answer_quality
    version: 1
    criterion: How well the response answers the question, compared with the reference answer.
    levels:
      1: It is wrong.
      2: It is partly right.
      3: It is right.
"""


@pytest.fixture(scope="module")
def engine(smollm):
    """SmolLM2 on transformers, loaded once for the module (the runs below share it)."""
    return load_engine(smollm, "transformers")


def test_scores_are_on_the_scale_and_an_edit_changes_the_store_keys(engine, smollm, tmp_path):
    """A rubric file's rubric, k=2 on one record: every sampled score is one of the scale's
    values, every expected score within the scale; then the same file plans no generation, a new
    version or new level text plans all again (dry runs: no second generation)."""
    from localjury import dry_run
    from localjury.metrics.rubric_file import rubric_file_metrics

    path, cache = tmp_path / "rubrics.yaml", tmp_path / "store.sqlite"
    path.write_text(RUBRICS)
    records = RECORDS[1:]
    result = evaluate(records, [], [smollm], rubrics=path, engine="transformers", cache=cache, strictness=2, seed=3)
    assert [r.metric for r in result.results] == ["answer_quality"] and result.summary.metrics[0].kind == "rubric"
    for r in result.results:
        (model,) = r.models
        assert model.scores is not None and len(model.scores) == 2
        assert model.abstentions == sum(s is None for s in model.scores)
        for score, expected in zip(model.scores, model.expected or [], strict=True):
            assert score is None or score in (1, 2, 3)
            assert score is None or (expected is not None and 1.0 <= expected <= 3.0)
        if model.scale_score is not None:
            assert 1.0 <= model.scale_score <= 3.0 and 0.0 <= (model.score or 0.0) <= 1.0

    def cached(text: str) -> int:
        path.write_text(text)
        plan = dry_run(records, rubric_file_metrics(path), [smollm], engine="transformers", cache=cache,
                       strictness=2, seed=3, estimate=0)  # fmt: skip
        return plan.models[0].cached

    assert cached(RUBRICS) == 2  # the same entry: every sample from the store
    assert cached(RUBRICS.replace("version: 1", "version: 2")) == 0
    assert cached(RUBRICS.replace("It is wrong.", "It is false.")) == 0


def test_the_expected_score_equals_a_direct_forward_pass(engine):
    """The engine's distribution over the levels (batched, KV-shared decode) is the one a plain
    forward pass gives where the same greedy output writes its score."""
    import torch

    from tests.integration.reference import greedy_with_p_pass

    rubric = Rubric("quality", "How well the response answers.", ["Wrong.", "Partly right.", "Right."])
    schema = rubric.json_schema()
    prompt = engine.format_prompt(rubric.messages(Record(**RECORDS[0])))
    (sample,) = engine.generate(GenerateCall([prompt], n=1, sampling=Sampling(0.0, 1.0, 128, 0), schema=schema))[0]
    cache = {"past": None, "seen": 0}

    def next_logits(ids):
        with torch.inference_mode():
            out = engine.model(torch.tensor([ids[cache["seen"] :]]), past_key_values=cache["past"], use_cache=True)
        cache["past"], cache["seen"] = out.past_key_values, len(ids)
        return out.logits[0, -1].float().tolist()

    prompt_ids = engine.tokenizer(prompt, add_special_tokens=False)["input_ids"]
    decision = score_decision(3)
    assert decision is not None
    text, probs = greedy_with_p_pass(next_logits, engine.tokenizer, prompt_ids, schema, 128, decision=decision)
    assert sample.text == text and len(probs) == 3 and sum(probs) == pytest.approx(1.0)
    assert sample.verdict_probs == pytest.approx(tuple(probs), abs=1e-4)
    expected = expected_score(sample.verdict_probs, 3)
    assert expected is not None and 1.0 <= expected <= 3.0
    assert rubric.parse(sample.text).score in (1, 2, 3)
