"""Decision heads: fitted by grouped cross-validation (checked against scikit-learn directly),
kept only where they beat prompting, stored as plain numbers bound to their judge, and used at
run time through the engine interface (a small BatchEngine with synthetic hidden states)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.decomposition import PCA
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, StratifiedGroupKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from localjury import AspectCritic, evaluate
from localjury._hashing import content_hash
from localjury.bench.align import build_profile
from localjury.bench.decision_ways import (
    MIN_LABELS,
    SURFACE,
    decide,
    layers_of,
    pooling_of,
    surface_features,
    surface_way,
    too_few,
    way_name,
)
from localjury.bench.formats import BenchItem
from localjury.engines.base import BatchEngine, Completion, GenerateCall, render_plain
from localjury.errors import ConfigError
from localjury.metrics.profile import JudgeProfile, load_profile
from localjury.models._shape import ModelShape
from localjury.results.show import judgment_view
from localjury.types import Sampling
from localjury.votes.decision_report import DecisionWay
from localjury.votes.heads import (
    C_GRID,
    DEFAULT_C,
    DecisionHead,
    HeadBinding,
    cross_validated,
    fit_head,
    grouped_folds,
    linear,
    verdict_prefix,
)
from tests.fakes import judgment, spec

BINDING = HeadBinding(model="A", weights_sha256="f" * 64, engine="fake", prompt_format="auto", criterion="Right?")


def synthetic(n=60, dim=6, seed=0):
    rng = np.random.default_rng(seed)
    gold = [i % 2 for i in range(n)]
    x = rng.normal(size=(n, dim))
    x[:, 0] += np.array(gold) * 3.0
    groups = [f"q{i // 2}" for i in range(n)]
    return x, gold, groups


def test_grouped_folds_never_share_a_group_and_cover_every_record():
    _, gold, _ = synthetic()
    rng = np.random.default_rng(3)
    groups = [f"g{rng.integers(0, 17)}" for _ in gold]
    folds = grouped_folds(groups, gold, 5, seed=1)
    assert sorted(i for _, test in folds for i in test) == list(range(len(gold)))
    for train, test in folds:
        assert not {groups[i] for i in train} & {groups[i] for i in test}


def test_cross_validated_probabilities_equal_a_direct_scikit_learn_computation():
    x, gold, groups = synthetic()
    got = cross_validated(x, gold, groups, folds=4, seed=2)
    y, g = np.asarray(gold), np.asarray(groups)
    want = np.zeros(len(y))
    outer = StratifiedGroupKFold(n_splits=4, shuffle=True, random_state=2)
    for train, test in outer.split(x, y, g):
        inner = list(StratifiedGroupKFold(n_splits=3, shuffle=True, random_state=2).split(x[train], y[train], g[train]))
        pipe = make_pipeline(StandardScaler(), LogisticRegression(class_weight="balanced", max_iter=5000))
        search = GridSearchCV(pipe, {"logisticregression__C": list(C_GRID)}, cv=inner, scoring="neg_log_loss")
        want[test] = search.fit(x[train], y[train]).predict_proba(x[test])[:, 1]
    np.testing.assert_allclose(got, want, rtol=1e-9)
    assert np.mean((np.asarray(got) >= 0.5) == y) > 0.7  # the signal in feature 0 is found


def test_a_fitted_heads_plain_weights_give_the_pipelines_probabilities():
    x, gold, groups = synthetic()
    head = fit_head(x, gold, groups, 3, BINDING)
    inner = list(StratifiedGroupKFold(n_splits=3, shuffle=True, random_state=0).split(x, gold, groups))
    pipe = make_pipeline(StandardScaler(), LogisticRegression(class_weight="balanced", max_iter=5000))
    search = GridSearchCV(pipe, {"logisticregression__C": list(C_GRID)}, cv=inner, scoring="neg_log_loss")
    want = search.fit(x, gold).predict_proba(x)[:, 1]
    np.testing.assert_allclose([head.probability(v) for v in x], want, rtol=1e-6)
    assert head.c == search.best_params_["logisticregression__C"] and head.labels == 60 and head.layer == 3
    with pytest.raises(ConfigError, match="hidden state of 5 numbers for a head of 6"):
        head.probability(x[0][:5])


def test_a_head_on_several_blocks_chooses_its_pca_inside_the_folds_and_folds_it_into_plain_weights():
    x, gold, groups = synthetic(n=80, dim=40)  # two blocks of 20, the signal in the first number
    head = fit_head(x, gold, groups, [3, 5], BINDING)
    inner = list(StratifiedGroupKFold(n_splits=3, shuffle=True, random_state=0).split(x, gold, groups))
    logistic = LogisticRegression(class_weight="balanced", max_iter=5000)
    pipe = make_pipeline(StandardScaler(), PCA(svd_solver="full"), logistic)  # every component: no reduction
    grid = [{"pca__n_components": [n], "logisticregression__C": list(C_GRID)} for n in (None, 16, 32)]
    search = GridSearchCV(pipe, grid, cv=inner, scoring="neg_log_loss").fit(x, gold)
    np.testing.assert_allclose([head.probability(v) for v in x], search.predict_proba(x)[:, 1], rtol=1e-6)
    chosen = search.best_params_["pca__n_components"]
    assert head.reduction == (None if chosen is None else f"pca {chosen}")
    wide, wide_gold, _ = synthetic(n=30, dim=100)  # more numbers than rows, as hidden states are

    def exact(c):
        return LogisticRegression(C=c, tol=1e-10, max_iter=10000)

    for c in (1e-3, 1.0):  # PCA to every component is the same regression as none: its weights lie in the rows' span
        rotated = make_pipeline(StandardScaler(), PCA(svd_solver="full"), exact(c)).fit(wide, wide_gold)
        plain = make_pipeline(StandardScaler(), exact(c)).fit(wide, wide_gold)
        assert rotated.named_steps["pca"].n_components_ == 30
        np.testing.assert_allclose(rotated.predict_proba(wide), plain.predict_proba(wide), atol=1e-6)
    assert (head.layers, head.blocks_name, head.c) == (
        [3, 5],
        "layers 3+5",
        search.best_params_["logisticregression__C"],
    )
    assert DecisionHead.model_validate(head.model_dump(mode="json")) == head
    head.check_shape(ModelShape(hidden_size=20, blocks=6, source="config"), model="A", source="p.yaml")
    with pytest.raises(ConfigError, match=r"has 40 weights \(2 blocks of 20\), but model 'A' has a hidden size of 40"):
        head.check_shape(ModelShape(hidden_size=40, blocks=6, source="config"), model="A", source="p.yaml")
    with pytest.raises(ConfigError, match="reads layer 5, but model 'A' has 5 blocks"):
        head.check_shape(ModelShape(hidden_size=20, blocks=5, source="config"), model="A", source="p.yaml")
    for pipe in (  # whichever the search chose, each reduction folds into the same function of x
        make_pipeline(StandardScaler(), PCA(4, svd_solver="full"), LogisticRegression(max_iter=5000)),
        make_pipeline(StandardScaler(with_mean=False), LogisticRegression(max_iter=5000, fit_intercept=False)),
    ):
        weights, bias = linear(pipe.fit(x, gold))
        np.testing.assert_allclose(1 / (1 + np.exp(-(x @ weights + bias))), pipe.predict_proba(x)[:, 1], rtol=1e-9)
    with_pca = cross_validated(x, gold, groups, folds=4, seed=1, reduce=True)
    assert np.mean((np.asarray(with_pca) >= 0.5) == np.asarray(gold)) > 0.7


def test_a_head_on_one_block_keeps_the_profile_and_hash_it_had_before_heads_on_several():
    head = fit_head(*synthetic(), 3, BINDING)
    dumped = head.model_dump(mode="json")
    assert "more_layers" not in dumped and "reduction" not in dumped and head.layers == [3]
    assert head.sha256() == content_hash(head=dumped) and DecisionHead.model_validate(dumped) == head


def test_a_ways_name_says_its_blocks_and_where_it_reads_them():
    assert [way_name([7]), way_name([3, 7, 27])] == ["head layer 7", "head layers 3+7+27"]
    assert [layers_of("head layer 7"), layers_of("head layers 3+7+27")] == [[7], [3, 7, 27]]
    assert layers_of("zero-shot votes") is None and layers_of(SURFACE) is None and layers_of("head layer x") is None
    pooled = way_name([3, 7], "response")
    assert pooled == "head layers 3+7 over the response" and layers_of(pooled) == [3, 7]
    assert [pooling_of(pooled), pooling_of("head layer 7")] == ["response", "last"]


def test_a_head_on_the_response_mean_says_so_in_its_profile_and_name_and_hashes_apart():
    last = fit_head(*synthetic(), 3, BINDING)
    pooled = fit_head(*synthetic(), 3, BINDING, pooling="response")
    assert pooled.model_dump(mode="json")["pooling"] == "response" and "pooling" not in last.model_dump(mode="json")
    assert pooled.blocks_name == "layer 3 over the response" and last.blocks_name == "layer 3"
    assert pooled.sha256() != last.sha256() and DecisionHead.model_validate(pooled.model_dump()) == pooled


def test_few_labels_in_large_groups_still_fit_a_head_with_the_default_c():
    x, _, _ = synthetic(n=12)
    gold = [1, 1, 1, 0, 0, 0, 1, 1, 0, 0, 1, 0]
    groups = ["a"] * 3 + ["b"] * 3 + ["c"] * 2 + ["d"] * 2 + ["e", "f"]  # some inner folds hold one label
    head = fit_head(x, gold, groups, 0, BINDING)
    assert 0 < head.probability(x[0]) < 1 and head.c in (*C_GRID, DEFAULT_C)
    assert len(cross_validated(x, gold, ["g1"] * 6 + ["g2"] * 6, folds=2)) == 12  # a fold with one label to learn


def test_a_head_refuses_hidden_states_from_elsewhere_naming_what_differs():
    head = fit_head(*synthetic(), 3, BINDING)
    head.check(BINDING.model_copy(update={"model": "renamed"}))  # the name alone does not matter
    other = BINDING.model_copy(update={"weights_sha256": "0" * 64, "engine": "llamacpp"})
    with pytest.raises(ConfigError, match=r"weights_sha256 'ffff.*engine 'fake' \(the head's\) vs 'llamacpp'"):
        head.check(other)


def way(name, kappa, low=None, high=None):
    ci = None if low is None else [low, high]
    return DecisionWay(way=name, kappa=kappa, kappa_ci=ci, records=50)


def test_a_head_wins_only_when_its_interval_clears_the_best_prompting_way():
    prompting = [way("zero-shot votes", 0.1, 0.0, 0.2), way("aligned votes", 0.3, 0.1, 0.5)]
    won = decide("A", prompting, [way("head layer 7", 0.6, 0.35, 0.8), way("head layer 3", 0.5, 0.4, 0.6)])
    assert won.winner == "head layer 7" and "above aligned votes (kappa 0.300)" in won.why
    assert [w.way for w in won.ways] == ["head layer 7", "head layer 3", "aligned votes", "zero-shot votes"]
    lost = decide("A", prompting, [way("head layer 7", 0.45, 0.25, 0.6)])
    assert lost.winner == "aligned votes" and lost.why.startswith("kept prompting") and "from 0.250" in lost.why


def test_the_length_only_baseline_is_listed_never_chosen_and_warns_when_it_reaches_the_head():
    prompting = [way("zero-shot votes", 0.1, 0.0, 0.2)]
    head = way("head layer 7", 0.6, 0.35, 0.8)
    plain = decide("A", prompting, [head], way(SURFACE, 0.2, 0.0, 0.4))
    assert plain.winner == "head layer 7" and plain.artifact is None and [w.way for w in plain.ways][1] == SURFACE
    shallow = decide("A", prompting, [head], way(SURFACE, 0.9, 0.8, 1.0))  # length alone does better
    assert shallow.winner == "head layer 7" and shallow.ways[0].way == SURFACE
    assert "length only: kappa 0.900) reaches head layer 7's interval (from 0.350)" in shallow.artifact
    assert decide("A", prompting, [way("head layer 7", 0.15, -0.1, 0.3)], way(SURFACE, 0.0)).artifact is not None
    # HaluEval QA's shape: the head clears length, but length alone clears prompting as a head must
    strong = decide("A", prompting, [way("head layer 3", 0.98, 0.94, 1.0)], way(SURFACE, 0.9, 0.8, 0.98))
    assert strong.winner == "head layer 3" and "interval from 0.800) is above zero-shot votes (kappa 0.100)" in (
        strong.artifact
    )
    assert decide("A", prompting, [way("head layer 3", 0.98, 0.94, 1.0)], way(SURFACE, 0.9, 0.05, 1.0)).artifact is None


def test_the_length_only_baseline_is_a_grouped_cross_validated_head_on_lengths():
    rng = np.random.default_rng(3)
    items, gold, groups = [], [], []
    for i in range(60):  # a long answer passes, a short one fails: length is all there is
        g = i % 2
        words = int(rng.integers(20, 40) if g else rng.integers(2, 8))
        items.append(BenchItem(record={"id": str(i), "user_input": "Why?", "response": "w " * words}, gold=g))
        gold.append(g)
        groups.append(f"q{i // 2}")
    x = surface_features(items)
    assert x.shape == (60, 3) and x[1, 0] == pytest.approx(np.log1p(len(items[1].record["response"].split())))
    baseline = surface_way(items, gold, groups, folds=5, seed=0)
    p = cross_validated(x, gold, groups, folds=5, seed=0)
    assert baseline.way == SURFACE and baseline.kappa == 1.0 and baseline.records == 60
    assert baseline.auroc == pytest.approx(1.0) and all((q >= 0.5) == g for q, g in zip(p, gold, strict=True))


def test_too_few_labels_fit_no_head():
    assert too_few([0, 1] * (MIN_LABELS // 2)) is None
    assert "39 labels" in too_few([0, 1] * 19 + [1])
    assert "needs 40, 10 of each" in too_few([1] * 45 + [0] * 9)


class Hidden(BatchEngine):
    """A judge whose hidden state's first number says whether the record's answer is right."""

    name = "fake"

    def __init__(self, spec, log):
        self.spec, self.log = spec, log

    def format_prompt(self, messages):
        return render_plain(messages)

    def count_tokens(self, prompts):
        return [len(p.split()) for p in prompts]

    def block_count(self):
        return 4

    def hidden_states(self, prompts, layers, pooling="last"):
        self._check_layers(layers)
        self.log.append(("hidden", len(prompts), list(layers)))
        rows = [[1.0 if "is right" in p.rsplit("<response>", 1)[-1] else -1.0, 0.5, len(p) % 7 / 7] for p in prompts]
        return np.asarray([[row] * len(layers) for row in rows], np.float32)

    def _generate(self, call: GenerateCall):
        self.log.append(("generate", len(call.prompts), call.n))
        return [[Completion(judgment(0), 5, True, (0.3,))] * call.n for _ in call.prompts]

    def close(self):
        pass


def shown(result):
    return "\n".join(str(part) for part in judgment_view(result, None).renderables)


def labels(tmp_path, questions=24):
    path = tmp_path / "labels.jsonl"
    rows = [
        {"id": f"q{q}-{g}", "user_input": f"Question {q}?", "response": f"Answer {q} is {'right' if g else 'wrong'}.",
         "gold": g, "pair": f"q{q}"}
        for q in range(questions) for g in (1, 0)
    ]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_align_keeps_a_head_that_beats_prompting_and_the_run_decides_by_it(tmp_path):
    log: list = []
    judge = AspectCritic("right", "The answer is right.")
    out = tmp_path / "profile.yaml"
    prof = build_profile(labels(tmp_path), [spec("A", engine="transformers")], out, judge=judge, shots=2,
                         calibrate=False, use_cache=False, engine_factory=lambda s: Hidden(s, log))  # fmt: skip
    assert load_profile(out) == prof
    (report,) = prof.decisions
    assert report.winner.startswith("head layer ") and report.ways[0].kappa == 1.0
    assert {w.way for w in report.ways} >= {"zero-shot votes", "zero-shot calibrated", "head layer 3", SURFACE,
                                            "head layers 1+2+3"}  # fmt: skip
    # right and wrong answers are as long: the length alone says nothing, and no warning is given
    assert next(w for w in report.ways if w.way == SURFACE).kappa < 0.5 and report.artifact is None
    (head,) = prof.heads
    assert head.binding.criterion == "The answer is right." and head.binding.engine == "transformers"
    assert ("hidden", 48, [1, 2, 3]) in log  # one prefill a labeled record, blocks a quarter of the way on

    records = [{"id": "r1", "user_input": "Question 99?", "response": "Answer 99 is right."},
               {"id": "r2", "user_input": "Question 98?", "response": "Answer 98 is wrong."}]  # fmt: skip
    log.clear()
    run = evaluate(records, [], profile=out, models=[spec("A", engine="transformers")], use_cache=False,
                   engine_factory=lambda s: Hidden(s, log), strictness=3)  # fmt: skip
    results = {r.record_id: r for r in run.iter_results()}
    (a,) = results["r1"].models
    assert (a.votes, a.reasons, a.verdict, a.drawn) == ([1], [None], 1, 1) and a.head.layer == head.layer
    assert a.p_pass == [a.head.probability] and a.head.probability > 0.5 and results["r2"].models[0].verdict == 0
    assert not [e for e in log if e[0] == "generate"]  # decided with no sampled text
    assert "decided by its head on layer" in shown(results["r1"])

    log.clear()  # adaptive strictness splits the usual samples, never a head's one decision
    run = evaluate(records[:1], [], profile=out, models=[spec("A", engine="transformers")], use_cache=False,
                   engine_factory=lambda s: Hidden(s, log), strictness=3, adaptive=True)  # fmt: skip
    assert next(iter(run.iter_results())).models[0].votes == [1] and not [e for e in log if e[0] == "generate"]

    log.clear()  # --with-reasons: the usual samples beside the decision, not counted in it
    run = evaluate(records[:1], [], profile=out, models=[spec("A", engine="transformers")], use_cache=False,
                   engine_factory=lambda s: Hidden(s, log), strictness=3, with_reasons=True)  # fmt: skip
    (a,) = next(iter(run.iter_results())).models
    assert (a.verdict, a.votes, a.head.votes, a.head.reasons) == (1, [1], [0, 0, 0], ["because"] * 3)
    assert ("generate", 1, 3) in log
    assert "beside it, sample 3 (not counted): vote 0 - because" in shown(next(iter(run.iter_results())))


def test_a_jury_mixes_a_head_with_a_prompted_model_and_refuses_a_head_for_other_weights(tmp_path):
    log: list = []
    x, gold, groups = synthetic(dim=3)
    binding = BINDING.model_copy(update={"criterion": "The answer is right.", "engine": "transformers"})
    base = {"criterion": {"name": "right", "definition": "The answer is right."}}
    record = [{"id": "r1", "user_input": "Q?", "response": "Answer is right."}]
    models = [spec("A", engine="transformers"), spec("B", engine="transformers")]
    from localjury.engines import model_identity

    bound = binding.model_copy(update={"weights_sha256": model_identity(models[0])})
    prof = JudgeProfile.model_validate({**base, "heads": [fit_head(x, gold, groups, 2, bound).model_dump()]})
    run = evaluate(record, [], profile=prof, models=models, use_cache=False, engine_factory=lambda s: Hidden(s, log))
    a, b = next(iter(run.iter_results())).models
    assert a.head is not None and b.head is None and b.reasons[0] == "because"
    wrong = JudgeProfile.model_validate({**base, "heads": [fit_head(x, gold, groups, 2, binding).model_dump()]})
    with pytest.raises(ConfigError, match=r"fitted on other hidden states.*weights_sha256"):
        evaluate(record, [], profile=wrong, models=models[:1], use_cache=False, engine_factory=lambda s: Hidden(s, []))


class Pooled(Hidden):
    """A judge whose last token's state says nothing of the answer, and whose response's mean state does."""

    def hidden_states(self, prompts, layers, pooling="last"):
        self.log.append(("pooling", pooling))
        states = super().hidden_states(prompts, layers)
        if pooling == "last":
            states[:, :, 0] = 0.0
        return states


def aligned(tmp_path, judge_class, log):
    """``align`` on :func:`labels` with one fake judge of ``judge_class``: its profile file, the
    profile, the model's report and its head."""
    out = tmp_path / "profile.yaml"
    prof = build_profile(labels(tmp_path), [spec("A", engine="transformers")], out,
                         judge=AspectCritic("right", "The answer is right."), calibrate=False, use_cache=False,
                         engine_factory=lambda s: judge_class(s, log))  # fmt: skip
    (report,), (head,) = prof.decisions, prof.heads
    return out, prof, report, head


