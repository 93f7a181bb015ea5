"""Calibration: thresholds and Platt scaling on synthetic scores with a known answer, the
held-out (k-fold) figures of `calibrate`, and a run that applies the file."""

import json
from pathlib import Path

import pytest

pytest.importorskip("sklearn")

from localjury import AspectCritic, evaluate
from localjury.bench.calibrate import calibrate
from localjury.engines.base import Completion
from localjury.errors import ConfigError
from localjury.votes.calibration import CalibrationFile, cross_validated, fit, fit_threshold, load_calibration
from tests.fakes import factory, judgment, spec


def test_the_threshold_with_the_best_balanced_accuracy():
    # Perfectly separable around 0.75: the midpoint between the classes' nearest scores.
    assert fit_threshold([0.5, 0.6, 0.7, 0.8, 0.9, 0.95], [0, 0, 0, 1, 1, 1]) == pytest.approx(0.75)
    # Any threshold in [0.3, 0.7) is perfect: the nearest 0.5 wins.
    assert fit_threshold([0.1, 0.2, 0.3, 0.7, 0.8, 0.9], [0, 0, 0, 1, 1, 1]) == 0.5
    # Imbalanced: 1 positive in 5; balanced accuracy picks the cut that keeps it.
    assert fit_threshold([0.2, 0.3, 0.4, 0.45, 0.42], [0, 0, 0, 1, 0]) == pytest.approx((0.42 + 0.45) / 2)


def test_platt_scaling_moves_scores_toward_the_labels():
    scores = [0.6, 0.62, 0.65, 0.7, 0.8, 0.85, 0.88, 0.9] * 3
    gold = [0, 0, 0, 0, 1, 1, 1, 1] * 3
    cal = fit("m", "x", "p_pass", scores, gold)
    assert cal.a > 0  # higher raw score, higher calibrated score
    assert cal.calibrated(0.6) < 0.5 < cal.calibrated(0.9)
    assert [cal.verdict(s) for s in scores[:8]] == gold[:8]


def test_cross_validation_never_scores_a_record_with_a_fit_that_saw_it():
    scores = [0.1, 0.2, 0.3, 0.4, 0.6, 0.7, 0.8, 0.9]
    gold = [0, 0, 0, 0, 1, 1, 1, 1]
    k, held = cross_validated(scores, gold, folds=4, seed=0)
    assert k == 4 and len(held) == 8
    assert all(int(c > t) == g for (c, t), g in zip(held, gold, strict=True))
    with pytest.raises(ConfigError, match="at least 2 labelled records of each label"):
        cross_validated([0.1, 0.9, 0.8], [0, 1, 1])


