"""A jury that weighs its members: the stack fitted as scikit-learn fits it, compared with the run's
mean on held-out folds and kept only where it wins, written to the profile, and reported by a run
beside each record's score (never in its place)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, StratifiedGroupKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from localjury import evaluate
from localjury.bench.align import build_profile
from localjury.bench.align_jury import jury_decision
from localjury.bench.formats import BenchItem
from localjury.bench.sampling import unit
from localjury.engines.base import BatchEngine, Completion, GenerateCall, render_plain
from localjury.metrics.aspect_critic import AspectCritic
from localjury.metrics.profile import JudgeProfile, load_profile
from localjury.results.record_result import HeadDecision, ModelJudgment, RecordResult
from localjury.votes.heads import C_GRID
from localjury.votes.stacking import MEAN, STACKED, JuryDecision, StackedJury, fit_stack, log_odds, member_probability
from tests.fakes import judgment, spec


def judged(model, p=None, votes=(1,), head=None):
    verdict = None if p is None and head is None else int((head if head is not None else p) >= 0.5)
    decided = None if head is None else HeadDecision(layer=1, probability=head, head_sha256="0")
    return ModelJudgment(model=model, votes=list(votes), reasons=[None] * len(votes), abstentions=0,
                         verdict=verdict, score=None if verdict is None else float(verdict), confidence=p,
                         head=decided)  # fmt: skip


def test_a_members_probability_is_its_heads_else_its_confidence_else_its_vote_share():
    assert member_probability(judged("A", 0.2, head=0.9)) == 0.9
    assert member_probability(judged("A", 0.2)) == 0.2
    assert member_probability(judged("A", None, votes=(1, 0, 1)).model_copy(update={"verdict": 1})) == 2 / 3
    assert member_probability(judged("A", None)) is None and member_probability(None) is None


def test_the_stacks_plain_weights_give_scikit_learns_probabilities_on_the_members_log_odds():
    rng = np.random.default_rng(0)
    gold = np.array([i % 2 for i in range(80)])
    p = np.clip(np.column_stack([0.5 + 0.3 * (gold - 0.5) + rng.normal(0, 0.15, 80), rng.uniform(0.05, 0.95, 80)]),
                0.01, 0.99)  # fmt: skip
    groups = [f"q{i // 2}" for i in range(80)]
    stack = fit_stack(p, gold.tolist(), groups, ["A", "B"])
    x = np.log(p / (1 - p))
    inner = list(StratifiedGroupKFold(n_splits=3, shuffle=True, random_state=0).split(x, gold, groups))
    pipe = make_pipeline(StandardScaler(), LogisticRegression(class_weight="balanced", max_iter=5000))
    search = GridSearchCV(pipe, {"logisticregression__C": list(C_GRID)}, cv=inner, scoring="neg_log_loss")
    want = search.fit(x, gold).predict_proba(x)[:, 1]
    got = [stack.probability([judged("A", a), judged("B", b)])[0] for a, b in p]
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert stack.c == search.best_params_["logisticregression__C"] and stack.labels == 80
    assert abs(stack.weights[0]) > abs(stack.weights[1])  # the informative member weighs more


def test_a_stack_gives_no_probability_where_a_member_abstained_or_is_missing_and_says_which():
    stack = StackedJury(members=["A", "B"], weights=[1.0, 2.0], bias=-0.5, c=1.0, labels=40)
    p, missing = stack.probability([judged("A", 0.7), judged("B", 0.6)])
    assert missing == [] and p == pytest.approx(1 / (1 + np.exp(-(-0.5 + log_odds(0.7) + 2 * log_odds(0.6)))))
    assert stack.probability([judged("A", 0.7), judged("B", None)]) == (None, ["B"])
    assert stack.probability([judged("A", 0.7)]) == (None, ["B"])
    with pytest.raises(ValueError, match="2 weights for 3 members"):
        StackedJury(members=["A", "B", "C"], weights=[1.0, 2.0], bias=0, c=1.0, labels=40)
    with pytest.raises(ValueError, match="holds its stack where the stack won"):
        JuryDecision(ways=[], winner=MEAN, why="", stack=stack)


class Run:
    """The calibration run as :func:`jury_decision` reads it: its results."""

    def __init__(self, results):
        self.results = results

    def iter_results(self):
        return iter(self.results)


def items_and_run(n=80, a=lambda g, i: 0.5, b=lambda g, i: 0.5):
    items = [BenchItem(record={"id": f"r{i}", "response": "x"}, gold=i % 2, pair=f"q{i // 2}")
             for i in range(n)]  # fmt: skip
    results = [RecordResult(record_id=it.id, metric="m", score=None, error=None,
                            models=[judged("A", a(it.gold, i)), judged("B", b(it.gold, i))])
               for i, it in enumerate(items)]  # fmt: skip
    return items, Run(results)


def test_the_stack_is_kept_where_its_interval_clears_the_means_kappa():
    rng = np.random.default_rng(1)
    noise = rng.uniform(-0.2, 0.2, 80)
    # A leans the right way weakly; B is sure and the wrong way round, which calibration flattens and the
    # mean cannot use: a stack reads it inverted.
    items, run = items_and_run(a=lambda g, i: 0.5 + (0.08 if g else -0.08) + noise[i],
                               b=lambda g, i: 0.1 if g else 0.9)  # fmt: skip
    decision = jury_decision(items, ["A", "B"], run, {}, "m", folds=5, seed=0)
    by = {w.way: w for w in decision.ways}
    assert decision.winner == STACKED and by[STACKED].kappa_ci[0] > by[MEAN].kappa
    assert decision.stack.members == ["A", "B"] and decision.stack.weights[1] < 0 and decision.left_out == 0
    assert by[MEAN].records == by[STACKED].records == 80


def test_the_mean_is_kept_where_the_stack_does_not_clear_it_and_a_head_members_held_out_probabilities_count():
    items, run = items_and_run(a=lambda g, i: 0.8 if g else 0.2, b=lambda g, i: 0.5)
    heads = {"B": [0.9 if it.gold else 0.1 for it in items]}  # B decides by its head: the run's prompting unused
    decision = jury_decision(items, ["A", "B"], run, heads, "m", folds=5, seed=0)
    assert decision.winner == MEAN and decision.stack is None and "not above the mean's 1.000" in decision.why
    assert jury_decision(items, ["A"], run, {}, "m", 5, 0) is None
    assert "not compared" in jury_decision(items, ["A", "B"], None, {}, "m", 5, 0).why
    few, few_run = items_and_run(n=30)
    assert "not compared: 30 labels" in jury_decision(few, ["A", "B"], few_run, {}, "m", 5, 0).why
    assert unit(items[0]) == unit(items[1])  # the folds keep a pair together


class Sure(BatchEngine):
    """A judge that is sure: model A says p 0.9 where the answer says right and 0.1 where wrong, but the wrong
    way round on every third question; model B the wrong way round on all."""

    name = "fake"

    def __init__(self, spec):
        self.spec = spec

    def format_prompt(self, messages):
        return render_plain(messages)

    def count_tokens(self, prompts):
        return [len(p.split()) for p in prompts]

    def _generate(self, call: GenerateCall):
        out = []
        for prompt in call.prompts:
            right = "is right" in prompt.rsplit("<response>", 1)[-1]
            question = int(re.findall(r"Question (\d+)", prompt)[-1])
            p = 0.9 if right == (self.spec.name == "A" and question % 3 > 0) else 0.1
            out.append([Completion(judgment(int(p > 0.5)), 5, True, (p,))] * call.n)
        return out

    def close(self):
        pass


def test_align_compares_the_jury_and_a_run_reports_the_stack_beside_the_mean(tmp_path):
    path = tmp_path / "labels.jsonl"
    rows = [{"id": f"q{q}-{g}", "user_input": f"Question {q}?", "gold": g, "pair": f"q{q}",
             "response": f"Answer {q} is {'right' if g else 'wrong'}."} for q in range(24) for g in (1, 0)]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    models = [spec("A"), spec("B")]
    out = tmp_path / "profile.yaml"
    prof = build_profile(path, models, out, judge=AspectCritic("right", "The answer is right."), shots=2,
                         heads=False, use_cache=False, engine_factory=Sure)  # fmt: skip
    assert load_profile(out) == prof and prof.jury is not None and {w.way for w in prof.jury.ways} == {MEAN, STACKED}
    assert prof.jury.winner == STACKED and prof.jury.stack.weights[1] < 0  # B, sure the wrong way, read inverted

    records = [{"id": "r1", "user_input": "Question 99?", "response": "Answer 99 is right."},
               {"id": "r2", "user_input": "Question 98?", "response": "Answer 98 is wrong."}]  # fmt: skip
    run = evaluate(records, [], profile=out, models=models, use_cache=False, engine_factory=Sure)
    results = {r.record_id: r for r in run.iter_results()}
    assert results["r1"].stacked.verdict == 1 and results["r2"].stacked.verdict == 0
    p = prof.jury.stack.probability(results["r1"].models)[0]
    assert results["r1"].stacked.probability == pytest.approx(p)
    (summary,) = run.summary.metrics
    assert summary.mean_score == pytest.approx(float(np.mean([r.score for r in results.values()])))  # the mean stands
    assert (summary.stacked.members, summary.stacked.scored, summary.stacked.pass_rate) == (["A", "B"], 2, 0.5)

    alone = evaluate(records, [], profile=out, models=models[:1], use_cache=False, engine_factory=Sure)
    assert all(r.stacked.probability is None and r.stacked.missing == ["B"] for r in alone.iter_results())
    assert alone.summary.metrics[0].stacked.missing == 2

    with pytest.raises(ValueError, match="not all the profile's models"):
        JudgeProfile.model_validate({**prof.model_dump(mode="json"), "models": ["A"]})