def test_align_keeps_a_head_on_the_response_mean_where_it_wins_and_the_run_reads_the_response_mean(tmp_path):
    log: list = []
    out, prof, report, head = aligned(tmp_path, Pooled, log)
    assert report.winner.endswith(" over the response") and head.pooling == "response"
    kappas = {w.way: w.kappa for w in report.ways}
    assert kappas["head layer 3 over the response"] == 1.0 and kappas["head layer 3"] < 0.5
    assert load_profile(out) == prof and ("pooling", "last") in log and ("pooling", "response") in log
    log.clear()
    record = {"id": "r1", "user_input": "Question 99?", "response": "Answer 99 is right."}
    run = evaluate([record], [], profile=out, models=[spec("A", engine="transformers")], use_cache=False,
                   engine_factory=lambda s: Pooled(s, log))  # fmt: skip
    result = next(iter(run.iter_results()))
    (a,) = result.models
    assert ("pooling", "response") in log and a.head.pooling == "response" and a.verdict == 1
    assert "over the response: p " in shown(result)


def test_an_engine_without_hidden_states_refuses_a_head_and_align_keeps_prompting(tmp_path):
    class NoHidden(Hidden):
        name = "server"
        block_count = BatchEngine.block_count
        hidden_states = BatchEngine.hidden_states

    log: list = []
    engine = NoHidden(spec("A"), log)
    for after_reason in (False, True):  # refused before any token is drawn
        head = fit_head(*synthetic(dim=3), 1, BINDING, after_reason=after_reason)
        with pytest.raises(ConfigError, match="the server engine gives no hidden states"):
            engine.decide(GenerateCall(["p"], 1, Sampling(0.7, 1.0, 64, 0), {}), head)
    assert log == []
    prof = build_profile(labels(tmp_path), [spec("A", engine="transformers")], tmp_path / "p.yaml",
                         judge=AspectCritic("right", "The answer is right."), calibrate=False, use_cache=False,
                         engine_factory=lambda s: NoHidden(s, []))  # fmt: skip
    (report,) = prof.decisions
    assert prof.heads == [] and report.winner.startswith("zero-shot ") and "gives no hidden states" in report.why


