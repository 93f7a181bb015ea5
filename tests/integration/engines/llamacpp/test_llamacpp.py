"""The real embedded models' GGUF files through the real llama.cpp engine."""

import json

import jsonschema
import numpy as np
import pytest

pytest.importorskip("llama_cpp", reason="the llamacpp extra (scripts/test installs it)")

from localjury import AspectCritic, evaluate
from localjury.engines import load_engine, resolve_engine
from localjury.engines.base import GenerateCall, Sampling, Usage
from localjury.engines.native.llamacpp_kernels import kernel_choice, plain_llama
from localjury.models.registry import ModelSpec
from localjury.records.record import Record
from tests.integration.reference import DECISION_CASES, shared_prefix_tokens

pytestmark = pytest.mark.slow

DATED = AspectCritic("dated", "The response must include a specific date or year.")
RECORDS = [
    Record(id="a", user_input="When did the Berlin Wall fall?", response="On 9 November 1989."),
    Record(id="b", user_input="Who wrote Hamlet?", response="William Shakespeare wrote it."),
    Record(id="c", user_input="When was the Euro introduced?", response="Banknotes arrived in 2002."),
    Record(id="d", user_input="Is it far?", response="Quite far, yes."),
]


@pytest.fixture(scope="module")
def smollm_gguf(smollm):
    spec = smollm.model_copy(update={"engine": "llamacpp"})
    spec.require_gguf()  # scripts/test pulls it (the pull keeps the GGUF)
    return spec


@pytest.fixture(scope="module")
def engine(smollm_gguf):
    loaded = load_engine(smollm_gguf)
    yield loaded
    loaded.close()


def prompts_for(engine, records):
    return [engine.format_prompt(DATED.messages(r)) for r in records]


def test_k_schema_valid_samples_per_prompt(engine):
    schema = DATED.json_schema()
    prompts = prompts_for(engine, RECORDS)
    outputs = engine.generate(GenerateCall(prompts, n=3, sampling=Sampling(0.7, 1.0, 256, 1), schema=schema))
    assert [len(o) for o in outputs] == [3, 3, 3, 3]
    # Each prompt's tokens counted once; the prefix the four share prefilled once and copied to
    # the other three prompts' sequences (each prompt keeps two tokens of its own).
    shared = shared_prefix_tokens(engine.tokenizer, prompts, keep=2)
    assert engine.last_usage == Usage(sum(engine.count_tokens(prompts)), 3 * shared)
    assert shared > 100
    for samples in outputs:
        for c in samples:
            assert c.finished and c.n_tokens > 0, c.text
            jsonschema.validate(json.loads(c.text), schema)
            assert DATED.parse(c.text).vote in (0, 1)


def test_a_sample_does_not_depend_on_what_shares_its_batch(engine):
    sampling = Sampling(0.9, 1.0, 256, 7)
    schema = DATED.json_schema()
    together = engine.generate(GenerateCall(prompts_for(engine, RECORDS), n=3, sampling=sampling, schema=schema))
    alone = engine.generate(GenerateCall(prompts_for(engine, RECORDS[2:3]), n=3, sampling=sampling, schema=schema))
    reordered = engine.generate(GenerateCall(prompts_for(engine, RECORDS[::-1]), n=3, sampling=sampling, schema=schema))
    assert [c.text for c in alone[0]] == [c.text for c in together[2]]
    assert [[c.text for c in o] for o in reordered[::-1]] == [[c.text for c in o] for o in together]
    # Samples m..k-1 drawn later (adaptive strictness) are the ones a single call draws.
    rest = engine.generate(
        GenerateCall(
            prompts_for(engine, RECORDS[:1]), n=2, sampling=Sampling(0.9, 1.0, 256, 7, first_sample=1), schema=schema
        )
    )
    assert [c.text for c in rest[0]] == [c.text for c in together[0][1:]]


def test_the_token_budget_cuts_a_sample_and_says_so(engine):
    (samples,) = engine.generate(
        GenerateCall(prompts_for(engine, RECORDS[:1]), n=2, sampling=Sampling(0.7, 1.0, 5, 0), schema=None)
    )
    assert all(not c.finished and c.n_tokens == 5 for c in samples)


