"""The benchmark's figures against small cases computed by hand."""

import pytest

pytest.importorskip("sklearn")

from localjury.bench import stats

GOLD = [1, 1, 1, 0, 0, 0, 1, 0]
PRED = [1, 1, 0, 0, 1, 0, None, 0]


def test_classification_on_decided_records():
    c = stats.classification(GOLD, PRED, seed=1)
    assert (c["records"], c["decided"]) == (8, 7)
    assert c["abstention_rate"] == pytest.approx(1 / 8)
    assert c["accuracy"] == pytest.approx(5 / 7)
    assert c["accuracy_abstain_as_wrong"] == pytest.approx(5 / 8)
    assert c["balanced_accuracy"] == pytest.approx((2 / 3 + 3 / 4) / 2)
    # p_o = 5/7, p_e = (3/7)^2 + (4/7)^2 = 25/49 -> (35 - 25) / (49 - 25)
    assert c["kappa"] == pytest.approx(10 / 24)
    assert c["per_class"]["1"] == pytest.approx({"precision": 2 / 3, "recall": 2 / 3, "f1": 2 / 3, "support": 3})
    assert c["per_class"]["0"] == pytest.approx({"precision": 3 / 4, "recall": 3 / 4, "f1": 3 / 4, "support": 4})
    assert c["confusion"] == [[3, 1], [1, 2]]


def test_bootstrap_intervals_hold_the_estimate_and_are_reproducible():
    gold = [1, 0] * 20
    pred = [1, 0] * 15 + [0, 1] * 5
    c = stats.classification(gold, pred, seed=3)
    lo, hi = c["accuracy_ci"]
    assert 0 <= lo <= c["accuracy"] == 0.75 <= hi <= 1 and hi - lo < 0.5
    klo, khi = c["kappa_ci"]
    assert klo <= c["kappa"] <= khi
    assert stats.classification(gold, pred, seed=3)["accuracy_ci"] == c["accuracy_ci"]


def test_degenerate_cases():
    none = stats.classification([1, 0], [None, None])
    assert none["accuracy"] is None and none["abstention_rate"] == 1.0 and none["confusion"] is None
    one_class = stats.classification([1, 1, 1], [1, 1, 1])
    assert one_class["accuracy"] == 1.0 and one_class["balanced_accuracy"] is None and one_class["kappa"] is None
    # Constant opposite predictions: p_o = 0 = p_e, kappa = 0 (defined).
    assert stats.classification([1, 1], [0, 0])["kappa"] == 0.0


def test_pair_accuracy():
    pairs = {
        "a": [(1, 1), (0, 0)],
        "b": [(1, 0), (0, 0)],
        "c": [(1, None), (0, 0)],
        "d": [(1, 1)],
    }
    assert stats.pair_accuracy(pairs) == {
        "pairs": 3,
        "decided": 2,
        "pair_accuracy": 0.5,
        "pair_accuracy_abstain_as_wrong": pytest.approx(1 / 3),
    }


def test_self_consistency():
    sc = stats.self_consistency([[1, 1, 1], [1, 0, 1], [None, 0, 0], [1, None, None], [0]])
    assert sc["judgments"] == 3
    assert sc["unanimous"] == pytest.approx(2 / 3)
    assert sc["majority_agreement"] == pytest.approx((1 + 2 / 3 + 1) / 3)


def test_fleiss_and_pairwise_kappa():
    preds = {"A": [1, 0, 1, None], "B": [1, 0, 0, 1], "C": [1, 0, 1, 1]}
    # items: [1,1,1], [0,0,0], [1,0,1]: P = (1 + 1 + 1/3) / 3, P_e = (5/9)^2 + (4/9)^2
    assert stats.fleiss(preds) == {"models": 3, "records": 3, "kappa": pytest.approx(22 / 40)}
    matrix = stats.pairwise_kappa(preds)
    assert matrix["A"]["A"] == 1.0 and matrix["A"]["B"] == pytest.approx(0.4) == matrix["B"]["A"]
    assert stats.fleiss({"A": [1]})["kappa"] is None


def test_majority_baseline():
    assert stats.majority_baseline([1, 1, 0]) == {
        "predicts": 1,
        "accuracy": pytest.approx(2 / 3),
        "balanced_accuracy": 0.5,
        "kappa": 0.0,
        "class_counts": {"0": 1, "1": 2},
    }


def test_probabilistic_figures_by_hand():
    gold = [1, 1, 0, 0, 1]
    score = [0.9, 0.4, 0.6, 0.1, None]
    p = stats.probabilistic(gold, score, seed=2)
    assert p["scored"] == 4
    # Positive/negative pairs: (0.9>0.6), (0.9>0.1), (0.4<0.6), (0.4>0.1) -> 3 of 4 ranked right.
    assert p["auroc"] == pytest.approx(3 / 4)
    assert p["brier"] == pytest.approx((0.1**2 + 0.6**2 + 0.6**2 + 0.1**2) / 4)
    # One record per bin: |gold - score| averaged.
    assert p["ece"] == pytest.approx((0.1 + 0.6 + 0.6 + 0.1) / 4)
    lo, hi = p["auroc_ci"]
    assert 0 <= lo <= hi <= 1