def test_a_profile_refuses_two_heads_for_one_model_or_a_head_for_another_criterion():
    head = fit_head(*synthetic(dim=3), 1, BINDING).model_dump()
    base = {"criterion": {"name": "right", "definition": "Right?"}}
    with pytest.raises(ValueError, match="one decision head per model"):
        JudgeProfile.model_validate({**base, "heads": [head, head]})
    with pytest.raises(ValueError, match="fitted for another criterion"):
        JudgeProfile.model_validate({**base, "criterion": {"name": "r", "definition": "Other"}, "heads": [head]})
    assert JudgeProfile.model_validate({**base, "heads": [head]}).heads[0] == DecisionHead.model_validate(head)


class Reasoning(Hidden):
    """A judge whose prompt's states say nothing of the answer; after it has written its reason, the
    state says what the reason says (the answer is right or wrong), though the verdict it then
    writes is always 0."""

    def hidden_states(self, prompts, layers, pooling="last"):
        self.log.append(("states", pooling, [p.endswith('"verdict": ') for p in prompts]))
        states = super().hidden_states(prompts, layers)
        for state, prompt in zip(states, prompts, strict=True):
            _, _, written = prompt.rpartition("</response>")
            state[:, 0] = 1.0 if "It is right" in written else -1.0 if "It is wrong" in written else 0.0
        return states

    def _generate(self, call):
        self.log.append(("generate", len(call.prompts), call.n, call.sampling.temperature))
        said = ["It is right." if "is right" in p.rsplit("<response>", 1)[-1] else "It is wrong." for p in call.prompts]
        return [[Completion(judgment(0, reason), 9, True, (0.2,))] for reason in said]


