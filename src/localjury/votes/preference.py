"""Preference heads: which of two responses a judge's hidden states prefer, learned from a
user's preference pairs (a Bradley-Terry model on the judge's own states: a local reward model).

Each response of a pair is read as a pointwise record (its state at the judge prompt's last
token, see :mod:`localjury.votes.heads`); the head is a logistic regression with no intercept on
the difference of the two states, ``p(A better) = sigmoid(w . (x_A - x_B))``, fitted on every
pair in both orders. Swapping A and B negates the difference, so the head gives ``1 - p``:
position-free by construction, where a prompted pairwise judge must be asked in both orders.

Pure functions over arrays and labels (scikit-learn for the fits); no engine, no run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from localjury.errors import ConfigError
from localjury.votes.heads import _fit, grouped_folds, linear

if TYPE_CHECKING:
    import numpy as np


def both_orders(a: np.ndarray, b: np.ndarray, a_better: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """The training rows of pairs ``(a, b)``: ``a - b`` labeled ``a_better``, then ``b - a``
    labeled the other way (one row of each a pair, in that order)."""
    import numpy as np

    y = np.asarray(a_better)
    return np.concatenate([a - b, b - a]), np.concatenate([y, 1 - y])


def cross_validated_preference(
    a: np.ndarray,
    b: np.ndarray,
    a_better: Sequence[int],
    pairs: Sequence[str],
    *,
    folds: int = 5,
    seed: int = 0,
    reduce: bool = False,
) -> list[float]:
    """Each pair's probability that ``a`` is the better response, from a head fitted on the
    pairs of the other folds (grouped by ``pairs``, both orders of each pair on one side), its C
    (with ``reduce``, its PCA) chosen inside them.

    Raises:
        ConfigError: Fewer than two pairs, or the pairs' ids are not unique.
    """
    import numpy as np
    from scipy.special import expit

    if len(set(pairs)) != len(pairs) or len(pairs) < 2:
        raise ConfigError("cross-validating a preference head needs two pairs or more, each once")
    y, ids = np.asarray(a_better), np.asarray(pairs)
    out = np.zeros(len(y))
    for train, test in grouped_folds(list(pairs), list(a_better), folds, seed):
        x, labels = both_orders(a[train], b[train], y[train])
        model, _ = _fit(x, labels, np.concatenate([ids[train], ids[train]]), seed, reduce, odd=True)
        weights, _ = linear(model)
        out[test] = expit((a[test] - b[test]) @ weights)
    return [float(p) for p in out]


def fit_preference(
    a: np.ndarray, b: np.ndarray, a_better: Sequence[int], pairs: Sequence[str], seed: int = 0, reduce: bool = False
) -> tuple[np.ndarray, float]:
    """The head's weights over a state difference (no bias: swapping the pair gives ``1 - p``),
    fitted on every pair in both orders, and the C it chose."""
    import numpy as np

    x, labels = both_orders(a, b, a_better)
    model, chose = _fit(x, labels, np.concatenate([np.asarray(pairs)] * 2), seed, reduce, odd=True)
    weights, _ = linear(model)
    return weights, chose["C"]
