"""Scale statistics: each figure against scipy's or scikit-learn's own, intervals, edge cases."""

import math

import numpy as np
import pytest
from scipy.stats import kendalltau, spearmanr
from sklearn.metrics import cohen_kappa_score

from localjury.bench.scales import (
    kendalls,
    preference_accuracy,
    quadratic_kappas,
    scale_agreement,
    spearmans,
)

RNG = np.random.default_rng(7)
GOLD = RNG.integers(1, 6, size=60)
NOISY = np.clip(GOLD + RNG.integers(-1, 2, size=60), 1, 5)
EXPECTED = GOLD + RNG.normal(0, 0.7, size=60)


@pytest.mark.parametrize("pred", [NOISY, RNG.integers(1, 6, size=60), 6 - GOLD])
def test_each_statistic_equals_the_library_figure(pred):
    assert spearmans(GOLD, pred) == pytest.approx(spearmanr(GOLD, pred).statistic)
    assert kendalls(GOLD, pred) == pytest.approx(kendalltau(GOLD, pred).statistic)
    qwk = cohen_kappa_score(GOLD, pred, weights="quadratic", labels=[1, 2, 3, 4, 5])
    assert quadratic_kappas(GOLD, pred) == pytest.approx(qwk)


def test_quadratic_kappa_with_scale_values_nobody_used():
    gold, pred = [1, 2, 2, 4, 4], [2, 2, 3, 4, 2]  # no 3 in gold, no 1 in pred, no 5 anywhere
    assert quadratic_kappas(np.asarray(gold), np.asarray(pred)) == pytest.approx(
        cohen_kappa_score(gold, pred, weights="quadratic", labels=[1, 2, 3, 4, 5])
    )


def test_statistics_per_resample_along_an_axis():
    stacked_g, stacked_p = np.stack([GOLD, GOLD[::-1]]), np.stack([NOISY, NOISY])
    for fn, ref in ((spearmans, spearmanr), (kendalls, kendalltau)):
        values = fn(stacked_g, stacked_p, axis=-1)
        assert values.shape == (2,)
        assert values[1] == pytest.approx(ref(GOLD[::-1], NOISY).statistic)
    assert quadratic_kappas(stacked_g, stacked_p)[1] == pytest.approx(
        cohen_kappa_score(GOLD[::-1], NOISY, weights="quadratic")
    )


def test_constant_sides_are_undefined():
    same = np.full(5, 3)
    assert all(math.isnan(float(fn(same, same))) for fn in (spearmans, kendalls, quadratic_kappas))


def test_scale_agreement_on_expected_scores():
    pred = [float(x) for x in EXPECTED]
    pred[3] = None
    out = scale_agreement(list(GOLD), pred, seed=1)
    keep = [i for i in range(60) if i != 3]
    g, p = GOLD[keep], EXPECTED[keep]
    assert (out["records"], out["scored"]) == (60, 59) and out["coverage"] == pytest.approx(59 / 60)
    assert out["spearman"] == pytest.approx(spearmanr(g, p).statistic)
    assert out["kendall"] == pytest.approx(kendalltau(g, p).statistic)
    rounded = np.floor(p + 0.5).astype(int)
    assert out["quadratic_kappa"] == pytest.approx(cohen_kappa_score(g, rounded, weights="quadratic"))
    assert out["exact"] == pytest.approx(np.mean(g == rounded))
    assert out["mae"] == pytest.approx(np.mean(np.abs(g - rounded)))
    for name in ("spearman", "kendall", "quadratic_kappa"):
        low, high = out[f"{name}_ci"]
        assert low <= out[name] <= high and high - low < 0.5
    assert scale_agreement(list(GOLD), pred, seed=1) == out  # seeded: the same intervals


def test_scale_agreement_with_too_little_to_say():
    out = scale_agreement([1, 2, 3], [None, 2.0, None])
    assert out["scored"] == 1 and out["spearman"] is None and out["spearman_ci"] is None
    assert out["exact"] == 1.0
    constant = scale_agreement([1, 2, 3], [2.0, 2.0, 2.0])
    assert constant["spearman"] is None and constant["kendall_ci"] is None
    empty = scale_agreement([], [])
    assert empty["coverage"] is None and empty["exact"] is None


def test_preference_accuracy_counts_ties_half_and_reports_them():
    gold = [1, 1, 0, 0, 1, 0]
    a = [5, 3, 2, 4, None, 3]
    b = [2, 3, 4, 1, 2, 3]
    out = preference_accuracy(gold, a, b)
    # decided: pairs 0-3 and 5; right: 0 (5>2, gold a) and 2 (2<4, gold b); 3 wrong; ties: 1 and 5
    assert out == {
        "pairs": 6,
        "decided": 5,
        "ties": 2,
        "accuracy": pytest.approx((2 + 1) / 5),
        "accuracy_ties_wrong": pytest.approx(2 / 5),
        "accuracy_abstain_as_wrong": pytest.approx(3 / 6),
    }
    assert preference_accuracy([], [], [])["accuracy"] is None