def test_align_keeps_a_head_after_the_reason_where_it_wins_and_the_run_keeps_the_reason_it_decided_after(tmp_path):
    log: list = []
    out, prof, report, head = aligned(tmp_path, Reasoning, log)
    assert report.winner.endswith(" after the reason") and head.after_reason and head.pooling == "last"
    kappas = {w.way: w.kappa for w in report.ways}
    assert kappas["head layer 3 after the reason"] == 1.0 and kappas["head layer 3"] < 0.5
    assert kappas["head layer 3 over the response"] < 0.5 and load_profile(out) == prof
    assert ("generate", 48, 1, 0.0) in log  # one greedy answer a labeled record, read up to its verdict
    assert ("states", "last", [True] * 48) in log
    log.clear()
    records = [{"id": "r1", "user_input": "Question 99?", "response": "Answer 99 is right."},
               {"id": "r2", "user_input": "Question 98?", "response": "Answer 98 is wrong."}]  # fmt: skip
    run = evaluate(records, [], profile=out, models=[spec("A", engine="transformers")], use_cache=False,
                   engine_factory=lambda s: Reasoning(s, log), strictness=3)  # fmt: skip
    results = {r.record_id: r for r in run.iter_results()}
    (a,), (b,) = results["r1"].models, results["r2"].models
    assert (a.verdict, a.votes, a.reasons, a.drawn) == (1, [1], ["It is right."], 1) and a.head.after_reason
    assert (b.verdict, b.reasons) == (0, ["It is wrong."]) and a.p_pass == [a.head.probability]
    assert [e for e in log if e[0] == "generate"] == [("generate", 2, 1, 0.0)]  # greedy, whatever the run's k
    assert "after the reason: p " in shown(results["r1"]) and "- It is right." in shown(results["r1"])


