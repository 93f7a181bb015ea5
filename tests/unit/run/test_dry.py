"""dry_run(): the run's own plan per model, counted against the judgment store, with an
estimate from a short sample that the run then reuses; nothing else written."""

import time

import pytest

from localjury import AspectCritic, Faithfulness, RayCluster, dry_run, evaluate
from localjury.errors import ConfigError
from localjury.store import JudgmentStore
from tests.fakes import ScriptedEngine, factory, judgment, spec

DATED = AspectCritic("dated", "The response must include a specific date or year.")
SHORT = AspectCritic("short", "The response is one sentence.")
RECORDS = [
    {
        "id": f"r{i}",
        "user_input": f"When did event {i} happen?",
        "response": f"In {1900 + i}.",
        "retrieved_contexts": ["c"],
    }
    for i in range(4)
] + [{"id": "bad", "user_input": "no response"}]


def respond(model, prompt, j):
    if "Break the answer" in prompt:
        return '{"statements": ["It happened then."]}'
    if "<statements>" in prompt:
        return '{"verdicts": [{"statement": "s1", "reason": "r", "verdict": 1}]}'
    return judgment(j % 2)


def tokenizers(log):
    """Prompt formatting and counting as the scripted engine does them, logged apart."""
    return lambda s: ScriptedEngine(s, respond, log)


def plan(metrics=(DATED, SHORT), *, engines=None, tokens=None, **kw):
    kw.setdefault("strictness", 3)
    return dry_run(
        RECORDS,
        list(metrics),
        kw.pop("models", [spec("A"), spec("B")]),
        engine_factory=factory(respond, engines if engines is not None else []),
        tokenizer_factory=tokenizers(tokens if tokens is not None else []),
        **kw,
    )


def judge(metrics=(DATED, SHORT), **kw):
    kw.setdefault("strictness", 3)
    return evaluate(RECORDS, list(metrics), kw.pop("models", [spec("A"), spec("B")]),
                    engine_factory=factory(respond, []), **kw)  # fmt: skip


def test_counts_are_the_runs_and_no_model_loads_by_default(tmp_path):
    engines: list = []
    store = tmp_path / "store.sqlite"
    result = plan(engines=engines, cache=store)  # no estimate asked for: the default
    assert engines == [] and not store.exists()  # no model loaded, no store made
    assert (result.records, result.record_errors, result.seconds, result.kept) == (5, 1, None, False)
    run = judge(cache=tmp_path / "other.sqlite")
    for planned, done in zip(result.models, run.summary.models, strict=True):
        assert planned.model == done.model
        assert (planned.records, planned.prompts, planned.judgments, planned.cached) == (4, 8, 24, 0)
        assert planned.judgments == done.judgments  # every sample the run drew
        assert planned.prompt_tokens == done.prompt_tokens > 0  # the same prompts, counted alike
        assert planned.estimate is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.sqlite"]  # the dry run wrote nothing


def test_what_the_store_holds_is_counted_as_cache_hits(tmp_path):
    store = tmp_path / "store.sqlite"
    judge(metrics=[DATED], cache=store)
    engines: list = []
    result = plan(engines=engines, estimate=4, cache=store)
    for m in result.models:  # DATED is in the store, SHORT is not
        assert (m.prompts, m.judgments, m.cached) == (4, 12, 12)
    result = plan(metrics=[DATED], engines=engines, estimate=4, cache=store)
    for m in result.models:
        assert (m.prompts, m.judgments, m.cached, m.prompt_tokens, m.estimate) == (0, 0, 12, 0, None)
    assert result.seconds == 0.0
    assert [e for e in engines if e[0] == "load"] == [("load", "A"), ("load", "B")]  # only the first plan's sample


def test_the_estimate_generates_a_few_prompts_that_the_run_then_reads_from_the_store(tmp_path):
    store = tmp_path / "store.sqlite"
    engines: list = []
    result = plan(engines=engines, estimate=3, cache=store)
    assert result.kept and result.estimate_prompts == 3
    # a warm-up call (one sample, not stored), the first prompt alone, then the others together
    assert [e for e in engines if e[0] == "generate"] == [
        ("generate", "A", 1, 1),
        ("generate", "A", 1, 3),
        ("generate", "A", 2, 3),
        ("generate", "B", 1, 1),
        ("generate", "B", 1, 3),
        ("generate", "B", 2, 3),
    ]
    for m in result.models:
        e = m.estimate
        assert e is not None and (e.prompts, e.judgments) == (3, 9)
        assert e.judgments_per_second > 0 and e.output_tokens_per_judgment == len(judgment(1)) // 4
        # the 5 prompts left, in one engine batch
        assert e.seconds == pytest.approx(
            e.load_seconds + e.warmup_seconds + e.batch_seconds + 5 * e.prompt_seconds, abs=2e-3
        )
    assert result.seconds == pytest.approx(sum(m.estimate.seconds for m in result.models), abs=1e-3)
    held = JudgmentStore(store)
    assert len(held) == 6
    held.close()
    after = judge(cache=store)
    assert [m.cached for m in after.summary.models] == [9, 9]  # the sample, not generated again
    alone = judge(use_cache=False)
    assert [r.model_dump() for r in after.results] == [r.model_dump() for r in alone.results]