def test_greedy_shared_prefix_path_matches_llama_cpps_own_completion(engine, smollm_gguf):
    """Greedy tokens through the shared prefix and shared cells equal llama-cpp-python's own
    completion of each prompt alone."""
    import llama_cpp

    ours = engine.generate(
        GenerateCall(prompts_for(engine, RECORDS), n=1, sampling=Sampling(0.0, 1.0, 24, 0), schema=None)
    )
    with plain_llama(kernel_choice(smollm_gguf.gguf_file())):  # the kernels proven here, as the engine
        plain = llama_cpp.Llama(str(smollm_gguf.gguf_file()), n_ctx=2048, verbose=False, seed=0)
    try:
        for prompt, (completion,) in zip(prompts_for(engine, RECORDS), ours, strict=True):
            tokens = engine.tokenizer(prompt, add_special_tokens=False).input_ids
            ref = []
            plain.reset()
            for token in plain.generate(tokens, temp=0.0, top_k=1, reset=True):
                if plain._model.token_eos() == token or len(ref) >= 24 or token in engine.eog:
                    break
                ref.append(token)
            got = engine.tokenizer(completion.text, add_special_tokens=False).input_ids
            assert engine.tokenizer.decode(ref) == completion.text, (got, ref)
    finally:
        plain.close()


@pytest.mark.fresh_engines
def test_load_close_reload_in_one_process(smollm_gguf):
    schema = DATED.json_schema()
    first = load_engine(smollm_gguf)
    a = first.generate(
        GenerateCall(prompts_for(first, RECORDS[:2]), n=2, sampling=Sampling(0.7, 1.0, 256, 3), schema=schema)
    )
    first.close()
    second = load_engine(smollm_gguf)
    b = second.generate(
        GenerateCall(prompts_for(second, RECORDS[:2]), n=2, sampling=Sampling(0.7, 1.0, 256, 3), schema=schema)
    )
    second.close()
    assert [[c.text for c in o] for o in a] == [[c.text for c in o] for o in b]


def test_a_jury_mixing_llamacpp_and_transformers(smollm_gguf, smollm, tmp_path):
    # SmolLM2's GGUF on llama.cpp beside its safetensors on transformers, under another name (a
    # jury's names are unique): the two engines in one run, at the smallest model's cost.
    safetensors = smollm.model_copy(update={"name": "smollm2-safetensors", "engine": "transformers"})
    jury = [smollm_gguf, safetensors]
    result = evaluate(
        RECORDS, [DATED], jury, strictness=3, seed=0, cache=tmp_path / "store.sqlite", out=tmp_path / "r.jsonl"
    )
    engines = {m.model: m.engine for m in result.summary.models}
    assert engines == {"smollm2-135m-instruct": "llamacpp", "smollm2-safetensors": "transformers"}
    rows = list(result.iter_results())
    assert len(rows) == 4 and all(len(r.models) == 2 for r in rows)
    assert all(len(m.votes) == 3 for r in rows for m in r.models)
    again = evaluate(RECORDS, [DATED], jury, strictness=3, seed=0, cache=tmp_path / "store.sqlite")
    assert [r.model_dump() for r in again.results] == [r.model_dump() for r in rows]  # from the store
    assert all(m.cached == m.judgments for m in again.summary.models)


def test_auto_picks_llamacpp_for_a_gguf_path(smollm_gguf, tmp_path):
    bare = ModelSpec(name="bare", path=str(smollm_gguf.gguf_file()))
    assert resolve_engine(bare) == "llamacpp"
    with pytest.raises(Exception, match="not a GGUF file"):
        (tmp_path / "x.gguf").write_bytes(b"nope")
        ModelSpec(name="x", path=str(tmp_path / "x.gguf")).require_gguf()


@pytest.mark.parametrize("case", DECISION_CASES)
def test_p_pass_equals_a_direct_forward_pass(engine, smollm_gguf, case):
    """The engine's verdict probability equals the one llama-cpp-python's own ``Llama`` gives,
    token by token, at the decision position of the same greedy output (a 0/1 verdict, and a
    pairwise preference; same GGUF, so within the rounding of llama.cpp's kernels for a
    one-token decode, which can break a near tie the other way: the reference follows the
    engine's text)."""
    import llama_cpp

    from tests.integration.reference import greedy_with_p_pass

    metric, record, decision = DECISION_CASES[case]
    schema = metric.json_schema()
    prompt = engine.format_prompt(metric.messages(record))
    (sample,) = engine.generate(GenerateCall([prompt], n=1, sampling=Sampling(0.0, 1.0, 128, 0), schema=schema))[0]
    with plain_llama(kernel_choice(smollm_gguf.require_gguf())):
        llm = llama_cpp.Llama(str(smollm_gguf.require_gguf()), n_ctx=2048, n_threads=1, logits_all=True, verbose=False)

    def next_logits(ids):
        llm.eval(ids[llm.n_tokens :])
        return llm.scores[llm.n_tokens - 1].tolist()

    prompt_ids = engine.tokenizer(prompt, add_special_tokens=False)["input_ids"]
    text, probs = greedy_with_p_pass(
        next_logits, engine.tokenizer, prompt_ids, schema, 128, follow=sample.text, decision=decision
    )
    llm.close()
    assert sample.text == text and len(probs) == 1
    assert sample.verdict_probs == pytest.approx(tuple(probs), abs=1e-4)
    assert 0.0 < probs[0] < 1.0