def test_a_head_after_the_reason_abstains_where_the_judge_wrote_no_verdict(tmp_path):
    class Rambling(Reasoning):
        def _generate(self, call):
            return [[Completion('{"reason": "It is right, and', 64, False, None)] for _ in call.prompts]

    x, gold, groups = synthetic(dim=3)
    binding = BINDING.model_copy(update={"criterion": "The answer is right.", "engine": "transformers"})
    from localjury.engines import model_identity

    model = spec("A", engine="transformers")
    bound = binding.model_copy(update={"weights_sha256": model_identity(model)})
    head = fit_head(x, gold, groups, 2, bound, after_reason=True)
    prof = JudgeProfile.model_validate({"criterion": {"name": "right", "definition": "The answer is right."},
                                        "heads": [head.model_dump()]})  # fmt: skip
    record = [{"id": "r1", "user_input": "Q?", "response": "Answer is right."}]
    run = evaluate(record, [], profile=prof, models=[model], use_cache=False, engine_factory=lambda s: Rambling(s, []))
    (a,) = next(iter(run.iter_results())).models
    assert (a.verdict, a.abstentions) == (None, 1) and "no verdict for its head to decide at" in a.error
    assert "It is right, and" in a.error


def test_the_prefix_a_head_after_the_reason_reads_ends_at_the_verdict_key_not_at_a_quoted_one():
    tricky = json.dumps({"reason": 'It writes "verdict": 1 in its text.', "verdict": 0})
    assert verdict_prefix(tricky) == tricky[: tricky.rindex("0")]
    assert verdict_prefix('{"reason":"x","verdict" :\n1}') == '{"reason":"x","verdict" :\n'
    assert verdict_prefix('{"reason": "It is right, and') is None