def labelled(tmp_path, n=12):
    """Gold 1 on even records. The judge votes 1 on all of them (uncalibrated: half wrong) but
    gives gold-1 records p_pass 0.85-0.9 and gold-0 records 0.6-0.65."""
    path = tmp_path / "labels.jsonl"
    rows = [{"id": f"r{i}", "response": f"answer {i}", "gold": int(i % 2 == 0)} for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def respond(model, prompt, j):
    number = int(prompt.rsplit("answer ", 1)[1].split("\n", 1)[0])
    p = (0.85 if number % 2 == 0 else 0.6) + 0.05 * (number % 3 == 0)
    return Completion(judgment(1), 5, True, (p,))


def test_calibrate_fits_measures_held_out_and_a_run_applies_it(tmp_path):
    labels = labelled(tmp_path)
    out = tmp_path / "cal.json"
    result = calibrate(labels, [spec("A")], out, metric='good="The answer is good."', strictness=1,
                       folds=3, use_cache=False, engine_factory=factory(respond, []))  # fmt: skip
    (cal,) = result.calibrators
    assert (cal.model, cal.metric, cal.source, cal.records, cal.positives) == ("A", "good", "p_pass", 12, 6)
    held = cal.held_out
    assert held["folds"] == 3 and held["uncalibrated"]["accuracy"] == 0.5
    assert held["calibrated"]["accuracy"] == 1.0 and held["calibrated"]["kappa"] == 1.0
    assert load_calibration(out)[0] == result
    # A run with the file: the calibrated verdicts follow the labels, the votes do not.
    records = [{"id": f"r{i}", "response": f"answer {i}"} for i in range(4)]
    metric = AspectCritic("good", "The answer is good.")
    run = evaluate(records, [metric], [spec("A")], calibration=out, use_cache=False,
                   engine_factory=factory(respond, []))  # fmt: skip
    rows = list(run.iter_results())
    assert [r.models[0].verdict for r in rows] == [1, 0, 1, 0]
    assert all(r.models[0].calibrated and r.models[0].votes == [1] for r in rows)
    assert run.manifest.settings["calibration"][0]["metric"] == "good"


def test_calibrating_again_merges_and_a_run_needs_every_fit(tmp_path):
    labels = labelled(tmp_path)
    out = tmp_path / "cal.json"
    for model in ("A", "B"):
        calibrate(labels, [spec(model)], out, metric='good="The answer is good."', strictness=1, folds=2,
                  use_cache=False, engine_factory=factory(respond, []))  # fmt: skip
    assert [c.model for c in load_calibration(out)[0].calibrators] == ["A", "B"]
    metric = AspectCritic("other", "Something else.")
    with pytest.raises(ConfigError, match="no fit for A/other"):
        evaluate([{"response": "x"}], [metric], [spec("A")], calibration=out, use_cache=False,
                 engine_factory=factory(respond, []))  # fmt: skip


@pytest.mark.parametrize("suffix", ["", "-wal", "-shm", "-journal"])
def test_calibrate_never_overwrites_the_judgment_store(tmp_path, monkeypatch, suffix):
    """Refused before any model loads (not after judging, over the store)."""
    from localjury.store import JudgmentStore

    store_path = tmp_path / "cal.json"
    store = JudgmentStore(store_path)
    store.put_many({"k": "a generation"})
    store.close()
    target = Path(f"{store_path}{suffix}")
    if suffix:
        target.write_bytes(b"sqlite's own")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    monkeypatch.setenv("LOCALJURY_CACHE", str(store_path))
    log: list = []
    with pytest.raises(ConfigError, match=rf"the calibration file {target} would overwrite the judgment store"):
        calibrate(labelled(tmp_path), [spec("A")], target, metric='good="The answer is good."', strictness=1,
                  engine_factory=factory(respond, log))  # fmt: skip
    assert log == []
    assert before == {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.name in before}


def test_calibrate_refuses_its_labels_and_models_yaml(tmp_path):
    labels = labelled(tmp_path)
    for target, what in ((labels, "labels"), (tmp_path / "models.yaml", "models.yaml")):
        (tmp_path / "models.yaml").write_text("models: {}\n")
        with pytest.raises(ConfigError, match=f"would overwrite the {what}"):
            calibrate(labels, [spec("A")], target, metric='good="x"', registry=tmp_path / "models.yaml",
                      use_cache=False, engine_factory=factory(respond, []))  # fmt: skip


def test_a_file_that_is_no_calibration_is_refused(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"version": 1, "calibrators": "no"}')
    with pytest.raises(ConfigError, match="is not a calibration file"):
        load_calibration(bad)
    assert CalibrationFile(localjury_version="x", calibrators=[]).lookup("A", "x") is None


def test_calibration_never_reverses_a_judge():
    # The judge scores gold-0 records higher: an inverted fit would look good; the fit is flat.
    scores = [0.9, 0.85, 0.8, 0.2, 0.15, 0.1, 0.3, 0.7]
    gold = [0, 0, 0, 1, 1, 1, 1, 0]
    cal = fit("m", "x", "p_pass", scores, gold)
    assert cal.a == 0.0 and cal.calibrated(0.9) == pytest.approx(0.5) == pytest.approx(cal.calibrated(0.1))
