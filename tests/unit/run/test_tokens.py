"""Token accounting: per model the prompt tokens generated, how many the engine reused from a KV
cache, the output tokens and the generation time; samples from the store cost none."""

import json

from localjury import AspectCritic, evaluate
from localjury.engines.base import BatchEngine, Completion, GenerateCall, Sampling, Usage
from localjury.results.summary import Summary
from localjury.run.context import ModelCounts
from tests.fakes import ScriptedEngine, factory, judgment, spec

DATED = AspectCritic("dated", "The response must include a specific date or year.")
RECORDS = [{"id": f"r{i}", "user_input": f"When did event {i}?", "response": f"In {1900 + i}."} for i in range(5)]


class ReportingEngine(ScriptedEngine):
    """Reports 100 prompt tokens a prompt, of which 60 reused for every prompt of a call but the first."""

    def generate(self, call):
        out = super().generate(call)
        self.last_usage = Usage(prompt_tokens=100 * len(call.prompts), reused_tokens=60 * (len(call.prompts) - 1))
        return out


def test_an_engine_without_a_usage_report_is_counted_by_its_tokenizer():
    calls = []
    result = evaluate(
        RECORDS, [DATED], [spec("A")], strictness=3, engine_factory=factory(lambda m, p, j: judgment(1), [], calls)
    )
    (a,) = result.summary.models
    prompts = [p for call in calls for p in call["prompts"]]
    assert len(prompts) == 5  # each prompt once: its 3 samples share it
    assert a.prompt_tokens == sum(len(p.split()) for p in prompts) > 0  # ScriptedEngine.count_tokens
    assert a.prompt_tokens_reused == 0
    assert a.output_tokens == 15 * (len(judgment(1)) // 4) and a.judgments_per_second is not None


def test_the_engines_report_is_summed_over_calls_and_samples_from_the_store_cost_nothing(tmp_path):
    def run(**kw):
        return evaluate(
            RECORDS,
            [DATED, AspectCritic.predefined("conciseness")],
            [spec("A")],
            strictness=3,
            cache=tmp_path / "s.sqlite",
            engine_factory=lambda s: ReportingEngine(s, lambda m, p, j: judgment(1), []),
            **kw,
        )

    (a,) = run(chunk_size=2).summary.models  # chunks of 2, 2 and 1 records: calls of 4, 4 and 2 prompts
    assert a.prompt_tokens == 100 * 10 and a.prompt_tokens_reused == 60 * (3 + 3 + 1)
    (again,) = run().summary.models
    assert again.cached == 30 and (again.prompt_tokens, again.prompt_tokens_reused, again.output_tokens) == (0, 0, 0)


class _Tokens:
    def __call__(self, texts, add_special_tokens=False):
        return {"input_ids": [list(range(len(t.split()))) for t in texts]}


class SilentEngine(BatchEngine):
    """A backend that reports nothing."""

    name = "silent"

    def __init__(self):
        self.spec = spec("S")
        self.tokenizer = _Tokens()

    def _generate(self, call):
        return [[Completion("{}", 1, True)] * call.n for _ in call.prompts]


def test_batch_engine_counts_every_prompt_token_as_computed_when_its_backend_reports_nothing():
    engine = SilentEngine()
    sampling = Sampling(temperature=1.0, top_p=1.0, max_tokens=8, seed=0)
    engine.generate(GenerateCall(["a b c", "d e"], n=2, sampling=sampling, schema=None))
    assert engine.last_usage == Usage(prompt_tokens=5, reused_tokens=0)
    engine.generate(GenerateCall([], n=2, sampling=sampling, schema=None))
    assert engine.last_usage == Usage(prompt_tokens=0)


def test_replicas_counters_add_up():
    total, shard = ModelCounts(spec("A"), prompt_tokens=10, reused_tokens=4), ModelCounts(spec("A"))
    shard.drew([[Completion("{}", 5, True)]], Usage(prompt_tokens=7, reused_tokens=3), seconds=1.0)
    total.absorb(shard)
    assert (total.prompt_tokens, total.reused_tokens, total.output_tokens) == (17, 7, 5)


def test_a_summary_written_before_token_accounting_still_reads():
    model = {
        "model": "A", "path": "/m", "engine": "transformers", "judgments": 3, "abstentions": 0,
        "abstained_verdicts": 0, "pass_rate": 1.0, "load_seconds": 1.0, "generate_seconds": 2.0,
        "judgments_per_second": 1.5, "output_tokens": 30, "output_tokens_per_second": 15.0,
    }  # fmt: skip
    old = {
        "localjury_version": "0.1.0", "dataset": None, "records": 1, "record_errors": 0, "seed": 0,
        "temperature": None, "max_tokens": None, "metrics": [], "models": [model], "started_at": "t", "seconds": 3.0,
    }  # fmt: skip
    (a,) = Summary.model_validate_json(json.dumps(old)).models
    assert (a.prompt_tokens, a.prompt_tokens_reused) == (0, 0)
