"""Adaptive strictness: fewer samples, the same verdicts as full sampling."""

from collections import defaultdict

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from localjury import AspectCritic, Faithfulness, evaluate
from tests.fakes import factory, judgment, spec

DATED = AspectCritic("dated", "The response must include a specific date or year.")


def deterministic(table):
    """An engine whose i-th sample of a prompt (counted across calls) votes table[record][i]."""
    drawn = defaultdict(int)

    def respond(model, prompt, j):
        rid = prompt.rsplit("<response>\n", 1)[1].split("\n", 1)[0]
        i = drawn[(model, prompt)]
        drawn[(model, prompt)] += 1
        vote = table[rid][i]
        return "garbage" if vote is None else judgment(vote)

    return respond


def run(table, k, adaptive, log=None):
    records = [{"id": rid, "response": rid} for rid in table]
    return evaluate(
        records,
        [DATED],
        [spec("A")],
        strictness=k,
        adaptive=adaptive,
        use_cache=False,
        engine_factory=factory(deterministic(table), [] if log is None else log),
    )


def test_unanimous_first_samples_decide_the_rest_are_drawn_only_for_open_pairs():
    table = {"r0": [1, 1, 0], "r1": [1, 0, 0], "r2": [0, 0, 1], "r3": [None, 1, 1]}
    log = []
    adaptive = run(table, 3, True, log)
    assert [e for e in log if e[0] == "generate"] == [("generate", "A", 4, 2), ("generate", "A", 2, 1)]
    rows = {r.record_id: r.models[0] for r in adaptive.results}
    assert [(rid, m.votes, m.drawn, m.verdict) for rid, m in rows.items()] == [
        ("r0", [1, 1], 2, 1),
        ("r1", [1, 0, 0], 3, 0),
        ("r2", [0, 0], 2, 0),
        ("r3", [None, 1, 1], 3, 1),  # an abstention leaves the pair open
    ]
    assert adaptive.summary.models[0].samples_saved == 2 and adaptive.summary.models[0].judgments == 10


votes = st.sampled_from([0, 1, None])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    k=st.sampled_from([3, 4, 5, 7]),
    rows=st.lists(st.lists(votes, min_size=7, max_size=7), min_size=1, max_size=6),
)
def test_adaptive_verdicts_equal_full_sampling(k, rows):
    table = {f"r{i}": row[:k] for i, row in enumerate(rows)}
    full = run(table, k, False)
    fast = run(table, k, True)
    for f, a in zip(full.results, fast.results, strict=True):
        fm, am = f.models[0], a.models[0]
        assert am.verdict == fm.verdict and a.score == f.score
        assert am.votes == fm.votes[: am.drawn] and am.drawn in (k // 2 + 1, k)
    saved = sum(k - r.models[0].drawn for r in fast.results)
    assert fast.summary.models[0].samples_saved == saved


def test_k_up_to_2_draws_everything_in_one_call():
    log = []
    run({"r0": [1, 1]}, 2, True, log)
    assert [e for e in log if e[0] == "generate"] == [("generate", "A", 1, 2)]


def test_composites_stay_open_unless_every_statement_is_unanimous():
    import json

    samples = {"a": [(1, 1), (1, 1), (0, 0)], "b": [(1, 1), (1, 0), (1, 1)]}
    drawn = defaultdict(int)

    def respond(model, prompt, j):
        task = prompt.rsplit("### Task", 1)[1]
        if "Break the answer" in prompt:
            return json.dumps({"statements": ["One.", "Two."]})
        rid = "a" if "context a" in task else "b"
        i = drawn[rid]
        drawn[rid] += 1
        v = samples[rid][i]
        return json.dumps({"verdicts": [{"statement": "s", "reason": "r", "verdict": x} for x in v]})

    log = []
    result = evaluate(
        [
            {"id": "a", "response": "Answer a.", "retrieved_contexts": ["context a"]},
            {"id": "b", "response": "Answer b.", "retrieved_contexts": ["context b"]},
        ],
        [Faithfulness()],
        [spec("A")],
        strictness=3,
        adaptive=True,
        engine_factory=factory(respond, log),
    )
    assert [e for e in log if e[0] == "generate"] == [
        ("generate", "A", 2, 1),
        ("generate", "A", 2, 2),
        ("generate", "A", 1, 1),
    ]
    a, b = result.results
    assert a.models[0].drawn == 2 and a.score == 1.0
    assert b.models[0].drawn == 3 and [s.models[0].votes for s in b.statements] == [[1, 1, 1], [1, 0, 1]]