def test_ece_pools_a_bin_and_closes_the_last():
    # Bin [0.8, 0.9): mean score 0.85, gold rate 0.5 -> 0.35 on 2 records; 1.0 falls in the last bin.
    gold, score = [1, 0, 1], [0.82, 0.88, 1.0]
    assert stats.expected_calibration_error(gold, score) == pytest.approx((2 * 0.35 + 0) / 3)
    bins = stats.reliability(gold, score)
    assert [(b["count"], b["low"]) for b in bins] == [(2, 0.8), (1, 0.9)]
    assert bins[0]["mean_score"] == pytest.approx(0.85) and bins[0]["positive_rate"] == 0.5


def test_probabilistic_degenerate():
    assert stats.probabilistic([1, 0], [None, None])["auroc"] is None
    one_class = stats.probabilistic([1, 1], [0.2, 0.9])
    assert one_class["auroc"] is None and one_class["auroc_ci"] is None
    assert one_class["brier"] == pytest.approx((0.8**2 + 0.1**2) / 2)


def test_both_orders_by_hand():
    # Four pairs. Picks (1: response_a) as given and swapped, corrected to the pair's frame.
    gold = [1, 0, 1, 0]
    as_given = [1, 0, 1, 1]  # right on pairs 0, 1, 2
    swapped = [1, 0, None, 0]  # right on pairs 0, 1, 3 (pair 2 has no pick: wrong, and no agreement)
    o = stats.both_orders(gold, as_given, swapped)
    assert o["items"] == 4 and o["accuracy_as_given"] == 0.75 and o["accuracy_swapped"] == 0.75
    assert o["accuracy"] == 0.75  # the LLMBar paper's figure: the mean of the two orders
    assert o["both_right"] == 0.5  # pairs 0 and 1
    assert o["positional_agreement"] == 0.5  # pairs 0 and 1 pick the same response in both orders
    assert o["no_pick"] == 1
    # A judge that always answers "A": right whenever A is the good one, never consistent.
    always_a = stats.both_orders([1, 0], [1, 1], [0, 0])
    assert (always_a["accuracy"], always_a["both_right"], always_a["positional_agreement"]) == (0.5, 0.0, 0.0)
    assert stats.both_orders([], [], []) == {"items": 0}


def old_bootstrap_ci(gold, pred, statistic, seed=0, resamples=1000):
    """The interval as it was computed before the statistics were vectorised: scipy's
    bootstrap calling a scikit-learn statistic once per resample."""
    import warnings

    import numpy as np
    from scipy.stats import bootstrap

    def stat(g, p):
        value = statistic(g.tolist(), p.tolist())
        return float("nan") if value is None else value

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = bootstrap((np.asarray(gold), np.asarray(pred)), stat, paired=True, vectorized=False,
                        n_resamples=resamples, confidence_level=0.95, method="percentile",
                        rng=np.random.default_rng(seed))  # fmt: skip
    return res.confidence_interval.low, res.confidence_interval.high


@pytest.mark.parametrize("seed", range(6))
def test_vectorised_kappa_accuracy_and_auroc_equal_scikit_learns(seed):
    import warnings

    import numpy as np
    from sklearn.metrics import cohen_kappa_score, roc_auc_score

    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 60))
    gold = rng.integers(0, 2, n)
    pred = np.where(rng.random(n) < 0.7, gold, 1 - gold)
    if seed == 0:
        pred[:] = gold[:] = 1  # one label in common: kappa undefined
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # undefined kappa
        want = cohen_kappa_score(gold, pred, labels=[0, 1])
    got = float(stats.kappas(gold, pred))
    assert (np.isnan(want) and np.isnan(got)) or got == pytest.approx(want, abs=1e-12)
    # Coarse scores (many ties) and fine ones.
    score = np.round(rng.random(n) * (3 if seed % 2 else 1000)) / (3 if seed % 2 else 1000)
    gold[:2] = [0, 1]
    assert stats.auroc_of(score[gold == 1], score[gold == 0]) == pytest.approx(roc_auc_score(gold, score), abs=1e-12)
    # The intervals are those of the per-resample computation, on the same resamples.
    for vectorised, per_call in ((stats.kappas, stats._kappa), (stats.accuracies, stats._accuracy)):
        new = stats.bootstrap_ci(gold.tolist(), pred.tolist(), vectorised, seed=seed, resamples=300)
        old = old_bootstrap_ci(gold.tolist(), pred.tolist(), per_call, seed=seed, resamples=300)
        if new is None:
            assert np.isnan(old[0]) or np.isnan(old[1])
        else:
            assert new == pytest.approx(old, abs=1e-9)


def test_kappa_has_an_interval_where_a_few_resamples_hold_one_class_only():
    """40 records, 3 of them positive and found: about 4% of resamples hold no positive at all,
    where κ is undefined; the interval is that of the others (it was none: scipy's is NaN)."""
    import numpy as np

    gold = [1, 1, 1] + [0] * 37
    pred = [1, 1, 1] + [0] * 35 + [1, 1]
    low, high = stats.bootstrap_ci(gold, pred, stats.kappas, seed=0)
    kappa = stats.kappas(np.array(gold), np.array(pred))
    assert -1 <= low < kappa < high <= 1
    # Where most resamples are undefined, still none: one positive in 40.
    assert stats.bootstrap_ci([1] + [0] * 39, [1] + [0] * 39, stats.kappas, seed=0) is None
