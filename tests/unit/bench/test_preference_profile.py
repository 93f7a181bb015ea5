"""Preference heads from labeled pairs: `align` on pairs fits one per model and keeps it only where
it beats the prompted pairwise judge; a run with the pairwise profile decides by it, position-free
(a small BatchEngine with synthetic hidden states; the real engines' are in
tests/integration/engines/test_hidden_states.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.special import expit

from localjury import AspectCritic, evaluate
from localjury.bench.align import build_profile
from localjury.bench.decision_ways import SURFACE
from localjury.engines.base import Completion, GenerateCall
from localjury.errors import ConfigError
from localjury.metrics.preference_critic import PreferenceCritic, side
from localjury.metrics.profile import JudgeProfile, load_profile
from localjury.records.record import Record
from localjury.votes.heads import fit_head
from localjury.votes.preference import fit_preference, preferred
from tests.fakes import spec
from tests.unit.bench.test_heads import BINDING, Hidden, synthetic
from tests.unit.votes.test_preference import pairs as synthetic_pairs

RIGHT = AspectCritic("right", "The answer is right.")


class AlwaysA(Hidden):
    """As :class:`Hidden`, and asked the pairwise question it always prefers the first response shown."""

    def _generate(self, call: GenerateCall):
        self.log.append(("generate", len(call.prompts), call.n))
        text = json.dumps({"reason": "the first one", "preferred": "A"})
        return [[Completion(text, 5, True, (0.9,))] * call.n for _ in call.prompts]


def pair_labels(tmp_path, n=48, longer=""):
    """Pairs of a right and a wrong answer to one question (as long, unless the wrong one has
    ``longer`` after it), the right one first in every other pair."""
    path = tmp_path / "pairs.jsonl"
    rows = []
    for q in range(n):
        right, wrong = f"Answer {q} is right.", f"Answer {q} is wrong.{longer}"
        a, b = (right, wrong) if q % 2 else (wrong, right)
        rows.append({"id": f"p{q}", "user_input": f"Question {q}?", "response_a": a, "response_b": b, "gold": q % 2})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def aligned(tmp_path, log, n=48, longer="", **settings):
    models = [spec("A", engine="transformers")]
    return build_profile(pair_labels(tmp_path, n, longer), models, tmp_path / "p.yaml", judge=RIGHT, use_cache=False,
                         engine_factory=lambda s: AlwaysA(s, log), **settings)  # fmt: skip


def test_align_on_pairs_keeps_a_preference_head_that_beats_the_prompted_judge_and_the_run_decides_by_it(tmp_path):
    log: list = []
    prof = aligned(tmp_path, log)
    assert load_profile(tmp_path / "p.yaml") == prof and prof.pairwise and prof.examples == []
    (report,) = prof.decisions
    ways = {w.way: w for w in report.ways}
    # always "A" in both orders: every pair an even split, no pick, and no kappa to beat
    assert ways["pairwise votes"].records == 0 and ways["pairwise votes"].kappa is None
    assert report.winner.startswith("head layer") and ways[report.winner].accuracy == 1.0
    assert ways[SURFACE].accuracy is not None and ways[SURFACE].accuracy < 0.8 and report.artifact is None
    (head,) = prof.heads
    assert head.preference and head.labels == 48 and head.binding.criterion == RIGHT.definition
    assert ("generate", 96, 3) not in log and ("hidden", 48, [1, 2, 3]) in log  # each side of each pair once

    right, wrong = "Answer 99 is right.", "Answer 99 is wrong."
    pairs = [Record(id="x", user_input="Question 99?", response_a=right, response_b=wrong),
             Record(id="y", user_input="Question 99?", response_a=wrong, response_b=right)]  # fmt: skip
    log.clear()
    run = evaluate(pairs, [], profile=tmp_path / "p.yaml", models=[spec("A", engine="transformers")], use_cache=False,
                   engine_factory=lambda s: AlwaysA(s, log))  # fmt: skip
    x, y = (next(r for r in run.iter_results() if r.record_id == i) for i in "xy")
    (mx,), (my,) = x.models, y.models
    assert (mx.verdict, my.verdict, x.score, y.score) == (1, 0, 1.0, 0.0)
    assert mx.p_pass == [mx.head.probability] and mx.head.probability > 0.9
    assert my.head.probability == pytest.approx(1 - mx.head.probability, abs=1e-12)  # swapped: 1 - p
    # nothing sampled; the two pairs share their two responses, each read once
    assert not [e for e in log if e[0] == "generate"] and log == [("hidden", 2, [head.layer])]

    log.clear()  # --with-reasons: the prompted samples of both orders beside the decision, in the record's frame
    run = evaluate(pairs[:1], [], profile=tmp_path / "p.yaml", models=[spec("A", engine="transformers")],
                   use_cache=False, engine_factory=lambda s: AlwaysA(s, log), strictness=2,
                   with_reasons=True)  # fmt: skip
    (m,) = next(iter(run.iter_results())).models
    assert (m.verdict, m.votes, m.head.votes, m.head.reasons) == (1, [1], [1, 1, 0, 0], ["the first one"] * 4)
    assert ("generate", 2, 2) in log


def test_align_on_pairs_warns_where_the_responses_lengths_alone_pick_the_better_one(tmp_path):
    (report,) = aligned(tmp_path, [], longer=" Sadly so, I am afraid.").decisions
    length = next(w for w in report.ways if w.way == SURFACE)
    assert length.accuracy == 1.0 and "its gain could come from length" in report.artifact
    assert report.artifact.startswith("the length of the two responses alone (length only: kappa 1.000")


def test_a_jury_mixes_a_preference_head_with_a_prompted_model(tmp_path):
    prof = aligned(tmp_path, [])
    pair = [Record(id="x", user_input="Q?", response_a="Answer is right.", response_b="Answer is wrong.")]
    models = [spec("A", engine="transformers"), spec("B", engine="transformers")]
    run = evaluate(pair, [], profile=prof, models=models, use_cache=False, engine_factory=lambda s: AlwaysA(s, []))
    result = next(iter(run.iter_results()))
    a, b = result.models
    assert a.head is not None and a.verdict == 1
    assert b.head is None and b.order_votes == {"AB": [1], "BA": [1]} and b.verdict is None  # A, then A: even split
    assert result.score == 1.0  # the mean of the models that decided


def test_too_few_pairs_fit_no_head_and_the_profile_keeps_the_pairwise_question(tmp_path):
    log: list = []
    prof = aligned(tmp_path, log, n=10)
    (report,) = prof.decisions
    assert prof.heads == [] and report.winner == "pairwise votes" and "10 labeled pairs" in report.why
    assert log == []  # nothing loaded
    assert type(prof.metric()) is PreferenceCritic


def test_align_on_pairs_refuses_evidence_and_no_heads_and_the_mode_names_what_a_file_holds(tmp_path):
    quoting = AspectCritic("right", "The answer is right.", evidence=True)
    with pytest.raises(ConfigError, match="--evidence quotes"):
        build_profile(pair_labels(tmp_path), ["A"], tmp_path / "p.yaml", judge=quoting)
    with pytest.raises(ConfigError, match="--no-heads would leave it nothing"):
        build_profile(pair_labels(tmp_path), ["A"], tmp_path / "p.yaml", judge=RIGHT, heads=False)
    # pairs read pointwise: each lacks a response; records read as pairs: each lacks the two responses
    with pytest.raises(ConfigError, match="record 'p0', field 'response'"):
        build_profile(pair_labels(tmp_path), ["A"], tmp_path / "p.yaml", judge=RIGHT, mode="pointwise", heads=False)
    single = tmp_path / "single.jsonl"
    single.write_text(json.dumps({"id": "s0", "user_input": "Q?", "response": "A.", "gold": 1}) + "\n")
    with pytest.raises(ConfigError, match="record 's0' has no response_a and response_b"):
        build_profile(single, ["A"], tmp_path / "p.yaml", judge=RIGHT, mode="pairwise")


def test_a_pairwise_profile_holds_preference_heads_only_and_a_yes_no_profile_none():
    a, b, a_better, ids = synthetic_pairs()
    preference = fit_preference(a, b, a_better, ids, 2, BINDING).model_dump()
    yes_no = fit_head(*synthetic(), 2, BINDING).model_dump()
    base = {"criterion": {"name": "right", "definition": "Right?"}}
    with pytest.raises(ValueError, match="a pairwise profile holds preference heads only"):
        JudgeProfile.model_validate({**base, "pairwise": True, "heads": [yes_no]})
    with pytest.raises(ValueError, match="a yes/no profile holds yes/no heads only"):
        JudgeProfile.model_validate({**base, "heads": [preference]})
    example = {"id": "e", "response": "r", "gold": 1}
    with pytest.raises(ValueError, match="no examples, calibrators or jury"):
        JudgeProfile.model_validate({**base, "pairwise": True, "examples": [example]})


def test_a_preference_heads_probabilities_give_the_bradley_terry_preference_and_stay_finite():
    a, b, a_better, ids = synthetic_pairs()
    head = fit_preference(a, b, a_better, ids, [2, 5], BINDING)
    assert head.preference and (head.layer, head.more_layers) == (2, [5]) and head.labels == len(ids)
    w = np.asarray(head.weights)
    for x, y in zip(a[:5], b[:5], strict=True):
        # the bias (centring the rewards) cancels: the preference is the head on the difference
        assert preferred(head.probability(x), head.probability(y)) == pytest.approx(expit((x - y) @ w), abs=1e-9)
    rewards = np.concatenate([a, b]) @ w + head.bias
    assert abs(rewards.mean()) < 1e-9  # centred on the labeled responses
    assert preferred(1.0, 0.3) > 0.99 and preferred(0.3, 1.0) < 0.01 and preferred(1.0, 1.0) == 0.5
    assert preferred(0.8, 0.1) + preferred(0.1, 0.8) == pytest.approx(1.0, abs=1e-15)


def test_a_side_of_a_pair_is_the_pointwise_record_its_head_reads():
    pair = Record(id="p", user_input="Q?", response_a="one", response_b="two", reference="ref")
    assert side(pair, "response_b") == Record(id="p [response_b]", user_input="Q?", response="two", reference="ref")
