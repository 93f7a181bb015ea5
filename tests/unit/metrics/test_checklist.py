"""Checklist mode: several criteria judged in one call per record, each with its own results."""

import json

import pytest

from localjury import AspectCritic, Checklist, Faithfulness, evaluate
from localjury.engines.base import Completion
from localjury.errors import MetricError
from localjury.metrics.checklist import ChecklistCriterion, checklist_metrics
from localjury.records.record import Record
from tests.fakes import factory, judgment, run_cli, spec

DATED = AspectCritic("dated", "The response must include a specific date or year.")
SHORT = AspectCritic("short", "The response is one sentence.", tie_break="pass")
POLITE = AspectCritic("polite", "The response is polite.")
CRITICS = [DATED, SHORT, POLITE]
#: (record, criterion) -> each sample's vote (None: the sample does not parse).
TABLE = {
    ("r0", "dated"): [1, 1, 0],
    ("r0", "short"): [0, 1, None],
    ("r0", "polite"): [0, 0, None],
    ("r1", "dated"): [0, 0, 0],
    ("r1", "short"): [1, 0, 1],
    ("r1", "polite"): [1, 1, 1],
}
RECORDS = [{"id": rid, "user_input": "When?", "response": rid} for rid in ("r0", "r1")]


def record_of(prompt: str) -> str:
    return prompt.rsplit("<response>\n", 1)[1].split("\n", 1)[0]


def respond(model, prompt, j):
    """One criterion's answer, or the whole checklist's, from TABLE (an abstention where any
    criterion of the checklist's sample abstains: a checklist sample parses whole or not at all)."""
    rid = record_of(prompt)
    if "<criteria>" in prompt:
        names = list(json.loads(prompt.rsplit("<criteria>\n", 1)[1].split("\n</criteria>", 1)[0]))
        votes = [TABLE[(rid, n)][j] for n in names]
        if None in votes:
            return "garbage"
        checks = {n: {"reason": f"{n} {v}", "verdict": v} for n, v in zip(names, votes, strict=True)}
        return json.dumps({"checks": checks})
    criterion = prompt.rsplit("<criterion>\n", 1)[1].split("\n</criterion>", 1)[0]
    name = next(c.name for c in CRITICS if c.definition == criterion)
    vote = TABLE[(rid, name)][j]
    return "garbage" if vote is None else judgment(vote, f"{name} {vote}")


def run(checklist, log=None, **kw):
    return evaluate(
        RECORDS,
        CRITICS,
        [spec("A"), spec("B")],
        strictness=3,
        checklist=checklist,
        use_cache=False,
        engine_factory=factory(respond, [] if log is None else log),
        **kw,
    )


def comparable(result):
    """A result without what the prompts differ in (the raw text of abstentions)."""
    dumped = result.model_dump()
    for m in dumped["models"]:
        for inv in m["invalid"]:
            inv.pop("raw")
            inv.pop("problem")
    return dumped


def test_checklist_results_equal_one_metric_per_criterion_where_the_samples_agree():
    # TABLE's abstentions fall on samples where every criterion abstains in the separate run too
    # ("garbage" for r0's third sample of short and polite; dated's third is a 0 there), so
    # make dated's third sample abstain too for the comparison to hold sample by sample.
    TABLE[("r0", "dated")][2] = None
    try:
        separate, together = run(False), run(True)
    finally:
        TABLE[("r0", "dated")][2] = 0
    assert [comparable(r) for r in together.results] == [comparable(r) for r in separate.results]
    fields = ("metric", "definition", "strictness", "tie_break", "records", "scored", "mean_score", "pass_rate")
    assert [m.model_dump(include=set(fields)) for m in together.summary.metrics] == [
        m.model_dump(include=set(fields)) for m in separate.summary.metrics
    ]
    assert [m.kind for m in together.summary.metrics] == ["checklist"] * 3


