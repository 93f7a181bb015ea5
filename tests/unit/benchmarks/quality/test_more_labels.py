"""benchmarks/quality/more_labels.py: its ways scored over every record and over the bench run's
records alone, checked against scikit-learn directly (no model is run)."""

import sys

import numpy as np
from sklearn.metrics import cohen_kappa_score, roc_auc_score

from tests import ROOT
from tests.unit.benchmarks.scripts import load

sys.path.insert(0, str(ROOT / "benchmarks" / "quality"))  # its sibling scripts, first on sys.path when it runs
ml = load("quality/more_labels.py")


def test_each_way_is_scored_on_every_record_and_on_the_first_ones_alone(monkeypatch):
    rng = np.random.default_rng(0)
    n, first = 60, 20
    gold = [int(v) for v in rng.integers(0, 2, n)]
    groups = [f"q{i}" for i in range(n)]
    states = {"last": rng.normal(size=(n, len(ml.LAYERS), 4)), "response": rng.normal(size=(n, len(ml.LAYERS), 4))}
    # out-of-fold probabilities as given, so that the figures can be recomputed here
    probabilities = [float(v) for v in rng.random(n)]
    monkeypatch.setattr(ml, "cross_validated", lambda *a, **k: probabilities)
    found = ml.ways(states, gold, groups, first)
    together = "+".join(str(i) for i in ml.LAYERS)
    assert set(found) == {f"{p}:{b}" for p in states for b in [*map(str, ml.LAYERS), together]}
    way = found[f"response:{together}"]
    cut = [int(p >= 0.5) for p in probabilities]
    assert abs(way["all"]["kappa"] - cohen_kappa_score(gold, cut)) < 1e-9
    assert abs(way["bench"]["kappa"] - cohen_kappa_score(gold[:first], cut[:first])) < 1e-9
    assert abs(way["all"]["auroc"] - roc_auc_score(gold, probabilities)) < 1e-9
    assert abs(way["bench"]["accuracy"] - np.mean(np.array(gold[:first]) == np.array(cut[:first]))) < 1e-9


def test_the_page_puts_prompting_beside_each_way_on_the_bench_records():
    figure = {"kappa": 0.41, "kappa_ci": [0.3, 0.5], "accuracy": 0.8, "auroc": 0.75}
    figures = {
        "set": "halueval-general", "model": "m", "engine": "llamacpp", "cpu": "Intel Xeon", "command": "python x",
        "records": 600, "bench_records": 100, "groups": 590, "positives": 480,
        "zero_shot_votes_k3": {"kappa": 0.33, "kappa_ci": [0.08, 0.56], "accuracy": 0.83},
        "length_auroc": 0.58, "prefill_seconds": {"last": 300.0, "response": 310.0},
        "ways": {"response:3": {"pooling": "response", "blocks": "3", "all": figure, "bench": figure}},
        "best": "response:3", "learning_curve": {50: {"kappa": 0.2, "sd": 0.1, "draws": 20}},
    }  # fmt: skip
    page = ml.markdown(figures)
    assert "| zero-shot votes (k=3) | - | - | - | 0.33 [0.08, 0.56] | 0.83 |" in page
    assert "| head, block 3, response mean | 0.41 [0.30, 0.50] | 0.80 | 0.75 | 0.41 [0.30, 0.50] | 0.80 |" in page
    assert "50 labels: 0.20 ± 0.10" in page
