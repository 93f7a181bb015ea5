"""Preference heads: a Bradley-Terry head on the difference of two responses' states, checked
against scikit-learn directly, and position-free by construction."""

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, StratifiedGroupKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from localjury.errors import ConfigError
from localjury.votes.heads import C_GRID, HeadBinding
from localjury.votes.preference import both_orders, cross_validated_preference, fit_preference

BINDING = HeadBinding(model="A", weights_sha256="f" * 64, engine="fake", prompt_format="auto", criterion="Better?")


def pairs(n=60, dim=6, seed=0):
    """Pairs whose better response has a higher first number (the rest noise); A is the better
    one in every other pair."""
    rng = np.random.default_rng(seed)
    better, worse = rng.normal(size=(n, dim)), rng.normal(size=(n, dim))
    better[:, 0] += 1.5
    a_better = [i % 2 for i in range(n)]
    a = np.where(np.asarray(a_better)[:, None] == 1, better, worse)
    b = np.where(np.asarray(a_better)[:, None] == 1, worse, better)
    return a, b, a_better, [f"p{i}" for i in range(n)]


def direct(a, b, y, ids, train, seed):
    """The head of the pairs ``train`` as scikit-learn fits it: both orders, no intercept, the
    features scaled and not centred, C by a grouped 3-fold search."""
    x = np.concatenate([a[train] - b[train], b[train] - a[train]])
    labels = np.concatenate([y[train], 1 - y[train]])
    groups = np.concatenate([ids[train], ids[train]])
    inner = list(StratifiedGroupKFold(n_splits=3, shuffle=True, random_state=seed).split(x, labels, groups))
    pipe = make_pipeline(
        StandardScaler(with_mean=False), LogisticRegression(class_weight="balanced", max_iter=5000, fit_intercept=False)
    )
    return GridSearchCV(pipe, {"logisticregression__C": list(C_GRID)}, cv=inner, scoring="neg_log_loss").fit(x, labels)


def test_the_cross_validated_preference_equals_a_direct_scikit_learn_computation():
    a, b, a_better, ids = pairs()
    got = cross_validated_preference(a, b, a_better, ids, folds=4, seed=2)
    y, g = np.asarray(a_better), np.asarray(ids)
    want = np.zeros(len(y))
    for train, test in StratifiedGroupKFold(n_splits=4, shuffle=True, random_state=2).split(a, y, g):
        want[test] = direct(a, b, y, g, train, 2).predict_proba(a[test] - b[test])[:, 1]
    np.testing.assert_allclose(got, want, rtol=1e-9)
    assert np.mean((np.asarray(got) >= 0.5) == y) >= 0.75  # the signal found (the best rule gets 0.86)


def test_swapping_the_two_responses_gives_one_minus_p():
    a, b, a_better, ids = pairs()
    head = fit_preference(a, b, a_better, ids, 0, BINDING)
    weights = np.asarray(head.weights)
    model = direct(a, b, np.asarray(a_better), np.asarray(ids), np.arange(len(ids)), 0)
    p_ab = model.predict_proba(a - b)[:, 1]
    np.testing.assert_allclose(1 / (1 + np.exp(-(a - b) @ weights)), p_ab, rtol=1e-9)
    np.testing.assert_allclose(model.predict_proba(b - a)[:, 1], 1 - p_ab, rtol=1e-9)
    assert head.c == model.best_params_["logisticregression__C"]


def test_both_orders_gives_every_pair_once_each_way():
    a, b = np.array([[1.0, 2.0]]), np.array([[0.0, 5.0]])
    x, y = both_orders(a, b, [1])
    np.testing.assert_array_equal(x, [[1.0, -3.0], [-1.0, 3.0]])
    assert y.tolist() == [1, 0]


def test_a_preference_head_refuses_too_few_or_repeated_pairs():
    a, b, a_better, ids = pairs(n=4)
    with pytest.raises(ConfigError, match="two pairs or more, each once"):
        cross_validated_preference(a, b, a_better, ["p0", "p0", "p1", "p2"])
    with pytest.raises(ConfigError, match="two pairs or more"):
        cross_validated_preference(a[:1], b[:1], a_better[:1], ids[:1])