def test_one_call_per_record_and_model_instead_of_one_per_criterion():
    log_separate, log_together = [], []
    separate, together = run(False, log_separate), run(True, log_together)
    calls = [e for e in log_together if e[0] == "generate"]
    assert calls == [("generate", "A", 2, 3), ("generate", "B", 2, 3)]  # 2 prompts (records), not 6
    assert [e for e in log_separate if e[0] == "generate"] == [("generate", "A", 6, 3), ("generate", "B", 6, 3)]
    # the summary counts samples per criterion, as for separate metrics; fewer were generated
    assert [m.judgments for m in together.summary.models] == [m.judgments for m in separate.summary.models] == [18] * 2
    assert all(
        t.prompt_tokens < s.prompt_tokens for t, s in zip(together.summary.models, separate.summary.models, strict=True)
    )
    # every criterion still has its own row per record, its k votes 0/1 or abstentions
    assert [(r.record_id, r.metric) for r in together.results] == [
        (rid, c.name) for rid in ("r0", "r1") for c in CRITICS
    ]
    for r in together.results:
        for m in r.models:
            assert len(m.votes) == 3 and all(v in (0, 1, None) for v in m.votes)
            assert m.abstentions == m.votes.count(None) == len(m.invalid)


def test_a_sample_that_does_not_parse_abstains_on_every_criterion():
    rows = {(r.record_id, r.metric): r.models[0] for r in run(True).results}
    for name in ("dated", "short", "polite"):
        assert rows[("r0", name)].votes[2] is None
        assert "does not match the schema" in rows[("r0", name)].invalid[0].problem
    assert rows[("r0", "dated")].verdict == 1 and rows[("r0", "short")].verdict == 1  # 1-1 tie: short passes ties
    assert rows[("r0", "polite")].verdict == 0


def test_each_criterion_reads_its_own_verdict_probability():
    def probs(model, prompt, j):
        checks = {c.name: {"reason": "r", "verdict": v} for c, v in zip(CRITICS, (1, 0, 1), strict=True)}
        return Completion(text=json.dumps({"checks": checks}), n_tokens=9, finished=True, verdict_probs=(0.9, 0.2, 0.6))

    result = evaluate(
        RECORDS[:1], CRITICS, [spec("A")], checklist=True, scoring="probability", use_cache=False,
        engine_factory=factory(probs, []),
    )  # fmt: skip
    assert [(r.metric, r.models[0].p_pass, r.score) for r in result.results] == [
        ("dated", [0.9], 0.9),
        ("short", [0.2], 0.2),
        ("polite", [0.6], 0.6),
    ]


def test_probabilities_that_do_not_match_the_criteria_are_left_out():
    def probs(model, prompt, j):
        checks = {c.name: {"reason": "r", "verdict": 1} for c in CRITICS}
        return Completion(text=json.dumps({"checks": checks}), n_tokens=9, finished=True, verdict_probs=(0.9,))

    result = evaluate(RECORDS[:1], CRITICS, [spec("A")], checklist=True, use_cache=False,
                      engine_factory=factory(probs, []))  # fmt: skip
    assert [r.models[0].p_pass for r in result.results] == [[None]] * 3


def test_the_checklist_asks_one_schema_with_every_criterion_in_order():
    calls = []
    evaluate(RECORDS[:1], CRITICS, [spec("A")], checklist=True, use_cache=False,
             engine_factory=factory(respond, [], calls))  # fmt: skip
    (call,) = calls
    checks = call["schema"]["properties"]["checks"]
    assert list(checks["properties"]) == checks["required"] == ["dated", "short", "polite"]
    assert checks["additionalProperties"] is False
    prompt = call["prompts"][0]
    assert all(c.definition in prompt for c in CRITICS)


def test_a_second_run_reuses_the_checklist_samples_from_the_store(tmp_path):
    cache = tmp_path / "store.sqlite"
    log = []
    kw = dict(strictness=3, checklist=True, cache=str(cache), engine_factory=factory(respond, log))
    a = evaluate(RECORDS, CRITICS, [spec("A")], **kw)
    log.clear()
    b = evaluate(RECORDS, CRITICS, [spec("A")], **kw)
    assert not [e for e in log if e[0] == "generate"]
    assert [r.model_dump() for r in a.results] == [r.model_dump() for r in b.results]


def test_adaptive_strictness_draws_the_rest_for_the_whole_checklist():
    log = []
    result = run(True, log, adaptive=True)
    # r0's first two samples split on dated and short; r1's on short: both records draw their third
    assert [e for e in log if e[0] == "generate"][:2] == [("generate", "A", 2, 2), ("generate", "A", 2, 1)]
    assert all(m.drawn == 3 for r in result.results for m in r.models)