@pytest.mark.fresh_engines
def test_a_cpu_whose_repacked_kernels_crash_runs_without_them(smollm_gguf, monkeypatch, tmp_path, capfd):
    """As on an AMX Xeon, where llama.cpp's AMX repack faults in the first matmul: the probe's
    subprocess dies, the engine loads without the extra buffers, says so, and judges."""
    from localjury.engines.native import llamacpp_kernels as kernels

    monkeypatch.setenv("LOCALJURY_CPU_FLAGS", "avx2 avx512f avx512_bf16 amx_tile amx_bf16 amx_int8")
    monkeypatch.setenv("LOCALJURY_LLAMACPP_PROBE_FAULT", "extra")
    monkeypatch.setattr(kernels, "cache_path", lambda gguf, cpu: tmp_path / "verdict.json")
    # Said once per process: on a real AMX machine an earlier load here may have said it already.
    monkeypatch.setattr(kernels, "_announced", set())
    engine = load_engine(smollm_gguf)
    try:
        assert not engine.kernels.extra_bufts and "killed by SIGSEGV" in engine.kernels.reason
        assert "without llama.cpp's repacked kernels" in capfd.readouterr().err
        schema = DATED.json_schema()
        (samples,) = engine.generate(
            GenerateCall(prompts_for(engine, RECORDS[:1]), n=2, sampling=Sampling(0.7, 1.0, 256, 0), schema=schema)
        )
        for c in samples:
            jsonschema.validate(json.loads(c.text), schema)
    finally:
        engine.close()
    assert json.loads((tmp_path / "verdict.json").read_text())["choice"]["extra_bufts"] is False


def whole_model_states(engine, batch, blocks):
    """The last tokens' states after ``blocks`` read on the whole model (a reader given no GGUF to cut)."""
    from localjury.engines.llamacpp.layers import LayerReader
    from localjury.engines.llamacpp.llamacpp import DECODE_BATCH, _pieces

    encoded = engine.tokenizer(batch, add_special_tokens=False)["input_ids"]
    reader = LayerReader(DECODE_BATCH, 2)
    try:
        return reader.read(engine.model, encoded, blocks, _pieces, [[(len(ids) - 1, len(ids))] for ids in encoded])[0]
    finally:
        reader.close()


def test_a_read_stopping_below_the_last_block_runs_on_a_copy_cut_there(engine, monkeypatch, caplog):
    """States read after a shallow block come from a copy of the GGUF holding the blocks up to it
    (written once, then reused), equal to the whole model's; where no copy can be had, the whole
    model is read, with a warning."""
    from localjury.engines.llamacpp import layers, trimmed

    batch = prompts_for(engine, RECORDS)
    want = whole_model_states(engine, batch, [2, 5])
    np.testing.assert_allclose(engine.hidden_states(batch, [2, 5]), want, rtol=1e-5, atol=1e-5)
    copy = trimmed.trimmed_gguf(engine.gguf, 5)
    top, model = engine._reader._trimmed
    assert top == 5 and layers.llama_cpp.llama_model_n_layer(model.model) == 6
    assert copy.stat().st_size < engine.gguf.stat().st_size
    written = copy.stat().st_mtime_ns
    np.testing.assert_allclose(engine.hidden_states(batch[1:2], [5]), want[1:2, 1:], rtol=1e-5, atol=1e-5)
    assert copy.stat().st_mtime_ns == written  # reused, not written again

    def refuse(source, top, folder=None):
        raise OSError("No space left on device")

    monkeypatch.setattr(trimmed, "trimmed_gguf", refuse)
    with caplog.at_level("WARNING", logger=layers.__name__):
        np.testing.assert_allclose(engine.hidden_states(batch, [3]), whole_model_states(engine, batch, [3]))
    assert "reading block 3 of" in caplog.text and "No space left on device" in caplog.text