def test_without_a_store_the_estimate_is_not_kept_and_the_run_generates_it_again():
    result = plan(estimate=2, use_cache=False)
    assert result.store is None and not result.kept
    (a, _) = result.models
    e = a.estimate
    assert e is not None and e.seconds == pytest.approx(
        e.load_seconds + e.warmup_seconds + e.batch_seconds + 8 * e.prompt_seconds, abs=2e-3
    )


def test_composite_verifications_wait_on_their_extraction(tmp_path):
    store = tmp_path / "store.sqlite"
    result = plan(metrics=[Faithfulness()], estimate=0, cache=store)
    a, b = result.models  # A extracts (one greedy sample per record); neither can plan verifications yet
    assert (a.prompts, a.judgments, a.awaiting_extraction) == (4, 4, 4)
    assert (b.prompts, b.judgments, b.awaiting_extraction) == (0, 0, 4)
    judge(metrics=[Faithfulness()], cache=store)
    result = plan(metrics=[Faithfulness()], estimate=0, cache=store)
    a, b = result.models
    assert (a.cached, a.awaiting_extraction, b.cached, b.awaiting_extraction) == (4 + 12, 0, 12, 0)


def test_adaptive_strictness_counts_the_first_draws_and_bounds_the_rest(tmp_path):
    result = plan(metrics=[DATED], estimate=0, adaptive=True, cache=tmp_path / "s.sqlite")
    for m in result.models:
        assert (m.prompts, m.judgments, m.adaptive_more) == (4, 4 * 2, 4 * 1)


def test_prompts_over_the_context_are_counted_apart():
    result = plan(metrics=[DATED], models=[spec("A", context_length=300)], estimate=0, use_cache=False)
    (a,) = result.models
    assert a.over_context == 4 and (a.prompts, a.judgments, a.prompt_tokens) == (0, 0, 0)


def test_a_dry_run_is_local_and_its_estimate_not_negative():
    with pytest.raises(ConfigError, match="a dry run plans a run on this machine; give it without a Ray `cluster`"):
        plan(cluster=RayCluster(replicas=2))
    with pytest.raises(ConfigError, match="estimate must be 0 or more prompts per model, got -1"):
        plan(estimate=-1)


class Clock:
    """``time.perf_counter`` for the run's timings, moved only by the engine: the figures are
    exactly the engine's costs, whatever else the machine is doing (sleeps were timed with
    the real clock, and a loaded machine added its own delays to them)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class SlowEngine(ScriptedEngine):
    """0.3 s once (as building a schema index costs), and per call 0.2 s whatever its size (a
    small batch decoding on a CPU) plus 0.02 s a sample; a warm-up call of one token costs no
    decoding. The seconds pass on ``clock``."""

    made = 0
    clock: Clock

    def generate(self, call):
        decoding = 0.2 + 0.02 * call.n * len(call.prompts) if call.sampling.max_tokens > 1 else 0.0
        self.clock.now += (0.3 if self.made == 0 else 0.0) + decoding
        self.made += 1
        return super().generate(call)


def test_the_estimate_adds_the_one_time_costs_once_and_extrapolates_per_engine_batch(monkeypatch):
    monkeypatch.setattr(SlowEngine, "clock", Clock(), raising=False)
    monkeypatch.setattr(time, "perf_counter", SlowEngine.clock)
    result = dry_run(
        RECORDS,
        [DATED, SHORT],
        [spec("A", batch_size=3)],
        strictness=3,
        use_cache=False,
        estimate=4,
        engine_factory=lambda s: SlowEngine(s, respond, []),
    )
    (e,) = [m.estimate for m in result.models]
    assert e is not None and e.judgments == 12
    assert e.load_seconds == 0.0  # the fake engine loads in no time
    assert e.warmup_seconds == pytest.approx(0.3)
    assert e.batch_seconds == pytest.approx(0.2)
    assert e.prompt_seconds == pytest.approx(0.06)  # 3 samples of 0.02 s
    # 8 prompts (nothing kept without a store) in batches of 3: 3 + 3 + 2
    batches = 3 * e.batch_seconds + 8 * e.prompt_seconds
    assert e.seconds == pytest.approx(e.load_seconds + e.warmup_seconds + batches, abs=2e-3)