def test_a_record_without_a_response_is_each_criterions_error():
    bad = [{"id": "x", "user_input": "q"}, *RECORDS]
    result = evaluate(bad, CRITICS, [spec("A")], checklist=True, use_cache=False, engine_factory=factory(respond, []))
    errors = [r for r in result.results if r.record_id == "x"]
    assert [r.metric for r in errors] == ["dated", "short", "polite"]
    assert all("response" in r.error for r in errors)
    assert len([r for r in result.results if r.error is None]) == 6


def test_grouping_keeps_order_scopes_and_other_metrics():
    convo = AspectCritic("c1", "The assistant is polite.", scope="conversation")
    first = AspectCritic("vf", "The response is polite.", verdict_first=True)
    faith = Faithfulness()
    out = checklist_metrics([faith, DATED, convo, first, SHORT], group=True)
    assert [type(m).__name__ for m in out] == ["Faithfulness", "ChecklistCriterion", "ChecklistCriterion",
                                               "AspectCritic", "AspectCritic"]  # fmt: skip
    assert [m.name for m in out] == ["faithfulness", "dated", "short", "c1", "vf"]
    assert checklist_metrics([faith, DATED, SHORT]) == [faith, DATED, SHORT]  # no grouping asked
    explicit = checklist_metrics([Checklist([DATED, SHORT], strictness=5)])
    assert [(m.name, m.strictness, m.tie_break) for m in explicit] == [("dated", 5, "fail"), ("short", 5, "pass")]
    assert all(isinstance(m, ChecklistCriterion) for m in explicit)


@pytest.mark.parametrize(
    ("critics", "match"),
    [
        ([DATED], "at least two criteria"),
        ([DATED, AspectCritic("dated", "Other.")], "distinct names"),
        ([DATED, AspectCritic("c", "Polite.", scope="conversation")], "one scope"),
        ([DATED, AspectCritic("vf", "Polite.", verdict_first=True)], r"\['vf'\] answer verdict first"),
    ],
)
def test_a_bad_checklist_is_refused(critics, match):
    with pytest.raises(MetricError, match=match):
        Checklist(critics)


def test_a_checklist_sample_for_other_criteria_abstains():
    checklist = Checklist([DATED, SHORT])
    wrong = json.dumps({"checks": {"short": {"reason": "r", "verdict": 1}, "dated": {"reason": "r", "verdict": 1}}})
    parsed = checklist.parse(wrong)
    assert parsed.votes == [None, None] and "not for the criteria ['dated', 'short']" in parsed.problem
    cut = checklist.parse('{"checks": {"dated": {"reason": "r', finished=False)
    assert cut.votes == [None, None] and "cut off" in cut.problem
    assert Checklist([DATED, SHORT]).messages(Record(id="a", response="b"))[-1]["content"].startswith("<criteria>")


def test_cli_checklist_option(tmp_path, monkeypatch, capsys):
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    seen = {}

    def fake_evaluate(run):
        seen["config"] = run.settled.config
        raise SystemExit(0)

    monkeypatch.setattr("localjury.run.pipeline.Run.evaluate", fake_evaluate)
    code, _, _ = run_cli(monkeypatch, capsys, "run", data, "-a", "coherence", "-a", "conciseness", "--checklist")
    assert code == 0 and seen["config"].sampling.checklist is True


def test_a_new_version_of_a_rubric_file_criterion_is_judged_again_under_a_checklist(tmp_path):
    from localjury.metrics.rubric_file import rubric_file_metrics

    path, cache, log = tmp_path / "rubrics.yaml", str(tmp_path / "store.sqlite"), []
    entry = "  - name: {0}\n    version: {1}\n    definition: The response is {0}.\n"
    kw = dict(strictness=3, checklist=True, cache=cache, engine_factory=factory(respond, log))

    def generated(version):
        path.write_text("criteria:\n" + entry.format("short", 1) + entry.format("polite", version))
        log.clear()
        evaluate(RECORDS, rubric_file_metrics(path), [spec("A")], **kw)
        return len([e for e in log if e[0] == "generate"])

    assert generated(1) == 1 and generated(1) == 0  # stored under the checklist's one key
    assert generated(2) == 1  # the same text, a new version: judged again
