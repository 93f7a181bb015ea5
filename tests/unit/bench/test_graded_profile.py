"""Graded heads from scored records: `align --rubric` fits one per model and keeps it only where it
beats the prompted rubric by Spearman's rho; a run with the graded profile scores by it (a small
BatchEngine with synthetic hidden states; the real engines' are in
tests/integration/engines/test_hidden_states.py)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from localjury import evaluate
from localjury.bench.align import build_profile
from localjury.bench.align_graded import EXPECTED, PROMPTED
from localjury.bench.decision_ways import SURFACE
from localjury.engines.base import Completion, GenerateCall
from localjury.errors import ConfigError
from localjury.metrics.graded_critic import GradedCritic
from localjury.metrics.profile import JudgeProfile, load_profile
from localjury.metrics.rubric import Rubric
from localjury.records.record import Record
from tests.fakes import run_cli, spec
from tests.unit.bench.test_heads import Hidden, shown

GOOD = Rubric("good", "How good the answer is.", ["bad", "poor", "fair", "good", "great"], strictness=2)


class Graded(Hidden):
    """A judge whose hidden state's first number is the quality its record's response states
    (plus noise); asked the rubric, it always writes 3, its expected score 3.7."""

    def hidden_states(self, prompts, layers, pooling="last"):
        self._check_layers(layers)
        self.log.append(("hidden", len(prompts), list(layers)))
        noise = np.random.default_rng(len(prompts)).normal(scale=0.3, size=len(prompts))
        levels = [int(re.findall(r"quality (\d)", p.rsplit("<response>", 1)[-1])[0]) for p in prompts]
        rows = [[level + e, 0.5, len(p) % 7 / 7] for level, e, p in zip(levels, noise, prompts, strict=True)]
        return np.asarray([[row] * len(layers) for row in rows], np.float32)

    def _generate(self, call: GenerateCall):
        self.log.append(("generate", len(call.prompts), call.n))
        text = json.dumps({"reason": "middling", "score": 3})
        return [[Completion(text, 5, True, (0.1, 0.1, 0.2, 0.2, 0.4))] * call.n for _ in call.prompts]


def scored(tmp_path, n=50, **extra):
    """Records of one question each, the response stating its quality, scored by it (1..5)."""
    path = tmp_path / "scores.jsonl"
    rows = [{"id": f"r{i}", "user_input": f"Question {i}?", "response": f"Answer {i}: quality {i % 5 + 1}.",
             "score": i % 5 + 1, **extra} for i in range(n)]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def aligned(tmp_path, log, n=50, **settings):
    models = [spec("A", engine="transformers")]
    return build_profile(scored(tmp_path, n), models, tmp_path / "p.yaml", judge=GOOD, use_cache=False,
                         engine_factory=lambda s: Graded(s, log), **settings)  # fmt: skip


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """One graded profile aligned on 50 scored records, its folder, and what its engine was asked."""
    folder, log = tmp_path_factory.mktemp("graded"), []
    return aligned(folder, log), folder, log


def test_align_on_scores_keeps_a_graded_head_that_beats_the_prompted_rubric_and_the_run_scores_by_it(built):
    prof, tmp_path, asked = built
    log = list(asked)
    assert load_profile(tmp_path / "p.yaml") == prof and prof.examples == [] and not prof.pairwise
    assert prof.rubric is not None and prof.rubric.levels == list(GOOD.levels)
    (report,) = prof.decisions
    ways = {w.way: w for w in report.ways}
    assert ways[PROMPTED].spearman is None and ways[EXPECTED].spearman is None  # always 3: a constant says nothing
    assert report.winner.startswith("head layer") and ways[report.winner].spearman > 0.9
    assert ways[SURFACE].spearman is None or ways[SURFACE].spearman < 0.5
    assert report.artifact is None and ways["head layer 3 over the response"].spearman is not None
    (head,) = prof.heads
    assert head.levels == 5 and head.labels == 50 and head.binding.criterion == GOOD.rubric_text()
    assert ("generate", 50, 2) in log and ("hidden", 50, [1, 2, 3]) in log  # graded once, read once

    records = [Record(id=f"x{q}", user_input="Question?", response=f"Answer: quality {q}.") for q in (1, 5)]
    log.clear()
    run = evaluate(records, [], profile=tmp_path / "p.yaml", models=[spec("A", engine="transformers")],
                   use_cache=False, engine_factory=lambda s: Graded(s, log))  # fmt: skip
    low, high = (next(r for r in run.iter_results() if r.record_id == i) for i in ("x1", "x5"))
    (ml,), (mh,) = low.models, high.models
    assert ml.head.score == ml.scale_score == low.rubric.score and ml.scale_score < 2 < 4 < mh.scale_score <= 5
    assert mh.score == pytest.approx((mh.scale_score - 1) / 4) and (ml.verdict, mh.verdict) == (0, 1)
    assert mh.scores == [round(mh.scale_score)] and mh.head.probability is None and mh.reasons == [None]
    assert not [e for e in log if e[0] == "generate"]  # nothing sampled
    assert f"decided by its head on layer {head.layer}: score {mh.scale_score:.2f} (hidden states" in shown(high)
    assert f"A: verdict 1, score {round(mh.score, 3)}\n" in shown(high)  # rounded, as the record's score
    assert run.manifest.metrics[0]["kind"] == "graded" and run.manifest.metrics[0]["profile"]["sha256"]

    log.clear()  # --with-reasons: the rubric's samples beside the decision, not counted
    run = evaluate(records[1:], [], profile=prof, models=[spec("A", engine="transformers")], use_cache=False,
                   engine_factory=lambda s: Graded(s, log), strictness=2, with_reasons=True)  # fmt: skip
    (m,) = next(iter(run.iter_results())).models
    assert m.head.votes == [1, 1] and m.head.reasons == ["middling"] * 2 and m.scale_score > 4
    assert ("generate", 1, 2) in log


def test_a_jury_mixes_a_graded_head_with_a_prompted_model(built):
    prof, _, _ = built
    record = [Record(id="x", user_input="Q?", response="Answer: quality 5.")]
    models = [spec("A", engine="transformers"), spec("B", engine="transformers")]
    run = evaluate(record, [], profile=prof, models=models, use_cache=False, engine_factory=lambda s: Graded(s, []))
    result = next(iter(run.iter_results()))
    a, b = result.models
    assert a.head is not None and b.head is None and b.scores == [3, 3] and b.scale_score == 3  # the profile's k=2
    assert result.score == pytest.approx((a.score + b.score) / 2)  # the mean of the models' normalised scores


def test_too_few_scores_fit_no_head_and_the_profile_keeps_the_prompted_rubric(tmp_path):
    log: list = []
    prof = aligned(tmp_path, log, n=20)
    (report,) = prof.decisions
    assert prof.heads == [] and report.winner == PROMPTED and "20 scored records" in report.why
    assert log == []  # nothing loaded
    assert isinstance(prof.metric(), GradedCritic) and prof.metric().heads == {}


def test_a_model_whose_expected_score_won_is_scored_by_it_in_a_run_with_the_profile(tmp_path):
    prof = aligned(tmp_path, [], n=20)  # no head: prompting decides
    record = [Record(id="x", user_input="Q?", response="Answer: quality 5.")]
    for winner, scale in ((PROMPTED, 3.0), (EXPECTED, 3.7)):
        (decision,) = prof.decisions
        chose = prof.model_copy(update={"decisions": [decision.model_copy(update={"winner": winner})]})
        run = evaluate(record, [], profile=chose, models=[spec("A", engine="transformers")], use_cache=False,
                       engine_factory=lambda s: Graded(s, []))  # fmt: skip
        (m,) = next(iter(run.iter_results())).models
        assert m.head is None and m.scores == [3, 3] and m.scale_score == pytest.approx(scale)


def test_scores_off_the_scale_are_refused_naming_the_line(tmp_path):
    path = scored(tmp_path, 3)
    path.write_text(path.read_text() + json.dumps({"id": "z", "response": "quality 2", "score": 6}) + "\n")
    with pytest.raises(ConfigError, match=r"line 4: field 'score' must be a number within 1..5, got 6"):
        build_profile(path, [spec("A")], tmp_path / "p.yaml", judge=GOOD, use_cache=False)
    with pytest.raises(ConfigError, match="a jsonl file of scored records"):
        build_profile(path, [spec("A")], tmp_path / "p.yaml", judge=GOOD, fmt="truthfulqa")
    assert not (tmp_path / "p.yaml").exists()


def test_a_graded_profile_holds_graded_heads_of_its_own_levels_only(built):
    prof, _, _ = built
    data = prof.model_dump(mode="json")
    (head,) = data["heads"]
    for change, error in (
        ({"heads": [{**head, "levels": None}]}, "a graded profile holds graded heads only"),
        ({"rubric": {**data["rubric"], "levels": data["rubric"]["levels"][:4]}}, "fitted for another criterion"),
        ({"pairwise": True}, "not both"),
    ):
        with pytest.raises(ValueError, match=error):
            JudgeProfile.model_validate({**data, **change})


def test_the_cli_aligns_a_rubric_of_a_rubric_file_and_refuses_a_criterion_beside_it(tmp_path, monkeypatch, capsys):
    rubrics = tmp_path / "rubrics.yaml"
    rubrics.write_text("rubrics:\n  - name: good\n    version: 1\n    criterion: How good it is.\n"
                       "    levels: {1: bad, 2: fair, 3: good}\n")  # fmt: skip
    out = tmp_path / "p.yaml"
    code, _, err = run_cli(monkeypatch, capsys, "align", scored(tmp_path, 3), "--rubric", "good", "--rubrics", rubrics,
                           "-c", "Is it good?", "-o", out)  # fmt: skip
    assert code == 2 and "--criterion, --metric and --evidence are a yes/no criterion's" in err
    code, _, err = run_cli(monkeypatch, capsys, "align", scored(tmp_path, 3), "--rubric", "bad", "--rubrics", rubrics,
                           "-o", out)  # fmt: skip
    assert code == 2 and "has no rubric named 'bad'" in err
    path = scored(tmp_path, 3)
    path.write_text(path.read_text().replace('"score": 3', '"score": 2'))
    code, stdout, err = run_cli(monkeypatch, capsys, "align", path, "--rubric", "good", "--rubrics", rubrics,
                                "--models", "smollm2-135m-instruct", "-o", out)  # fmt: skip
    assert code == 0, err
    prof = load_profile(out)
    assert prof.rubric.levels == ["bad", "fair", "good"] and prof.criterion.definition == "How good it is."
    assert "3 scored records on 2 levels" in stdout and "graded heads: none" in stdout
